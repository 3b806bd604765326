package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

func embedCommand() *cli.Command {
	return &cli.Command{
		Name:      "embed",
		Usage:     "one embedding per line of a text file, as sentence-transformers' encode(list) gives",
		ArgsUsage: "NAME[.PRESET]|FILE.onnx",
		Description: "Each line (without its line break; empty lines are skipped) is one text: tokenized with the model's\n" +
			"tokenizer and its special tokens, run in batches, pooled (--pool mean or cls) and, with --normalize,\n" +
			"L2-normalised. A line longer than the window is an error naming it, unless --truncate. The embeddings\n" +
			"are written as an (N, d) array: .npy, .safetensors (tensor embedding) or .json; --json prints them." +
			examples("zoo embed vanilla.tiny -i sentences.txt -o emb.npy",
				"zoo embed model.onnx -i sentences.txt --normalize --json", "zoo embed vanilla.tiny --input sentences.txt -o emb.json"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE`, one text per line (- for standard input)", Required: true},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the (N, d) embeddings to `FILE`.npy, .safetensors or .json"},
			flagTokenizer, flagFeed,
			&cli.StringFlag{Name: "pool", Value: string(zooroot.PoolMean), Usage: "mean (over real tokens) or cls (the first token)"},
			&cli.BoolFlag{Name: "normalize", Usage: "L2-normalise the embeddings"},
			&cli.BoolFlag{Name: "truncate", Usage: "cut a line longer than the window to its first window instead of refusing it"},
			&cli.IntFlag{Name: "window", Usage: "tokens per line at most, special tokens included (0: min(512, the model's maximum length))"},
			&cli.IntFlag{Name: "batch", Value: 32, Usage: "lines per batch"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagPrecision(), flagBackend, flagJSON,
		),
		Action: embedAction,
	}
}

func embedAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("embed: want one model name (see `zoo list`) or .onnx file, got %d arguments", c.NArg())
	}
	inPath, outPath := c.String("input"), c.String("output")
	if ext := strings.ToLower(filepath.Ext(outPath)); outPath != "" && ext != ".npy" && ext != ".json" && ext != ".safetensors" {
		return badInputf("output %s: unknown format %q; use .npy, .safetensors or .json", outPath, ext)
	}
	inPath, lines, numbers, err := readInputLines(inPath, c.App.Reader, c.App.ErrWriter)
	if err != nil {
		return err
	}
	m, err := loadRunModel(c.Context, c, c.Args().First())
	if err != nil {
		return err
	}
	defer m.Close()
	enc, err := m.NewEncoder(zooroot.EncoderOptions{Window: c.Int("window"), Batch: c.Int("batch"), Pool: zooroot.Pool(c.String("pool")),
		Normalize: c.Bool("normalize"), Truncate: c.Bool("truncate"), Feeds: c.StringSlice(flagFeed.Name)})
	if err != nil {
		return err
	}
	vecs, err := enc.Embed(c.Context, lines...)
	if err != nil {
		return tooLongLine(err, inPath, numbers, m)
	}
	return writeEmbeddings(c.App.Writer, outPath, c.Bool(flagJSON.Name), m.Name(), vecs)
}

// readInputLines reads the input at path (as openInput opens it: "-" is stdin) and returns
// its name, its non-empty lines and each one's line number (zoo embed, zoo rerank); an input
// with no text, or one that cannot be read, is a bad-input error naming it.
func readInputLines(path string, stdin io.Reader, stderr io.Writer) (name string, lines []string, numbers []int, err error) {
	name, in, _, err := openInput(path, stdin, stderr)
	if err != nil {
		return "", nil, nil, err
	}
	defer in.Close()
	if lines, numbers, err = readLines(in); err != nil {
		return "", nil, nil, badInputf("input %s: %w", name, err)
	}
	return name, lines, numbers, nil
}

// tooLongLine turns a line of the input at inPath that is over the window (a
// zooroot.TooLongError for the text or pair at index i, read as line numbers[i]) into a
// bad-input error naming the line; other errors pass unchanged.
func tooLongLine(err error, inPath string, numbers []int, m *zooroot.Model) error {
	var long *zooroot.TooLongError
	switch {
	case !errors.As(err, &long) || long.Index < 0 || long.Index >= len(numbers):
		return err
	case long.Pair:
		return badInputf("input %s line %d is %d tokens with the query, longer than the window of %d tokens (%s's maximum length is %d); cut it with --truncate",
			inPath, numbers[long.Index], long.Tokens, long.Window, m.Name(), m.Info().MaxLen)
	}
	return badInputf("input %s line %d is longer than the window of %d tokens (%s's maximum length is %d); cut it with --truncate",
		inPath, numbers[long.Index], long.Window, m.Name(), m.Info().MaxLen)
}

// readLines returns the non-empty lines of r (without their line breaks) and each one's line
// number.
func readLines(r io.Reader) ([]string, []int, error) {
	var lines []string
	var numbers []int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<30)
	for n := 1; sc.Scan(); n++ {
		if line := strings.TrimRight(sc.Text(), "\r"); strings.TrimSpace(line) != "" {
			lines, numbers = append(lines, line), append(numbers, n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if len(lines) == 0 {
		return nil, nil, fmt.Errorf("no text: every line is empty")
	}
	return lines, numbers, nil
}

// writeEmbeddings writes the (N, d) embeddings to path (when given) and prints them as JSON
// (asJSON) or a one-line summary.
func writeEmbeddings(w io.Writer, path string, asJSON bool, model string, vecs [][]float32) error {
	d := len(vecs[0])
	t := &tensor.Tensor{DType: tensor.Float32, Shape: []int{len(vecs), d}, F32: make([]float32, 0, len(vecs)*d)}
	for _, v := range vecs {
		t.F32 = append(t.F32, v...)
	}
	if path != "" {
		if err := checkOutputPath(path); err != nil {
			return badInput(err)
		}
		arrays := []tensorio.Named{{Name: zooroot.PoolOutput, Tensor: t}}
		if err := runout.WriteArrays(path, arrays, map[string]string{"model": model}); err != nil {
			return failed(err)
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"model": model, "shape": t.Shape, "embeddings": vecs})
	}
	fmt.Fprintf(w, "%s: %s of %d\n", model, format.Plural(len(vecs), "embedding"), d)
	if path != "" {
		fmt.Fprintf(w, "wrote %s\n", path)
	}
	return nil
}
