package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
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
			precisionParityDoc +
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
	ref := c.Args().First()
	atol, rtol := c.Float64("atol"), c.Float64("rtol")
	if !(atol >= 0 && rtol >= 0) || math.IsInf(atol, 0) || math.IsInf(rtol, 0) {
		return badInputf("--atol and --rtol must be finite and >= 0 (got %g, %g)", atol, rtol)
	}
	if c.IsSet("window") && c.String("input") == "" {
		return badInputf("--window applies with --input: without it, parity feeds the sample text in fixed windows (or synthetic data)")
	}
	if c.Int("threads") < 0 || c.Int("window") < 1 {
		return badInputf("--threads must not be negative and --window must be at least 1")
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	if err := checkPrecisionParityFlags(c, prec); err != nil {
		return err
	}
	// The model as ONNX bytes: the file, or the variant's export (so the graph zoo runs is
	// exactly the graph ONNX Runtime runs).
	var data []byte
	name := ref
	fromFile := zooroot.IsONNXPath(ref)
	tk, err := zooroot.ChooseTokenizer(c.String(flagTokenizer.Name), ref, fromFile)
	if err != nil {
		return badInput(err)
	}
	if fromFile {
		for _, f := range []string{flagPreset.Name, flagSet.Name} {
			if c.IsSet(f) {
				return badInputf("--%s does not apply to %s: an ONNX file's hyperparameters are fixed (--preset and --set shape a variant)", f, ref)
			}
		}
		if data, err = onnx.ReadFile(ref); err != nil { // external data read in
			return badInputf("model %s: %w", ref, errors.Unwrap(err))
		}
	} else {
		m, err := loadModel(c.Context, c, ref)
		if err != nil {
			return err
		}
		name = m.Name()
		if data, err = onnx.Export(m.Graph(), onnx.ExportOptions{ProducerVersion: version}); err != nil {
			return failed(fmt.Errorf("export %s: %w", name, err))
		}
	}
	g, err := onnx.Import(data)
	if err != nil {
		return badInputf("model %s: %w", ref, err)
	}
	plan, planErr := planFeeds(g, c.StringSlice(flagFeed.Name))
	if planErr != nil && len(c.StringSlice(flagFeed.Name)) > 0 {
		return badInput(planErr)
	}
	if fromFile && planErr == nil && c.IsSet(flagSeed.Name) {
		return badInputf("--seed does not apply to %s: its weights are fixed and it takes token ids, which come from the text (--input, or the sample text); --seed seeds a variant's weights and the synthetic inputs of models without token inputs", ref)
	}
	var layers []layerValue
	if c.Bool("layers") {
		if layers = layerValues(g); len(layers) == 0 {
			return badInputf("--layers: model %s records no layer outputs and has no LayerNormalization nodes", name)
		}
		if data, err = exportWithOutputs(g, layers); err != nil {
			return failed(fmt.Errorf("--layers: %w", err))
		}
	}
	var inputs map[string]*tensor.Tensor
	var valid []bool
	if planErr == nil {
		window := c.Int("window")
		if !c.IsSet("window") {
			window = 0
		}
		inputs, valid, err = textInputs(c, g, plan, tk, c.String("input"), window)
	} else if c.String("input") != "" {
		err = fmt.Errorf("--input: %w (omit --input to use synthetic data)", planErr)
	} else {
		inputs, valid, err = parityInputs(g, c.Uint64(flagSeed.Name))
	}
	if err != nil {
		return badInput(err)
	}

	window := ""
	if c.String("input") != "" {
		window = "--window"
	}
	if err := zooroot.GuardInputs(name, g, inputs, window, 2); err != nil {
		return err
	}
	if prec != "" && prec != "fp32" {
		return parityPrecision(c, name, g, inputs, valid, prec)
	}
	rt, err := ort.Open()
	if err != nil {
		return failed(fmt.Errorf("parity needs ONNX Runtime as the reference: %w", err))
	}
	sess, err := rt.NewSession(data, ort.SessionOptions{Threads: c.Int("threads")})
	if err != nil {
		return failed(fmt.Errorf("model %s: %w", name, err))
	}
	defer sess.Close()
	want, err := sess.Run(inputs, nil)
	if err != nil {
		return failed(fmt.Errorf("model %s: %w", name, err))
	}

	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	if err := zooroot.CheckPrecision(choice, prec); err != nil {
		return err
	}
	keep := make([]string, len(layers))
	for i, l := range layers {
		keep[i] = l.Value
	}
	prog, err := choice.Backend.Compile(g, backends.Options{Threads: c.Int("threads"), KeepIntermediates: keep, Precision: prec})
	if err != nil {
		return failed(fmt.Errorf("compile %s on %s: %w", name, choice.Backend.Name(), err))
	}
	defer prog.Close()
	got, err := prog.Run(c.Context, inputs)
	if err != nil {
		return failed(fmt.Errorf("run %s on %s: %w", name, choice.Backend.Name(), err))
	}

	var results []parity.Result
	perToken := map[string]bool{}
	if planErr == nil {
		perToken = zooroot.SeqAligned(g, plan.Seq)
	}
	for _, out := range g.Outputs {
		v := validFor(got[out.Name], valid)
		if aligned, known := perToken[out.Name]; known && !aligned {
			v = nil // one value per window (e.g. a pooler's output): every value counts
		}
		results = append(results, parity.Compare(out.Name, got[out.Name], want[out.Name], v, atol, rtol))
	}
	var layerResults []parity.Result
	for _, l := range layers {
		r := parity.Compare(l.Label, got[l.Value], want[l.Value], validFor(got[l.Value], valid), atol, rtol)
		layerResults = append(layerResults, r)
	}
	reference := "onnxruntime " + rt.Version
	if n := sess.Note(); n != "" {
		reference += " at " + n // ONNX Runtime's optimizer failed at its default level
	}
	opts := parity.RenderOptions{
		Got:  fmt.Sprintf("zoo %s (%s) on %s", choice.Backend.Name(), choice.Probe.Level, name),
		Want: reference,
		JSON: c.Bool(flagJSON.Name),
	}
	if len(layers) > 0 {
		if err := renderLayers(c.App.Writer, layerResults, results, opts); err != nil {
			return failed(err)
		}
	} else if err := parity.Render(c.App.Writer, results, opts); err != nil {
		return failed(err)
	}
	for _, r := range layerResults {
		if !r.Pass {
			return failed(fmt.Errorf("parity: %s first diverges from ONNX Runtime at %s (max abs error %.3g, atol %g / rtol %g)", name, r.Name, r.MaxAbs, atol, rtol))
		}
	}
	if !parity.AllPass(results) {
		return failed(fmt.Errorf("parity: %s differs from ONNX Runtime beyond atol %g / rtol %g (outputs: %s)",
			name, atol, rtol, strings.Join(parity.NewReport(results, opts).Failed, ", ")))
	}
	return nil
}

// textInputs feeds a text model as `zoo run` does: the tokenizer's windows of the text at
// textPath (its first batch, windows of window tokens, or the model's maximum length when 0),
// or without a path 3 windows of the sample text of 37, 29 and 11 tokens; every input by its
// role, padded to static shapes. It returns the valid-position mask of the padded inputs.
func textInputs(c *cli.Context, g *graph.Graph, plan *zooroot.FeedPlan, tk *zooroot.Tokenizer, textPath string, window int) (map[string]*tensor.Tensor, []bool, error) {
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
		src, stop, err := zooroot.NewWindows(c.Context, tk, f, window, rows, plan.VocabRows, plan.VocabFrom)
		if err != nil {
			return nil, nil, err
		}
		defer stop()
		if b, err = src.Next(); err != nil {
			return nil, nil, fmt.Errorf("input %s: no text to encode (%v)", textPath, err)
		}
	default:
		if b, err = sampleWindows(c, tk, plan, []int{37, 29, 11}); err != nil {
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
func sampleWindows(c *cli.Context, tk *zooroot.Tokenizer, plan *zooroot.FeedPlan, lengths []int) (*tokenize.Batch, error) {
	if _, ok := tk.Tokenizer.(tokenize.Bytes); ok && plan.Seq == 0 && plan.Batch == 0 && (plan.MaxLen == 0 || plan.MaxLen >= slices.Max(lengths)) {
		return sampleBatch(zooroot.SampleText, lengths...), nil
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
	src, stop, err := zooroot.NewWindows(c.Context, tk, bytes.NewReader(zooroot.SampleText), longest, len(lengths), plan.VocabRows, plan.VocabFrom)
	if err != nil {
		return nil, err
	}
	defer stop()
	full, err := src.Next()
	if err != nil {
		return nil, fmt.Errorf("sample text: %w", err)
	}
	_, suffix := tk.Tokenizer.Affixes()
	b := &tokenize.Batch{B: full.B, N: longest, Tokens: make([]int64, full.B*longest), Mask: make([]bool, full.B*longest), Offsets: full.Offsets}
	for i := 0; i < full.B; i++ {
		row := full.Row(i)
		l := min(lengths[i], len(row))
		if l < len(suffix.IDs) {
			l = len(row)
		}
		cut := append(append([]int64(nil), row[:l-len(suffix.IDs)]...), suffix.IDs...)
		copy(b.Tokens[i*longest:], cut)
		for j := l; j < longest; j++ {
			b.Tokens[i*longest+j], b.Mask[i*longest+j] = tk.PadID(), true
		}
		b.Lengths = append(b.Lengths, l)
	}
	return b, nil
}

// parityInputs makes deterministic synthetic inputs for a model that does not take text, and
// the valid-position mask derived from a bool (batch, seq) input.
func parityInputs(g *graph.Graph, seed uint64) (map[string]*tensor.Tensor, []bool, error) {
	inputs := map[string]*tensor.Tensor{}
	const batch, seq, pads = 2, 37, 8
	state := seed*0x9E3779B97F4A7C15 + 1
	next := func() uint64 { // splitmix64
		state += 0x9E3779B97F4A7C15
		z := state
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		return z ^ (z >> 31)
	}
	var valid []bool
	for _, in := range g.Inputs {
		if in.Shape == nil {
			return nil, nil, fmt.Errorf("input %q has unknown rank; pass a model with declared input shapes", in.Name)
		}
		shape := make([]int, len(in.Shape))
		for i, d := range in.Shape {
			switch {
			case d.Known():
				shape[i] = int(d.Size)
			case i == 0:
				shape[i] = batch
			default:
				shape[i] = seq
			}
		}
		t, err := tensor.New(in.DType, shape...)
		if err != nil {
			return nil, nil, fmt.Errorf("input %q: %w", in.Name, err)
		}
		switch in.DType {
		case tensor.Float32:
			for i := range t.F32 { // sum of uniforms: roughly N(0, 1)
				var s float64
				for k := 0; k < 4; k++ {
					s += float64(next()>>11)/(1<<53) - 0.5
				}
				t.F32[i] = float32(s * math.Sqrt(3))
			}
		case tensor.Int32, tensor.Int64:
			for i := range t.I64 {
				t.I64[i] = int64(1 + next()%255)
			}
		case tensor.Bool:
			if len(shape) == 2 && shape[0] >= 2 && shape[1] > pads {
				for i := shape[1] - pads; i < shape[1]; i++ {
					t.Bool[shape[1]+i] = true
				}
			}
			if len(shape) == 2 {
				valid = parity.ValidFromPadding(t)
			}
		}
		inputs[in.Name] = t
	}
	// Padded token positions hold the padding id, as the tokenizer would write them.
	if valid != nil {
		for _, in := range g.Inputs {
			if t := inputs[in.Name]; in.DType == tensor.Int64 && len(t.Shape) == 2 && len(t.I64) == len(valid) {
				for i, ok := range valid {
					if !ok {
						t.I64[i] = 0
					}
				}
			}
		}
	}
	return inputs, valid, nil
}
