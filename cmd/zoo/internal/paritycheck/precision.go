package paritycheck

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// PrecisionDoc is the help text of `zoo parity --precision bf16`; the definitions are
// parity.CompareVectors'.
const PrecisionDoc = "With --precision bf16, parity compares zoo with itself instead of with ONNX Runtime (which it then does\n" +
	"not need): the same graph and inputs run twice on the chosen backend, in fp32 and in bf16, and it reports bf16's\n" +
	"accuracy against fp32 on the hidden output, each valid position of which holds a vector v. The relative error of an\n" +
	"element is |bf16 - fp32| / max|v_fp32| over its position's vector (robust to elements near zero; the absolute\n" +
	"error where that vector is all zeros): the max and the mean over every element are reported, and the min and the\n" +
	"mean over positions of the cosine similarity of the two vectors (--json: precision, max_rel_error, mean_rel_error,\n" +
	"min_cosine, mean_cosine, and cosine: one per position). It is a report: it exits 0 when computed. --atol, --rtol\n" +
	"and --layers belong to the check against ONNX Runtime (without --precision, or with fp32) and are refused with bf16."

// PrecisionReport is what `zoo parity --precision bf16` prints; --json prints it.
type PrecisionReport struct {
	Model     string `json:"model"`
	Backend   string `json:"backend"`
	Level     string `json:"kernel_level"`
	Precision string `json:"precision"`
	// Reference is the precision compared against (fp32); BF16Path the backend's bf16 path.
	Reference string `json:"reference"`
	BF16Path  string `json:"bf16_path"`
	Output    string `json:"output"`
	Shape     []int  `json:"shape"`
	// Rule states the definitions of the figures below.
	Rule string `json:"rule"`
	parity.VectorStats
}

// ComparePrecision runs g (the model name) on inputs on the backend ch in fp32 and in prec
// (threads: 0 for the backend's default) and reports prec against fp32 on the output out
// over the valid positions (parity.CompareVectors): an element's relative error is
// |prec - fp32| / max|fp32| over its position's vector, which elements near zero cannot blow
// up, and each position's cosine similarity is reported too. Each program is closed before
// the next is compiled, so that only one model's weights are held at a time; the reference is
// copied out first. Its errors are a failed compile or run, or non-finite values.
func ComparePrecision(ctx context.Context, ch backends.Choice, g *graph.Graph, name, out string, inputs map[string]*tensor.Tensor, valid []bool, prec string, threads int) (*PrecisionReport, error) {
	run := func(p string) (*tensor.Tensor, error) {
		prog, err := ch.Backend.Compile(g, backends.Options{Threads: threads, Precision: p})
		if err != nil {
			return nil, fmt.Errorf("compile %s on %s in %s: %w", name, ch.Backend.Name(), p, err)
		}
		defer prog.Close()
		outs, err := prog.Run(ctx, inputs)
		if err != nil {
			return nil, fmt.Errorf("run %s on %s in %s: %w", name, ch.Backend.Name(), p, err)
		}
		t := outs[out]
		if t == nil || t.DType != tensor.Float32 {
			return nil, fmt.Errorf("run %s on %s in %s: no float32 output %s", name, ch.Backend.Name(), p, out)
		}
		return &tensor.Tensor{DType: t.DType, Shape: slices.Clone(t.Shape), F32: slices.Clone(t.F32)}, nil
	}
	want, err := run("fp32")
	if err != nil {
		return nil, err
	}
	got, err := run(prec)
	if err != nil {
		return nil, err
	}
	stats, err := parity.CompareVectors(got, want, ValidFor(want, valid))
	if err != nil {
		return nil, fmt.Errorf("parity: %s in %s against fp32 on %s: %w", name, prec, out, err)
	}
	return &PrecisionReport{Model: name, Backend: ch.Backend.Name(), Level: ch.Probe.Level, Precision: prec,
		Reference: "fp32", BF16Path: ch.Probe.BF16, Output: out, Shape: want.Shape, Rule: parity.VectorRule, VectorStats: stats}, nil
}

// CheckPrecisionFlags refuses, with a precision prec other than fp32, the flags of the
// check against ONNX Runtime (isSet says which were given), which that comparison does not
// run.
func CheckPrecisionFlags(prec string, isSet func(string) bool) error {
	if prec == "" || prec == "fp32" {
		return nil
	}
	for _, f := range []string{"atol", "rtol", "layers"} {
		if isSet(f) {
			return fmt.Errorf("--%s belongs to the check against ONNX Runtime; --precision %s compares zoo's %s run with its fp32 run and reports the errors (drop --%s)", f, prec, prec, f)
		}
	}
	return nil
}

// HiddenOutput names g's per-token output: the first of names (in their order of
// preference: a variant's hidden, then what exports of other tools call it) that g has; an
// error lists the outputs when it has none.
func HiddenOutput(g *graph.Graph, names []string) (string, error) {
	var outs []string
	for _, o := range g.Outputs {
		outs = append(outs, o.Name)
	}
	for _, want := range names {
		if slices.Contains(outs, want) {
			return want, nil
		}
	}
	return "", fmt.Errorf("it has no per-token output to compare (want one of %s; outputs: %s)", strings.Join(names, ", "), strings.Join(outs, ", "))
}

// PrintPrecision renders the report as one block.
func PrintPrecision(w io.Writer, r PrecisionReport) {
	fmt.Fprintf(w, "%s against %s on %s: zoo %s (%s; bf16 path %s)\n", r.Precision, r.Reference, r.Model, r.Backend, r.Level, r.BF16Path)
	fmt.Fprintf(w, "  output          %s %s, %s of %s\n", r.Output, tensor.ShapeString(r.Shape), format.Plural(r.Positions, "valid position"), format.Plural(r.Width, "value"))
	fmt.Fprintf(w, "  relative error  max %.3g at %v, mean %.3g  (|%s - %s| / max|%s| of the position's vector)\n",
		r.MaxRel, r.MaxRelAt, r.MeanRel, r.Precision, r.Reference, r.Reference)
	fmt.Fprintf(w, "  cosine          min %.7f (1 - %.2g), mean %.7f (1 - %.2g)  (per position)\n",
		r.MinCosine, 1-r.MinCosine, r.MeanCosine, 1-r.MeanCosine)
}
