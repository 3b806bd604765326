package runout

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Report is what `zoo run` prints; --json prints it as JSON.
type Report struct {
	Model     string                `json:"model"`
	Weights   zooroot.WeightsSource `json:"weights"`
	Backend   string                `json:"backend"`
	Level     string                `json:"kernel_level"`
	Why       string                `json:"backend_reason"`
	Threads   int                   `json:"threads"`
	Precision string                `json:"precision"`
	Input     string                `json:"input"`
	Tokenizer string                `json:"tokenizer"`
	Feeds     []zooroot.Feed        `json:"feeds"`
	Pool      string                `json:"pool,omitempty"`
	Tokens    int64                 `json:"tokens"`
	Windows   int                   `json:"windows"`
	Batches   int                   `json:"batches"`
	Window    int                   `json:"window"`
	Outputs   map[string][]int      `json:"outputs"`
	BuildMS   float64               `json:"build_ms"`
	CompileMS float64               `json:"compile_ms"`
	RunMS     float64               `json:"run_ms"`
	TokensPS  float64               `json:"tokens_per_second"`
	Written   []string              `json:"written,omitempty"`

	// TokenizerDoc is the tokenizer's entry in output files; SeqOutputs the outputs whose
	// axis 1 is the sequence, where the graph says.
	TokenizerDoc map[string]any  `json:"-"`
	SeqOutputs   map[string]bool `json:"-"`
}

// Add counts one batch and hands it to the sink, which it begins at the first batch: windows
// are laid out at the longest window, which the first batch holds (every window but the last
// is full), or at the inputs' static length.
func (rep *Report) Add(b zooroot.Batch, sink *Stream) error {
	if sink != nil && rep.Batches == 0 {
		if err := sink.Begin(rep.meta(), b.Windows.N); err != nil {
			return &zooroot.InputError{Err: err}
		}
	}
	for name, t := range b.Outputs {
		rep.Outputs[name] = t.Shape
	}
	if sink != nil {
		if err := sink.Add(b.Windows, b.Outputs); err != nil {
			return err
		}
	}
	rep.Windows += b.Windows.B
	rep.Batches++
	for _, l := range b.Windows.Lengths {
		rep.Tokens += int64(l)
	}
	return nil
}

// meta is what the run's output file records besides the arrays.
func (rep *Report) meta() Meta {
	return Meta{Model: rep.Model, Backend: rep.Backend + " (" + rep.Level + ")", Tokenizer: rep.TokenizerDoc, Seq: rep.SeqOutputs}
}

// Finish writes the sink's file and records it in the report.
func (rep *Report) Finish(sink *Stream, outPath string, window int) error {
	defer sink.Close()
	if rep.Batches == 0 {
		if err := sink.Begin(rep.meta(), window); err != nil {
			return &zooroot.InputError{Err: err}
		}
	}
	written, err := sink.Finish(outPath)
	if err != nil {
		return err
	}
	rep.Written = written
	rep.Outputs = sink.Shapes()
	return nil
}

// SelectOutput returns the output a .npy file holds: --select when given (an output of g, or
// embedding when pooled), else the pooled embedding, else hidden, else g's only output.
func SelectOutput(g *graph.Graph, selected string, pooled bool) (string, error) {
	var names []string
	for _, o := range g.Outputs {
		names = append(names, o.Name)
	}
	if pooled {
		names = append(names, zooroot.PoolOutput)
	}
	switch {
	case selected != "" && slices.Contains(names, selected):
		return selected, nil
	case selected != "":
		return "", fmt.Errorf("--select %q: model %s has no such output (outputs: %s)", selected, g.Name, strings.Join(names, ", "))
	case pooled:
		return zooroot.PoolOutput, nil
	case slices.Contains(names, variant.OutputHidden):
		return variant.OutputHidden, nil
	case len(names) == 1:
		return names[0], nil
	}
	return "", fmt.Errorf("a .npy file holds one output and model %s has %d (%s): choose one with --select NAME", g.Name, len(names), strings.Join(names, ", "))
}

// Print writes the text form of a run\'s report.
func Print(w io.Writer, r Report) {
	fmt.Fprintf(w, "model     %s\n", r.Model)
	fmt.Fprintf(w, "weights   %s\n", r.Weights)
	fmt.Fprintf(w, "backend   %s (%s, %s; %s)\n", r.Backend, r.Level, format.Plural(r.Threads, "thread"), r.Why)
	fmt.Fprintf(w, "precision %s\n", r.Precision)
	fmt.Fprintf(w, "input     %s: %s in %s of ≤%d, %s\n", r.Input, format.Plural(r.Tokens, "token"), format.Plural(r.Windows, "window"), r.Window, format.Plural(r.Batches, "batch"))
	fmt.Fprintf(w, "tokenizer %s\n", r.Tokenizer)
	var feeds []string
	for _, f := range r.Feeds {
		feeds = append(feeds, f.Name+" ← "+string(f.Role))
	}
	fmt.Fprintf(w, "feeds     %s\n", strings.Join(feeds, ", "))
	if r.Pool != "" {
		fmt.Fprintf(w, "pool      %s\n", r.Pool)
	}
	fmt.Fprintf(w, "outputs   %s\n", outputShapes(r.Outputs))
	fmt.Fprintf(w, "time      build %.1f ms, compile %.1f ms, run %.1f ms\n", r.BuildMS, r.CompileMS, r.RunMS)
	fmt.Fprintf(w, "speed     %.0f tokens/s\n", r.TokensPS)
	for _, p := range r.Written {
		fmt.Fprintf(w, "wrote     %s\n", p)
	}
}

// outputShapes is the report's outputs line: each output's name and shape, by name.
func outputShapes(outputs map[string][]int) string {
	names := slices.Sorted(maps.Keys(outputs))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " " + tensor.ShapeString(outputs[n])
	}
	return strings.Join(parts, ", ")
}

// ArrayReport is what `zoo run` prints for array inputs; --json prints it as JSON.
type ArrayReport struct {
	Model     string                `json:"model"`
	Weights   zooroot.WeightsSource `json:"weights"`
	Backend   string                `json:"backend"`
	Level     string                `json:"kernel_level"`
	Why       string                `json:"backend_reason"`
	Threads   int                   `json:"threads"`
	Precision string                `json:"precision"`
	Input     string                `json:"input"`
	Inputs    []zooroot.ArrayFeed   `json:"inputs"`
	Outputs   map[string][]int      `json:"outputs"`
	BuildMS   float64               `json:"build_ms"`
	CompileMS float64               `json:"compile_ms"`
	RunMS     float64               `json:"run_ms"`
	Written   []string              `json:"written,omitempty"`
}

// SelectArrayOutput is the output a .npy file holds: --select, else the graph's only output.
func SelectArrayOutput(g *graph.Graph, sel string) (string, error) {
	var names []string
	for _, o := range g.Outputs {
		names = append(names, o.Name)
		if sel != "" && o.Name == sel {
			return sel, nil
		}
	}
	switch {
	case sel != "":
		return "", fmt.Errorf("--select %s: the model has no such output (outputs: %s)", sel, strings.Join(names, ", "))
	case len(names) == 1:
		return names[0], nil
	}
	return "", fmt.Errorf("a .npy file holds one output and the model has %d (%s); name one with --select, or write .safetensors or .json", len(names), strings.Join(names, ", "))
}

// PrintArrays writes the text form of a run on arrays.
func PrintArrays(w io.Writer, r ArrayReport) {
	fmt.Fprintf(w, "model     %s\n", r.Model)
	fmt.Fprintf(w, "weights   %s\n", r.Weights)
	fmt.Fprintf(w, "backend   %s (%s, %s; %s)\n", r.Backend, r.Level, format.Plural(r.Threads, "thread"), r.Why)
	fmt.Fprintf(w, "precision %s\n", r.Precision)
	var ins []string
	for _, f := range r.Inputs {
		s := f.Name + " " + f.DType + " " + tensor.ShapeString(f.Shape)
		if f.From != f.DType {
			s += " (from " + f.From + ")"
		}
		ins = append(ins, s)
	}
	fmt.Fprintf(w, "input     %s: %s\n", r.Input, strings.Join(ins, ", "))
	fmt.Fprintf(w, "outputs   %s\n", outputShapes(r.Outputs))
	fmt.Fprintf(w, "time      build %.1f ms, compile %.1f ms, run %.1f ms\n", r.BuildMS, r.CompileMS, r.RunMS)
	for _, p := range r.Written {
		fmt.Fprintf(w, "wrote     %s\n", p)
	}
}
