// Package show describes a model for `zoo show`: its hyperparameters, its parameters (every
// initializer by its PyTorch name), the text inputs it takes, and its cost at given lengths
// (FLOPs from the op table, the seed's formula beside them, peak activations), as a table
// or JSON (Result).
package show

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// DefaultSeq is the default --seq of show, clamped to the model's max_len (ClampSeqs).
const DefaultSeq = "128,512"

// Param is one hyperparameter: its value in the model and its default.
type Param struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Value   any    `json:"value"`
	Default any    `json:"default"`
	Doc     string `json:"doc"`
}

// Tensor is one parameter or buffer of the model, by its state_dict name.
type Tensor struct {
	Name   string `json:"name"`
	Shape  []int  `json:"shape"`
	Count  int    `json:"count"`
	Buffer bool   `json:"buffer,omitempty"`
}

// Cost is the model's cost at batch 1 and length N.
type Cost struct {
	N               int              `json:"n"`
	FLOPs           int64            `json:"flops"`
	SeedFLOPs       int64            `json:"seed_formula_flops"`
	ByOp            map[string]int64 `json:"flops_by_op"`
	ActivationBytes int64            `json:"peak_activation_bytes"`
}

// Feeds is how the model's text inputs are fed, for the table: one line per input, and the
// limits found in the graph (0: none): MaxLenWhy says what bounds the length
// (FeedPlan.MaxLenWhy), VocabFrom names the embedding table.
type Feeds struct {
	Lines                []string
	MaxLen, VocabRows    int
	MaxLenWhy, VocabFrom string
}

// Result is what `zoo show` prints; --json prints it.
type Result struct {
	Model      string `json:"model"`
	Version    string `json:"version"`
	Summary    string `json:"summary"`
	Paper      string `json:"paper"`
	Complexity string `json:"complexity"`
	Seed       uint64 `json:"seed"`
	// Weights says where the weights came from, as the caller reports them (printed with
	// %s; its JSON is the value's own).
	Weights    any      `json:"weights"`
	Hyper      []Param  `json:"hyperparameters"`
	Parameters []Tensor `json:"parameters"`
	ParamCount int64    `json:"parameter_count"`
	ParamBytes int64    `json:"parameter_bytes"`
	Costs      []Cost   `json:"costs"`
	Ops        []string `json:"ops"`
	// TextInputs is the caller's plan of the text inputs (its JSON is the value's own; nil
	// when the model takes no text), Feeds its table, and FeedsError why there is none.
	TextInputs any    `json:"text_inputs,omitempty"`
	Feeds      *Feeds `json:"-"`
	FeedsError string `json:"text_inputs_error,omitempty"`
}

// Describe fills a Result for the model name (described by d, configured by cfg, built from
// seed into g): everything but its weights, text inputs and costs.
func Describe(name string, d variant.Description, cfg variant.Config, seed uint64, g *graph.Graph) Result {
	res := Result{Model: name, Version: d.Version, Summary: d.Summary, Paper: d.Paper, Complexity: d.Complexity, Seed: seed,
		ParamCount: g.ParamCount(), Ops: g.OpTypes()}
	for _, p := range d.Params {
		res.Hyper = append(res.Hyper, Param{Name: p.Name, Kind: string(p.Kind), Value: cfg[p.Name], Default: p.Default, Doc: p.Doc})
	}
	for _, in := range g.Initializers {
		if graph.IsConstName(in.Name) {
			continue
		}
		res.Parameters = append(res.Parameters, Tensor{Name: in.Name, Shape: in.Tensor.Shape, Count: in.Tensor.Len(), Buffer: in.Buffer})
		if in.IsParam() {
			res.ParamBytes += int64(in.Tensor.Bytes())
		}
	}
	return res
}

// Costs counts g's cost at batch 1 and each length of seqs, at the input shapes shapes
// gives for a length (nil: a variant's tokens and padding mask); layers and d (d_model) give
// the seed's formula. A length beyond maxLen (0: none; why says what sets it, as
// FeedPlan.Limit) is an error naming the model.
func Costs(model string, g *graph.Graph, seqs []int, maxLen int, why string, shapes func(n int) map[string][]int, layers, d int) ([]Cost, error) {
	var out []Cost
	for _, n := range seqs {
		if maxLen > 0 && n > maxLen {
			return nil, &LengthError{fmt.Errorf("--seq %d is longer than %s's maximum length %d (%s)", n, model, maxLen, why)}
		}
		in := map[string][]int{variant.InputTokens: {1, n}, variant.InputKeyPadding: {1, n}}
		if shapes != nil {
			in = shapes(n)
		}
		cost, err := g.Cost(in)
		if err != nil {
			return nil, fmt.Errorf("count FLOPs of %s at n=%d: %w", model, n, err)
		}
		out = append(out, Cost{N: n, FLOPs: cost.FLOPs, ByOp: cost.ByOp, ActivationBytes: cost.ActivationBytes,
			SeedFLOPs: int64(layers) * graph.SeedFLOPs(int64(n), int64(d))})
	}
	return out, nil
}

// LengthError is Costs' error for a length the model cannot take (the user's input).
type LengthError struct{ Err error }

// Error returns the wrapped error's message.
func (e *LengthError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *LengthError) Unwrap() error { return e.Err }

// ClampSeqs fits the default --seq list to a model's maximum length: a length beyond
// maxLen becomes maxLen (once), with a note on w naming why (what sets it, as
// FeedPlan.Limit). An explicit --seq is never clamped: a length the model cannot take is an
// error there.
func ClampSeqs(w io.Writer, seqs []int, maxLen int, why, model string) []int {
	if maxLen <= 0 {
		return seqs
	}
	var out []int
	clamped := false
	for _, n := range seqs {
		if n > maxLen {
			n, clamped = maxLen, true
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if clamped {
		parts := make([]string, len(out))
		for i, n := range out {
			parts[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(w, "zoo show: note: the default --seq %s is clamped to %s's maximum length %d (%s): showing n = %s\n",
			DefaultSeq, model, maxLen, why, strings.Join(parts, ","))
	}
	return out
}

// Render prints r as tables: the hyperparameters, the parameters, the text inputs and the
// costs.
func Render(w io.Writer, r Result) {
	fmt.Fprintf(w, "%s %s — %s\n", r.Model, r.Version, r.Summary)
	var about []string // a file has no paper or attention cost: its empty fields are left out
	for _, f := range [][2]string{{"paper", r.Paper}, {"attention cost", r.Complexity}, {"weights", fmt.Sprint(r.Weights)}} {
		if f[1] != "" {
			about = append(about, f[0]+": "+f[1])
		}
	}
	fmt.Fprintf(w, "%s\n\n", strings.Join(about, "   "))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HYPERPARAMETER\tTYPE\tVALUE\tDEFAULT\tDESCRIPTION")
	for _, p := range r.Hyper {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\n", p.Name, p.Kind, p.Value, p.Default, p.Doc)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nparameters: %s (%s as stored; buffers not counted)\n", format.HumanCount(r.ParamCount), format.HumanBytes(r.ParamBytes))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHAPE\tCOUNT")
	for _, p := range r.Parameters {
		name := p.Name
		if p.Buffer {
			name += " (buffer)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", name, tensor.ShapeString(p.Shape), p.Count)
	}
	tw.Flush()
	if f := r.Feeds; f != nil {
		fmt.Fprintln(w, "\ntext inputs (how `zoo run` and `zoo parity` feed the model; override with --feed NAME=ROLE)")
		for _, l := range f.Lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if f.MaxLen > 0 {
			fmt.Fprintf(w, "  maximum length %d (%s)\n", f.MaxLen, strings.Replace(f.MaxLenWhy, "its position table", "the position table", 1))
		}
		if f.VocabRows > 0 {
			fmt.Fprintf(w, "  token ids below %d (the rows of the embedding table %s)\n", f.VocabRows, f.VocabFrom)
		}
	} else if r.FeedsError != "" {
		fmt.Fprintf(w, "\ntext inputs: %s\n", r.FeedsError)
	}
	fmt.Fprintln(w, "\ncost at batch 1 (exact: every op of the graph, a multiply-add = 2 FLOPs; seed formula: layers × (4·n·d² + 2·n²·d),\n the seed's estimate of standard multi-head attention alone, in multiply-adds, for comparison)")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tFLOPS (EXACT)\tFLOPS (SEED FORMULA)\tPEAK ACTIVATIONS")
	for _, c := range r.Costs {
		seed := "n/a" // a file has no layers and d_model to put in the formula
		if c.SeedFLOPs > 0 {
			seed = format.HumanCount(c.SeedFLOPs)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", c.N, format.HumanCount(c.FLOPs), seed, format.HumanBytes(c.ActivationBytes))
	}
	tw.Flush()
}
