// Command batches writes the training batches that `zoo train` feeds on steps 1 … N (zoo's
// own data pipeline, zoo/lmdata), for gen_seed_training.py to train PyTorch's seed module on
// exactly the same inputs:
//
//	go run ./cmd/zoo/testdata/train/batches -input examples/text.txt -window 24 -batch 3 \
//	    -objective mlm -seed 7 -steps 5 OUT.safetensors
//
// OUT holds step<k>.tokens, step<k>.key_padding_mask (true: padding) and step<k>.targets
// (lmdata.IgnoreIndex where a position is not counted) for each step k.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

func main() {
	input := flag.String("input", "examples/text.txt", "training text")
	window := flag.Int("window", 24, "tokens per window")
	batch := flag.Int("batch", 3, "windows per step")
	objective := flag.String("objective", "mlm", "mlm or clm")
	seed := flag.Uint64("seed", 7, "seed of the masks")
	steps := flag.Int("steps", 5, "steps to write")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: batches [flags] OUT.safetensors")
		os.Exit(2)
	}
	if err := write(flag.Arg(0), *input, *window, *batch, *objective, *seed, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "batches:", err)
		os.Exit(1)
	}
}

func write(out, input string, window, batch int, objective string, seed uint64, steps int) error {
	f, err := os.Open(input)
	if err != nil {
		return err
	}
	defer f.Close()
	windows, err := lmdata.ReadWindows(f, window)
	if err != nil {
		return err
	}
	obj, err := lmdata.ParseObjective(objective)
	if err != nil {
		return err
	}
	l, err := lmdata.NewLoader(windows, lmdata.ByteOptions(obj, batch, seed))
	if err != nil {
		return err
	}
	var list []tensorio.Named
	for k := 1; k <= steps; k++ {
		b, err := l.Step(k)
		if err != nil {
			return err
		}
		tokens, mask := b.Tensors()
		p := fmt.Sprintf("step%d.", k)
		list = append(list, tensorio.Named{Name: p + "tokens", Tensor: tokens}, tensorio.Named{Name: p + "key_padding_mask", Tensor: mask},
			tensorio.Named{Name: p + "targets", Tensor: &tensor.Tensor{DType: tensor.Int64, Shape: []int{b.B, b.N}, I64: b.Targets}})
	}
	meta := map[string]string{"input": input, "window": fmt.Sprint(window), "batch": fmt.Sprint(batch),
		"objective": objective, "seed": fmt.Sprint(seed), "steps": fmt.Sprint(steps)}
	return tensorio.AtomicWriteFile(out, func(w io.Writer) error { return tensorio.WriteSafetensors(w, list, meta) })
}
