// Package paritycheck is the machinery of `zoo parity`: the checks of its flags, the
// synthetic inputs of models that take no text and the sample-text windows of those that do,
// the layer values compared with --layers, the comparison of a zoo backend's run with ONNX
// Runtime's (Check) and of a bf16 run with an fp32 one (ComparePrecision), and their reports.
// The rule and the rendering of a comparison are internal/parity's. The command in
// cmd/zoo/parity.go loads the model, chooses the tokenizer and windows, and drives these.
package paritycheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Flags are zoo parity's tolerances and sizes as given (WindowSet: --window was given).
type Flags struct {
	Atol, Rtol      float64
	Input           string
	Window, Threads int
	WindowSet       bool
}

// Check refuses tolerances and sizes out of range; its errors name the flags.
func (f Flags) Check() error {
	if !(f.Atol >= 0 && f.Rtol >= 0) || math.IsInf(f.Atol, 0) || math.IsInf(f.Rtol, 0) {
		return fmt.Errorf("--atol and --rtol must be finite and >= 0 (got %g, %g)", f.Atol, f.Rtol)
	}
	if f.WindowSet && f.Input == "" {
		return errors.New("--window applies with --input: without it, parity feeds the sample text in fixed windows (or synthetic data)")
	}
	if f.Threads < 0 || f.Window < 1 {
		return errors.New("--threads must not be negative and --window must be at least 1")
	}
	return nil
}

// TextWindow is the window of text inputs: --window when given, else 0 (the model's
// maximum length, at most a short default).
func (f Flags) TextWindow() int {
	if !f.WindowSet {
		return 0
	}
	return f.Window
}

// CheckFileFlags refuses, for the .onnx file ref, the flags that shape a variant (isSet
// says which were given).
func CheckFileFlags(ref string, isSet func(string) bool) error {
	for _, f := range []string{"preset", "set"} {
		if isSet(f) {
			return fmt.Errorf("--%s does not apply to %s: an ONNX file's hyperparameters are fixed (--preset and --set shape a variant)", f, ref)
		}
	}
	return nil
}

// Check is one comparison of a zoo backend's run with ONNX Runtime's.
type Check struct {
	// Name is the model in messages; Graph what zoo compiles.
	Name  string
	Graph *graph.Graph
	// Inputs feed both runtimes; Valid marks the valid (batch, seq) positions (nil: all).
	Inputs map[string]*tensor.Tensor
	Valid  []bool
	// PerToken says, per output, whether it is laid out per token; an output it marks false
	// (one value per window, e.g. a pooler's) is compared everywhere.
	PerToken map[string]bool
	// Layers are the intermediate values compared too (--layers).
	Layers     []LayerValue
	Atol, Rtol float64
	// Threads is both runtimes' (0: every core); Precision the backend's (see
	// backends.Options).
	Threads   int
	Precision string
	JSON      bool
	// ReferenceNote is what Reference's session says of how ONNX Runtime loaded the model
	// (the optimization level it fell back to when its optimizer failed; "" for none).
	ReferenceNote string
}

// Reference runs data, the ONNX model (with its layer values as outputs), on ONNX Runtime,
// and keeps the session's note in k.ReferenceNote.
func (k *Check) Reference(rt *ort.Runtime, data []byte) (map[string]*tensor.Tensor, error) {
	sess, err := rt.NewSession(data, ort.SessionOptions{Threads: k.Threads})
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", k.Name, err)
	}
	defer sess.Close()
	want, err := sess.Run(k.Inputs, nil)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", k.Name, err)
	}
	k.ReferenceNote = sess.Note() // after the run, which may have fallen back
	return want, nil
}

// Run compiles and runs the graph on the backend ch, compares every output and layer value
// with want (ONNX Runtime's, of version ortVersion), prints the report to w, and returns an
// error naming the first divergent layer or the outputs that differ beyond the tolerances.
func (k *Check) Run(ctx context.Context, w io.Writer, ch backends.Choice, want map[string]*tensor.Tensor, ortVersion string) error {
	keep := make([]string, len(k.Layers))
	for i, l := range k.Layers {
		keep[i] = l.Value
	}
	prog, err := ch.Backend.Compile(k.Graph, backends.Options{Threads: k.Threads, KeepIntermediates: keep, Precision: k.Precision})
	if err != nil {
		return fmt.Errorf("compile %s on %s: %w", k.Name, ch.Backend.Name(), err)
	}
	defer prog.Close()
	got, err := prog.Run(ctx, k.Inputs)
	if err != nil {
		return fmt.Errorf("run %s on %s: %w", k.Name, ch.Backend.Name(), err)
	}
	var results, layerResults []parity.Result
	for _, out := range k.Graph.Outputs {
		v := ValidFor(got[out.Name], k.Valid)
		if aligned, known := k.PerToken[out.Name]; known && !aligned {
			v = nil // one value per window (e.g. a pooler's output): every value counts
		}
		results = append(results, parity.Compare(out.Name, got[out.Name], want[out.Name], v, k.Atol, k.Rtol))
	}
	for _, l := range k.Layers {
		layerResults = append(layerResults, parity.Compare(l.Label, got[l.Value], want[l.Value], ValidFor(got[l.Value], k.Valid), k.Atol, k.Rtol))
	}
	reference := "onnxruntime " + ortVersion
	if k.ReferenceNote != "" {
		reference += " at " + k.ReferenceNote // ONNX Runtime's optimizer failed at its default level
	}
	opts := parity.RenderOptions{
		Got:  fmt.Sprintf("zoo %s (%s) on %s", ch.Backend.Name(), ch.Probe.Level, k.Name),
		Want: reference,
		JSON: k.JSON,
	}
	if len(k.Layers) > 0 {
		err = RenderLayers(w, layerResults, results, opts)
	} else {
		err = parity.Render(w, results, opts)
	}
	if err != nil {
		return err
	}
	for _, r := range layerResults {
		if !r.Pass {
			return fmt.Errorf("parity: %s first diverges from ONNX Runtime at %s (max abs error %.3g, atol %g / rtol %g)", k.Name, r.Name, r.MaxAbs, k.Atol, k.Rtol)
		}
	}
	if !parity.AllPass(results) {
		return fmt.Errorf("parity: %s differs from ONNX Runtime beyond atol %g / rtol %g (outputs: %s)",
			k.Name, k.Atol, k.Rtol, strings.Join(parity.NewReport(results, opts).Failed, ", "))
	}
	return nil
}

// SyntheticInputs makes deterministic inputs from seed for a model that does not take text
// (batch 2, length 37 for symbolic dims, the last 8 positions of row 2 padded), and the
// valid-position mask derived from a bool (batch, seq) input.
func SyntheticInputs(g *graph.Graph, seed uint64) (map[string]*tensor.Tensor, []bool, error) {
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

// SampleBatch cuts consecutive pieces of the given lengths from text, byte-tokenized, into
// one padded batch.
func SampleBatch(text []byte, lengths ...int) *tokenize.Batch {
	n := 0
	for _, l := range lengths {
		n = max(n, l)
	}
	b := &tokenize.Batch{B: len(lengths), N: n, Tokens: make([]int64, len(lengths)*n), Mask: make([]bool, len(lengths)*n)}
	off := 0
	for row, l := range lengths {
		ids := tokenize.Encode(text[off%len(text) : min(off%len(text)+l, len(text))])
		copy(b.Tokens[row*n:], ids)
		for i := len(ids); i < n; i++ {
			b.Mask[row*n+i] = true
		}
		b.Lengths = append(b.Lengths, len(ids))
		b.Offsets = append(b.Offsets, int64(off))
		off += l
	}
	return b
}

// CutRows cuts each row of full (windows of the longest of lengths, with a tokenizer's
// special tokens) to its length in lengths, keeping the suffix tokens at its end, and pads
// the rest with pad.
func CutRows(full *tokenize.Batch, lengths []int, suffix []int64, pad int64) *tokenize.Batch {
	longest := 0
	for _, l := range lengths {
		longest = max(longest, l)
	}
	b := &tokenize.Batch{B: full.B, N: longest, Tokens: make([]int64, full.B*longest), Mask: make([]bool, full.B*longest), Offsets: full.Offsets}
	for i := 0; i < full.B; i++ {
		row := full.Row(i)
		l := min(lengths[i], len(row))
		if l < len(suffix) {
			l = len(row)
		}
		cut := append(append([]int64(nil), row[:l-len(suffix)]...), suffix...)
		copy(b.Tokens[i*longest:], cut)
		for j := l; j < longest; j++ {
			b.Tokens[i*longest+j], b.Mask[i*longest+j] = pad, true
		}
		b.Lengths = append(b.Lengths, l)
	}
	return b
}
