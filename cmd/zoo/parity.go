package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/paritycheck"
	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func parityCommand() *cli.Command {
	return &cli.Command{
		Name:  "parity",
		Usage: "run a variant (exported to ONNX) or an .onnx file on a zoo backend and on ONNX Runtime, and compare every output",
		Description: "Rule: " + parity.Rule + ".\n" +
			"Only valid positions are compared. Text models (see `zoo show` for the role of each input) are fed as `zoo run`\n" +
			"feeds them: the tokenizer next to an .onnx file or --tokenizer, windows with its special tokens, padded to\n" +
			"static shapes. Without --input they read the built-in sample text (examples/text.txt): 3 windows of 37, 29\n" +
			"and 11 tokens (padded to 37); with --input, the first batch of windows of --window tokens.\n" +
			"Models with other inputs get deterministic data from --seed: batch 2, length 37 for\n" +
			"symbolic dims, the last 8 positions of row 2 padded. With --layers, layer outputs are the values the variant\n" +
			"records in its metadata (layer_output.N), or for other files every LayerNormalization output. ONNX Runtime is found through " + ort.LibraryEnv + " (see `go doc ./onnx/ort`).\n" +
			paritycheck.PrecisionDoc +
			examples("zoo parity linformer.tiny --input text.txt --atol 1e-5", "zoo parity model.onnx --layers",
				"zoo parity vanilla.tiny --precision bf16 --json"),
		ArgsUsage: "NAME[.PRESET]|FILE.onnx",
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` to encode (text models: see `zoo show`)"},
			&cli.Float64Flag{Name: "atol", Value: 1e-4, Usage: "absolute tolerance"},
			&cli.Float64Flag{Name: "rtol", Value: 1e-4, Usage: "relative tolerance"},
			&cli.IntFlag{Name: "window", Value: defaultParityWindow, Usage: "tokens per window with --input (at most the model's maximum length or static length)"},
			flagTokenizer, flagFeed,
			&cli.IntFlag{Name: "threads", Usage: "worker threads for both runtimes (0: every core)"},
			&cli.BoolFlag{Name: "layers", Usage: "also compare every encoder layer's output and name the first that diverges"},
			flagPrecision(), flagBackend, flagJSON,
		),
		Action: parityAction,
	}
}

func parityAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("parity: want one model name or .onnx file, got %d arguments", c.NArg())
	}
	ref, input := c.Args().First(), c.String("input")
	fromFile := zooroot.IsONNXPath(ref)
	fl := paritycheck.Flags{Atol: c.Float64("atol"), Rtol: c.Float64("rtol"), Input: input, Window: c.Int("window"), WindowSet: c.IsSet("window"), Threads: c.Int("threads")}
	if err := fl.Check(); err != nil {
		return badInput(err)
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	if err := paritycheck.CheckPrecisionFlags(prec, c.IsSet); err != nil {
		return badInput(err)
	}
	tk, err := zooroot.ChooseTokenizer(c.String(flagTokenizer.Name), ref, fromFile)
	if err != nil {
		return badInput(err)
	}
	var m *zooroot.Model
	if fromFile {
		if err := paritycheck.CheckFileFlags(ref, c.IsSet); err != nil {
			return badInput(err)
		}
	} else if m, err = loadModel(c.Context, c, ref); err != nil {
		return err
	}
	// The model as ONNX bytes: the file, or the variant's export (so the graph zoo runs is
	// exactly the graph ONNX Runtime runs).
	data, g, name, err := parityGraph(ref, m)
	if err != nil {
		return err
	}
	plan, planErr := planFeeds(g, c.StringSlice(flagFeed.Name))
	if planErr != nil && len(c.StringSlice(flagFeed.Name)) > 0 {
		return badInput(planErr)
	}
	if fromFile && planErr == nil && c.IsSet(flagSeed.Name) {
		return badInputf("--seed does not apply to %s: its weights are fixed and it takes token ids, which come from the text (--input, or the sample text); --seed seeds a variant's weights and the synthetic inputs of models without token inputs", ref)
	}
	k := &paritycheck.Check{Name: name, Graph: g, Atol: fl.Atol, Rtol: fl.Rtol, Threads: fl.Threads, Precision: prec, JSON: c.Bool(flagJSON.Name)}
	if c.Bool("layers") {
		if k.Layers = paritycheck.LayerValues(g); len(k.Layers) == 0 {
			return badInputf("--layers: model %s records no layer outputs and has no LayerNormalization nodes", name)
		}
		if data, err = paritycheck.ExportWithOutputs(g, k.Layers, version); err != nil {
			return failed(fmt.Errorf("--layers: %w", err))
		}
	}
	if k.Inputs, k.Valid, err = parityInputs(c.Context, g, plan, planErr, tk, input, fl.TextWindow(), c.Uint64(flagSeed.Name)); err != nil {
		return badInput(err)
	}
	if err := guardParity(name, g, k.Inputs, input != ""); err != nil {
		return err
	}
	if prec != "" && prec != "fp32" {
		return parityPrecision(c.Context, c.App.Writer, k, c.String(flagBackend.Name))
	}
	if planErr == nil {
		k.PerToken = zooroot.SeqAligned(g, plan.Seq)
	}
	rt, err := ort.Open()
	if err != nil {
		return failed(fmt.Errorf("parity needs ONNX Runtime as the reference: %w", err))
	}
	want, err := k.Reference(rt, data)
	if err != nil {
		return failed(err)
	}
	choice, err := selectBackend(c.String(flagBackend.Name), prec)
	if err != nil {
		return err
	}
	return failed(k.Run(c.Context, c.App.Writer, choice, want, rt.Version))
}

// tokenizerVocab is the vocabulary size of a tokenizer file (--tokenizer, or the one next to
// an .onnx file), 0 for zoo's byte tokenizer (the variant keeps its own vocab).
func tokenizerVocab(tk *zooroot.Tokenizer) int {
	if tk.Path == "" {
		return 0
	}
	return tk.Tokenizer.VocabSize()
}

// selectBackend chooses the backend named (--backend; "" for the default) and refuses a
// precision prec it has no path for here; both are bad input.
func selectBackend(name, prec string) (backends.Choice, error) {
	choice, err := backends.Select(name)
	if err != nil {
		return backends.Choice{}, badInput(err)
	}
	return choice, zooroot.CheckPrecision(choice, prec)
}

// parityGraph returns the model parity compares as ONNX bytes, the graph imported from them
// and its name: the .onnx file ref when m is nil, else the loaded variant m's export.
func parityGraph(ref string, m *zooroot.Model) ([]byte, *graph.Graph, string, error) {
	var data []byte
	var err error
	name := ref
	if m == nil {
		if data, err = onnx.ReadFile(ref); err != nil { // external data read in
			return nil, nil, "", badInputf("model %s: %w", ref, cmp.Or(errors.Unwrap(err), err))
		}
	} else {
		name = m.Name()
		if data, err = onnx.Export(m.Graph(), onnx.ExportOptions{ProducerVersion: version}); err != nil {
			return nil, nil, "", failed(fmt.Errorf("export %s: %w", name, err))
		}
	}
	g, err := onnx.Import(data)
	if err != nil {
		return nil, nil, "", badInputf("model %s: %w", ref, err)
	}
	return data, g, name, nil
}

// parityInputs feeds g: a text model (plan, planErr nil) as `zoo run` does (textInputs), any
// other model synthetic data from seed; --input (input) applies to text models only.
func parityInputs(ctx context.Context, g *graph.Graph, plan *zooroot.FeedPlan, planErr error, tk *zooroot.Tokenizer, input string, window int, seed uint64) (map[string]*tensor.Tensor, []bool, error) {
	switch {
	case planErr == nil:
		return textInputs(ctx, g, plan, tk, input, window)
	case input != "":
		return nil, nil, fmt.Errorf("--input: %w (omit --input to use synthetic data)", planErr)
	}
	return paritycheck.SyntheticInputs(g, seed)
}

// parityPrecision is `zoo parity --precision prec` for a precision other than fp32
// (k.Precision): it runs k's graph on its inputs on the backend named (--backend) in fp32 and
// in that precision and reports the second against the first on the hidden output
// (paritycheck.ComparePrecision). A model without a hidden output, or a precision the
// backend has no path for, is bad input (exit 2); a failed compile or run, or non-finite
// values, a failed job.
func parityPrecision(ctx context.Context, w io.Writer, k *paritycheck.Check, backend string) error {
	out, err := paritycheck.HiddenOutput(k.Graph, zooroot.TokenOutputs())
	if err != nil {
		return badInputf("--precision %s: model %s: %w", k.Precision, k.Name, err)
	}
	choice, err := selectBackend(backend, k.Precision)
	if err != nil {
		return err
	}
	rep, err := paritycheck.ComparePrecision(ctx, choice, k.Graph, k.Name, out, k.Inputs, k.Valid, k.Precision, k.Threads)
	if err != nil {
		return failed(err)
	}
	if k.JSON {
		return format.WriteJSON(w, rep)
	}
	paritycheck.PrintPrecision(w, *rep)
	return nil
}

// textInputs feeds a text model as `zoo run` does: the tokenizer's windows of the text at
// textPath (its first batch, windows of window tokens, or the model's maximum length when 0),
// or without a path 3 windows of the sample text of 37, 29 and 11 tokens; every input by its
// role, padded to static shapes. It returns the valid-position mask of the padded inputs.
func textInputs(ctx context.Context, g *graph.Graph, plan *zooroot.FeedPlan, tk *zooroot.Tokenizer, textPath string, window int) (map[string]*tensor.Tensor, []bool, error) {
	var b *tokenize.Batch
	var err error
	switch {
	case textPath != "":
		requested := window
		if window, err = zooroot.ChooseWindow(g.Name, zooroot.MetaMaxLen(g), plan, window); err != nil {
			return nil, nil, err
		}
		if requested == 0 {
			window = min(window, defaultParityWindow)
		}
		f, err := os.Open(textPath)
		if err != nil {
			return nil, nil, fmt.Errorf("input %s: %w", textPath, errors.Unwrap(err))
		}
		defer f.Close()
		rows := 4
		if plan.Batch > 0 {
			rows = plan.Batch
		}
		src, stop, err := zooroot.NewWindows(ctx, tk, f, window, rows, plan.VocabRows, plan.VocabFrom)
		if err != nil {
			return nil, nil, err
		}
		defer stop()
		if b, err = src.Next(); err != nil {
			return nil, nil, fmt.Errorf("input %s: no text to encode (%v)", textPath, err)
		}
	default:
		if b, err = sampleWindows(ctx, tk, plan, []int{37, 29, 11}); err != nil {
			return nil, nil, err
		}
	}
	if plan.Seq > 0 {
		b = zooroot.PadBatch(b, plan.Seq, tk.PadID())
	}
	inputs, err := plan.Tensors(b, tk.PadID())
	if err != nil {
		return nil, nil, err
	}
	return inputs, plan.Valid(b, inputs), nil
}

// defaultParityWindow is --window's default: short, so that parity runs in moments.
const defaultParityWindow = 64

// sampleWindows returns windows of the given token lengths (each capped at the model's static
// batch and length) cut from the sample text, consecutive pieces, with the tokenizer's
// special tokens in each.
func sampleWindows(ctx context.Context, tk *zooroot.Tokenizer, plan *zooroot.FeedPlan, lengths []int) (*tokenize.Batch, error) {
	if _, ok := tk.Tokenizer.(tokenize.Bytes); ok && plan.Seq == 0 && plan.Batch == 0 && (plan.MaxLen == 0 || plan.MaxLen >= slices.Max(lengths)) {
		return paritycheck.SampleBatch(zooroot.SampleText, lengths...), nil
	}
	if plan.Batch > 0 && len(lengths) > plan.Batch {
		lengths = lengths[:plan.Batch]
	}
	longest := 0
	for i, l := range lengths {
		if plan.Seq > 0 {
			lengths[i] = min(l, plan.Seq)
		}
		if plan.MaxLen > 0 {
			lengths[i] = min(lengths[i], plan.MaxLen)
		}
		longest = max(longest, lengths[i])
	}
	// One window of the longest length per row, from the text; then each row cut to its length
	// with the suffix kept at its end.
	src, stop, err := zooroot.NewWindows(ctx, tk, bytes.NewReader(zooroot.SampleText), longest, len(lengths), plan.VocabRows, plan.VocabFrom)
	if err != nil {
		return nil, err
	}
	defer stop()
	full, err := src.Next()
	if err != nil {
		return nil, fmt.Errorf("sample text: %w", err)
	}
	_, suffix := tk.Tokenizer.Affixes()
	return paritycheck.CutRows(full, lengths, suffix.IDs, tk.PadID()), nil
}

// guardParity checks a parity run (ONNX Runtime and zoo, each holding the model) at its
// inputs' shapes; the advice names --window when the tokens come from --input.
func guardParity(name string, g *graph.Graph, inputs map[string]*tensor.Tensor, fromText bool) error {
	window := ""
	if fromText {
		window = "--window"
	}
	return zooroot.GuardInputs(name, g, inputs, window, 2)
}
