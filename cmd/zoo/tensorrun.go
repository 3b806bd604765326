package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// isTensorFile reports whether `zoo run --input` names arrays (fed to the graph's inputs as
// they are) rather than text.
func isTensorFile(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy", ".npz", ".safetensors":
		return true
	}
	return false
}

// textOnlyFlags are run's flags that shape text into windows; they do not apply to arrays.
var textOnlyFlags = []string{flagTokenizer.Name, flagFeed.Name, "pool", "normalize", "window", "batch", "max-windows"}

// runArrays is `zoo run` with --input a .npy, .npz or .safetensors file: one run of
// the graph on those arrays, every output reported and, with --output, written.
func runArrays(ctx context.Context, c flags, stdout, stderr io.Writer, ref, inPath, outPath string) error {
	for _, f := range textOnlyFlags {
		if c.IsSet(f) {
			return badInputf("--%s does not apply to --input %s: arrays are fed to the inputs as they are (it shapes text into windows)", f, inPath)
		}
	}
	ext := strings.ToLower(filepath.Ext(outPath))
	if outPath != "" {
		if ext != ".json" && ext != ".npy" && ext != ".safetensors" {
			return badInputf("output %s: unknown format %q; use .json, .npy or .safetensors", outPath, ext)
		}
		if err := checkOutputPath(outPath); err != nil {
			return badInput(err)
		}
	}
	if c.Int("threads") < 0 {
		return badInputf("--threads must not be negative")
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	t0 := time.Now()
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return err
	}
	opts.Precision, opts.Threads = prec, c.Int("threads")
	m, err := loadWith(ctx, c, ref, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	only := ""
	if ext == ".npy" {
		if only, err = runout.SelectArrayOutput(m.Graph(), c.String("select")); err != nil {
			return badInput(err)
		}
	}
	arrays, err := zooroot.ReadArrays(inPath, m.Graph(), m.Name())
	if err != nil {
		return badInput(err)
	}
	inputs, feeds, err := zooroot.BindArrays(m.Graph(), arrays, inPath, m.Name())
	if err != nil {
		return badInputf("%s does not fit %s: %w", inPath, m.Name(), err)
	}
	if err := zooroot.GuardInputs(m.Name()+" on "+inPath, m.Graph(), inputs, "", 1); err != nil {
		return err
	}
	t1 := time.Now()
	choice, err := m.Compile(ctx)
	if err != nil {
		return err
	}
	t2 := time.Now()
	printCompileReport(ctx, stderr, m)
	outs, err := m.Run(ctx, inputs)
	if err != nil {
		return failed(err)
	}
	t3 := time.Now()
	rep := runout.ArrayReport{Model: m.Name(), Weights: m.Weights(), Backend: choice.Backend.Name(), Level: choice.Probe.Level,
		Why: choice.Why, Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), prec), Input: inPath, Inputs: feeds, Outputs: map[string][]int{},
		BuildMS: format.MS(t1.Sub(t0)), CompileMS: format.MS(t2.Sub(t1)), RunMS: format.MS(t3.Sub(t2))}
	if c.Int("threads") > 0 && c.Int("threads") < rep.Threads {
		rep.Threads = c.Int("threads")
	}
	var named []tensorio.Named
	for _, o := range m.Graph().Outputs {
		t := outs[o.Name]
		if t == nil {
			return failed(fmt.Errorf("run %s: the backend returned no output %s", m.Name(), o.Name))
		}
		rep.Outputs[o.Name] = t.Shape
		if only == "" || o.Name == only {
			named = append(named, tensorio.Named{Name: o.Name, Tensor: t})
		}
	}
	if outPath != "" {
		if err := runout.WriteArrays(outPath, named, map[string]string{"model": rep.Model, "backend": rep.Backend + " (" + rep.Level + ")", "input": inPath}); err != nil {
			return failed(err)
		}
		rep.Written = []string{outPath}
	}
	if c.Bool(flagJSON.Name) {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	runout.PrintArrays(stdout, rep)
	return nil
}
