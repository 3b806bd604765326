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
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"golang.org/x/sys/cpu"
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
	"and --layers belong to the check against ONNX Runtime (without --precision, or with fp32) and are refused with bf16.\n" +
	"--precision int8 reports the same figures for zoo's int8 run against its fp32 run, and then, where ONNX Runtime is\n" +
	"installed, zoo's int8 against ONNX Runtime's int8 on the same file: the model's int8 export (zoo export --precision\n" +
	"int8, ONNX Runtime's dynamic-quantization form), which zoo imports onto its int8 kernels (--json: onnxruntime, with the\n" +
	"same figures, and machine: whether ONNX Runtime's u8s8 sums are exact on this CPU, which they are with VNNI)."

// PrecisionReport is what `zoo parity --precision bf16` prints; --json prints it.
type PrecisionReport struct {
	Model     string `json:"model"`
	Backend   string `json:"backend"`
	Level     string `json:"kernel_level"`
	Precision string `json:"precision"`
	// Reference is the precision compared against (fp32); BF16Path the backend's bf16 path.
	Reference string `json:"reference"`
	BF16Path  string `json:"bf16_path"`
	// Int8Path is the backend's int8 path, for int8; Int8WeightBits the bits of the linear
	// layers' weights on it (7 on the CPU's avx2 path, else 8).
	Int8Path       string `json:"int8_path,omitempty"`
	Int8WeightBits int    `json:"int8_weight_bits,omitempty"`
	Output         string `json:"output"`
	Shape          []int  `json:"shape"`
	// Rule states the definitions of the figures below.
	Rule string `json:"rule"`
	parity.VectorStats
	// ORT is, for int8, zoo's int8 against ONNX Runtime's on the same int8 file; nil with
	// ORTNote saying why (ONNX Runtime not installed) when it could not run.
	ORT     *ORTInt8 `json:"onnxruntime,omitempty"`
	ORTNote string   `json:"onnxruntime_note,omitempty"`
}

// ORTInt8 is zoo's int8 run of a model's int8 export against ONNX Runtime's run of the same
// file (CompareVectors' figures, zoo against ONNX Runtime).
type ORTInt8 struct {
	Version string `json:"version"`
	// File says which file both ran; Machine which case this CPU is: ONNX Runtime's x86
	// u8s8 kernels are exact with VNNI and add pairs of products in int16 with saturation
	// without it.
	File    string `json:"file"`
	Machine string `json:"machine"`
	parity.VectorStats
}

// ORTMachine says, in one line, whether ONNX Runtime's u8s8 integer sums on this CPU are
// ONNX's exact ones.
func ORTMachine() string {
	switch {
	case cpu.X86.HasAVX512VNNI || cpu.X86.HasAVXVNNI:
		return "x86 with VNNI: ONNX Runtime's u8s8 sums (VPDPBUSD) are exact, as zoo's are"
	case cpu.X86.HasAVX2:
		return "x86 without VNNI: ONNX Runtime's u8s8 sums add pairs of products in int16 with saturation (VPMADDUBSW), zoo's are exact"
	}
	return "not x86: ONNX Runtime's integer kernels for this CPU"
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
	rep := &PrecisionReport{Model: name, Backend: ch.Backend.Name(), Level: ch.Probe.Level, Precision: prec,
		Reference: "fp32", BF16Path: ch.Probe.BF16, Output: out, Shape: want.Shape, Rule: parity.VectorRule, VectorStats: stats}
	switch {
	case prec == "int8-attention":
		rep.Int8Path, rep.Int8WeightBits = ch.Probe.Int8, ch.Probe.Int8WeightBits
		rep.ORTNote = "not compared with ONNX Runtime: its quantized form (zoo export --precision int8) keeps attention in fp32"
	case prec == "int8":
		rep.Int8Path, rep.Int8WeightBits = ch.Probe.Int8, ch.Probe.Int8WeightBits
		rep.ORT, rep.ORTNote, err = compareORTInt8(ctx, ch, g, name, out, inputs, valid, threads)
		if err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// compareORTInt8 runs the int8 export of g (quantize_dynamic's form) on zoo (imported, on the
// backend ch: its quantized layers compile onto the int8 kernels) and on ONNX Runtime, and
// compares zoo's output out with ONNX Runtime's. Without ONNX Runtime it returns a note
// instead; its errors are a failed export, compile or run.
func compareORTInt8(ctx context.Context, ch backends.Choice, g *graph.Graph, name, out string, inputs map[string]*tensor.Tensor, valid []bool, threads int) (*ORTInt8, string, error) {
	rt, err := ort.Open()
	if err != nil {
		return nil, "not compared with ONNX Runtime: " + err.Error(), nil
	}
	data, err := onnx.Export(g, onnx.ExportOptions{Precision: "int8"})
	if err != nil {
		return nil, "", fmt.Errorf("parity: int8 export of %s: %w", name, err)
	}
	qg, err := onnx.Import(data)
	if err != nil {
		return nil, "", fmt.Errorf("parity: re-import the int8 export of %s: %w", name, err)
	}
	prog, err := ch.Backend.Compile(qg, backends.Options{Threads: threads})
	if err != nil {
		return nil, "", fmt.Errorf("compile the int8 export of %s on %s: %w", name, ch.Backend.Name(), err)
	}
	defer prog.Close()
	got, err := prog.Run(ctx, inputs)
	if err != nil {
		return nil, "", fmt.Errorf("run the int8 export of %s on %s: %w", name, ch.Backend.Name(), err)
	}
	sess, err := rt.NewSession(data, ort.SessionOptions{Threads: threads})
	if err != nil {
		return nil, "", fmt.Errorf("ONNX Runtime: the int8 export of %s: %w", name, err)
	}
	defer sess.Close()
	want, err := sess.Run(inputs, []string{out})
	if err != nil {
		return nil, "", fmt.Errorf("ONNX Runtime: run the int8 export of %s: %w", name, err)
	}
	stats, err := parity.CompareVectors(got[out], want[out], ValidFor(want[out], valid))
	if err != nil {
		return nil, "", fmt.Errorf("parity: %s's int8 export, zoo against ONNX Runtime on %s: %w", name, out, err)
	}
	return &ORTInt8{Version: rt.Version, File: "the model's int8 export (zoo export --precision int8: ONNX Runtime's dynamic-quantization form, per output column)",
		Machine: ORTMachine(), VectorStats: stats}, "", nil
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
	path := "bf16 path " + r.BF16Path
	if backends.Int8Precision(r.Precision) {
		path = "int8 path " + r.Int8Path
		if r.Int8WeightBits != 0 && r.Int8WeightBits != 8 {
			path += fmt.Sprintf(", %d-bit weights", r.Int8WeightBits)
		}
	}
	fmt.Fprintf(w, "%s against %s on %s: zoo %s (%s; %s)\n", r.Precision, r.Reference, r.Model, r.Backend, r.Level, path)
	fmt.Fprintf(w, "  output          %s %s, %s of %s\n", r.Output, tensor.ShapeString(r.Shape), format.Plural(r.Positions, "valid position"), format.Plural(r.Width, "value"))
	fmt.Fprintf(w, "  relative error  max %.3g at %v, mean %.3g  (|%s - %s| / max|%s| of the position's vector)\n",
		r.MaxRel, r.MaxRelAt, r.MeanRel, r.Precision, r.Reference, r.Reference)
	fmt.Fprintf(w, "  cosine          min %.7f (1 - %.2g), mean %.7f (1 - %.2g)  (per position)\n",
		r.MinCosine, 1-r.MinCosine, r.MeanCosine, 1-r.MeanCosine)
	switch {
	case r.ORT != nil:
		o := r.ORT
		fmt.Fprintf(w, "zoo int8 against onnxruntime %s int8 on the same file, %s\n", o.Version, o.File)
		fmt.Fprintf(w, "  relative error  max %.3g at %v, mean %.3g  (|zoo - onnxruntime| / max|onnxruntime| of the position's vector)\n", o.MaxRel, o.MaxRelAt, o.MeanRel)
		fmt.Fprintf(w, "  cosine          min %.7f (1 - %.2g), mean %.7f (1 - %.2g)  (per position)\n", o.MinCosine, 1-o.MinCosine, o.MeanCosine, 1-o.MeanCosine)
		fmt.Fprintf(w, "  machine         %s\n", o.Machine)
	case r.ORTNote != "":
		fmt.Fprintf(w, "%s\n", r.ORTNote)
	}
}
