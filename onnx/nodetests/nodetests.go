// Package nodetests runs ONNX's own operator conformance suite, the backend "node" tests that
// ship with onnx (922 in onnx 1.12): each a model.onnx holding one operator (or the
// function-expanded form of one, test_*_expanded) with test_data_set_N/input_K.pb and
// output_K.pb. onnx/testdata/nodetests/gen.py writes them; onnx's TestONNXNodeTests runs them
// on the CPU backend in CI, and backends/cuda's TestONNXNodeTestsCUDA on a GPU.
//
// Each test is imported, compiled for a backend and run, and every output is compared as
// ONNX's runner compares (onnx.backend.test.runner: the same dtype and shape, floats within
// rtol 1e-3 and atol 1e-7 with NaN equal to NaN; integers and booleans exactly). A test ends
// in one of five outcomes: it passes; zoo refuses it (the import, compile or run returns an
// error); or a wrong answer, a crash (a panic) or a hang.
package nodetests

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Tolerances of ONNX's runner, and how long one test may take.
const (
	Rtol      = 1e-3
	Atol      = 1e-7
	TimeLimit = time.Minute
)

// The outcomes of one test.
const (
	Pass    = "pass"
	Refused = "refused"
	Wrong   = "wrong"
	Crash   = "crash"
	Hang    = "hang"
)

// Test is one test directory.
type Test struct {
	Name, Dir string
	// Op is the operator under test: the model's one op type, or for an expanded test the op
	// of the test it expands.
	Op string
	// Encoder says whether Op belongs to the encoder subset (EncoderOps).
	Encoder bool
}

// Outcome is what running one test gave.
type Outcome struct {
	Status, Detail string
}

// Bad reports a wrong answer, a crash or a hang.
func (o Outcome) Bad() bool { return o.Status == Wrong || o.Status == Crash || o.Status == Hang }

// EncoderOps are the operators of the encoder subset: every operator a Transformer encoder, or
// a file exported from one, may use (arithmetic and math, comparison and logic, reductions,
// shape and indexing, casts, matrix products and Einsum, activations, normalizations, Dropout,
// Resize, Pad, Conv and pooling, quantization). Left out: recurrent cells, control flow,
// sequences and optionals, training and loss ops, random ops, signal processing, detection
// and sampling ops, string ops, and the rest of the vision ops. A test belongs to the subset
// when its operator does (an expanded test when the operator it expands does).
var EncoderOps = map[string]bool{}

func init() {
	for _, group := range []string{
		"Abs Add Sub Mul Div Pow Neg Reciprocal Sqrt Exp Log Mod Ceil Floor Round Sign Sin Cos Erf Max Min Mean Sum BitShift Clip",
		"And Or Xor Not Equal Greater Less GreaterOrEqual LessOrEqual IsInf IsNaN Where",
		"ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSum ReduceLogSumExp ArgMax ArgMin CumSum TopK",
		"Shape Size Reshape Flatten Squeeze Unsqueeze Transpose Concat Split Slice Gather GatherElements GatherND ScatterND Expand Tile Range",
		"ConstantOfShape Constant Identity OneHot NonZero Pad Trilu Cast CastLike Einsum MatMul Gemm MatMulInteger",
		"Relu LeakyRelu PRelu ThresholdedRelu Elu Celu Selu HardSigmoid HardSwish Sigmoid Tanh Softplus Softsign Softmax LogSoftmax",
		"LayerNormalization BatchNormalization InstanceNormalization Dropout Resize Conv ConvInteger AveragePool GlobalAveragePool",
		"QuantizeLinear DequantizeLinear DynamicQuantizeLinear",
	} {
		for _, op := range strings.Fields(group) {
			EncoderOps[op] = true
		}
	}
}

// Disputed replaces the expected outputs of the tests where ONNX 1.12's reference gives
// another answer than PyTorch and ONNX Runtime, and zoo follows them; each passes only with
// that answer, and reports list them.
var Disputed = map[string]struct {
	Why  string
	Want map[int]*tensor.Tensor
}{
	"test_resize_downsample_scales_linear_align_corners": {
		Why: "with scales, ONNX's reference takes align_corners' length_resized as in·scale unrounded (1.2 and 2.4 here: onnx/onnx#2462); " +
			"PyTorch's interpolate and ONNX Runtime take the output length (1 and 2), and zoo follows them",
		Want: map[int]*tensor.Tensor{0: {DType: tensor.Float32, Shape: []int{1, 1, 1, 2}, F32: []float32{1, 4}}},
	},
	"test_resize_downsample_scales_cubic_align_corners": {
		Why:  "the same rule in cubic mode (4×4 → 3×3 by 0.8: ONNX's reference uses 3.2 as the output length); ONNX Runtime 1.30 gives these values",
		Want: map[int]*tensor.Tensor{0: {DType: tensor.Float32, Shape: []int{1, 1, 3, 3}, F32: []float32{1, 2.5, 4, 7, 8.5, 10, 13, 14.5, 16}}},
	},
}

// Generate writes the tests into a new directory under parent with the generator script
// (onnx/testdata/nodetests/gen.py, run by Debian's /usr/bin/python3) and returns it. It
// returns ErrNoGenerator when python3-onnx is not installed.
func Generate(script, parent string) (string, error) {
	if err := exec.Command("/usr/bin/python3", "-c", "import onnx, numpy").Run(); err != nil {
		return "", ErrNoGenerator
	}
	dir := filepath.Join(parent, "onnx-node-tests")
	if out, err := exec.Command("/usr/bin/python3", script, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", script, err, out)
	}
	return dir, nil
}

// ErrNoGenerator says that Debian's python3-onnx, which writes the tests, is missing.
var ErrNoGenerator = errors.New("Debian's python3-onnx is not installed (apt-get install python3-onnx): it writes ONNX's node tests")

// List reads every test of dir/node and names its operator.
func List(dir string) ([]Test, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "node"))
	if err != nil {
		return nil, err
	}
	opsOf := map[string][]string{}
	var tests []Test
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		t := Test{Name: e.Name(), Dir: filepath.Join(dir, "node", e.Name())}
		m, err := readModel(filepath.Join(t.Dir, "model.onnx"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		seen := map[string]bool{}
		var ops []string
		for _, n := range m.GetGraph().GetNode() {
			if op := n.GetOpType(); !seen[op] {
				seen[op] = true
				ops = append(ops, op)
			}
		}
		opsOf[t.Name] = ops
		tests = append(tests, t)
	}
	for i := range tests {
		t := &tests[i]
		ops := opsOf[t.Name]
		if base, ok := strings.CutSuffix(t.Name, "_expanded"); ok && opsOf[base] != nil {
			ops = opsOf[base]
		}
		if len(ops) > 1 {
			// A few tests build their input with a helper op first (Constant).
			var keep []string
			for _, op := range ops {
				if op != "Constant" {
					keep = append(keep, op)
				}
			}
			ops = keep
		}
		t.Op = strings.Join(ops, "+")
		t.Encoder = EncoderOps[t.Op]
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].Name < tests[j].Name })
	return tests, nil
}

func readModel(path string) (*onnxpb.ModelProto, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// modelIO returns the names of the model's graph inputs (initializers left out) and outputs.
func modelIO(path string) (ins, outs []string, err error) {
	m, err := readModel(path)
	if err != nil {
		return nil, nil, err
	}
	inits := map[string]bool{}
	for _, tp := range m.GetGraph().GetInitializer() {
		inits[tp.GetName()] = true
	}
	for _, vi := range m.GetGraph().GetInput() {
		if !inits[vi.GetName()] {
			ins = append(ins, vi.GetName())
		}
	}
	for _, vi := range m.GetGraph().GetOutput() {
		outs = append(outs, vi.GetName())
	}
	return ins, outs, nil
}

func readPB(path string) (*tensor.Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return onnx.DecodeTensor(data)
}

// Run runs one test on backend b, guarding against a panic and a hang.
func Run(t Test, b backends.Backend, opts backends.Options) Outcome {
	done := make(chan Outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- Outcome{Crash, fmt.Sprintf("panic: %v\n%s", r, debug.Stack())}
			}
		}()
		done <- run(t, b, opts)
	}()
	select {
	case o := <-done:
		return o
	case <-time.After(TimeLimit):
		return Outcome{Hang, fmt.Sprintf("no answer in %v", TimeLimit)}
	}
}

func run(t Test, b backends.Backend, opts backends.Options) Outcome {
	refuse := func(err error) Outcome { return Outcome{Refused, err.Error()} }
	model := filepath.Join(t.Dir, "model.onnx")
	inNames, outNames, err := modelIO(model)
	if err != nil {
		return Outcome{Crash, "read the model: " + err.Error()}
	}
	g, err := onnx.ImportFile(model)
	if err != nil {
		return refuse(err)
	}
	p, err := b.Compile(g, opts)
	if err != nil {
		return refuse(err)
	}
	defer p.Close()
	sets, _ := filepath.Glob(filepath.Join(t.Dir, "test_data_set_*"))
	sort.Strings(sets)
	for _, set := range sets {
		in := map[string]*tensor.Tensor{}
		for k, name := range inNames {
			x, err := readPB(filepath.Join(set, fmt.Sprintf("input_%d.pb", k)))
			if errors.Is(err, os.ErrNotExist) {
				continue // an omitted optional input
			}
			if err != nil {
				return refuse(fmt.Errorf("input %q: %w", name, err))
			}
			in[name] = x
		}
		got, err := p.Run(context.Background(), in)
		if err != nil {
			return refuse(err)
		}
		for k, name := range outNames {
			want, err := readPB(filepath.Join(set, fmt.Sprintf("output_%d.pb", k)))
			if d, ok := Disputed[t.Name]; ok && d.Want[k] != nil {
				want, err = d.Want[k], nil
			}
			if err != nil {
				// zoo ran a graph whose expected output it cannot read: a refusal of the
				// output's type, not a comparison.
				return refuse(fmt.Errorf("expected output %q: %w", name, err))
			}
			g, ok := got[name]
			if !ok {
				return Outcome{Wrong, fmt.Sprintf("%s: output %q missing", filepath.Base(set), name)}
			}
			if err := Compare(g, want); err != nil {
				return Outcome{Wrong, fmt.Sprintf("%s: output %q: %v", filepath.Base(set), name, err)}
			}
		}
	}
	return Outcome{Status: Pass}
}

// Compare compares as ONNX's backend test runner does: the same dtype and shape, floats
// within Rtol and Atol (NaN equal to NaN, infinities exactly), integers and bools exactly.
func Compare(got, want *tensor.Tensor) error {
	if got.DType != want.DType {
		return fmt.Errorf("dtype %v, want %v", got.DType, want.DType)
	}
	if !tensor.SameShape(got.Shape, want.Shape) {
		return fmt.Errorf("shape %v, want %v", got.Shape, want.Shape)
	}
	if err := got.Check(); err != nil {
		return err
	}
	close := func(g, w float64) bool {
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			return math.IsNaN(w) && math.IsNaN(g)
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			return g == w
		}
		return math.Abs(g-w) <= Atol+Rtol*math.Abs(w)
	}
	switch {
	case want.DType.IsFloat():
		for i, w := range want.F32 {
			if !close(float64(got.F32[i]), float64(w)) {
				return fmt.Errorf("element %d: %v, want %v (rtol %g, atol %g)", i, got.F32[i], w, Rtol, Atol)
			}
		}
	case want.DType == tensor.Float64:
		for i, w := range want.F64 {
			if !close(got.F64[i], w) {
				return fmt.Errorf("element %d: %v, want %v (rtol %g, atol %g)", i, got.F64[i], w, Rtol, Atol)
			}
		}
	case want.DType == tensor.Bool:
		for i, w := range want.Bool {
			if got.Bool[i] != w {
				return fmt.Errorf("element %d: %v, want %v", i, got.Bool[i], w)
			}
		}
	default:
		for i, w := range want.I64 {
			if got.I64[i] != w {
				return fmt.Errorf("element %d: %d, want %d", i, got.I64[i], w)
			}
		}
	}
	return nil
}

// Counts are the outcomes of a set of tests.
type Counts struct{ Tests, Pass, Refused, Bad int }

func (c *Counts) add(o Outcome) {
	c.Tests++
	switch {
	case o.Status == Pass:
		c.Pass++
	case o.Status == Refused:
		c.Refused++
	default:
		c.Bad++
	}
}

// Report renders the outcomes per operator (* marks the encoder subset) and in total, for the
// encoder subset and the whole suite, and lists the disputed tests.
func Report(backend string, tests []Test, outcomes map[string]Outcome) (text string, encoder, all Counts) {
	perOp := map[string]*Counts{}
	for _, t := range tests {
		o := outcomes[t.Name]
		if perOp[t.Op] == nil {
			perOp[t.Op] = &Counts{}
		}
		perOp[t.Op].add(o)
		all.add(o)
		if t.Encoder {
			encoder.add(o)
		}
	}
	ops := make([]string, 0, len(perOp))
	for op := range perOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "ONNX node tests on the %s backend, per operator (* the encoder subset): tests pass refused wrong/crash/hang\n", backend)
	for _, op := range ops {
		c := perOp[op]
		mark := " "
		if EncoderOps[op] {
			mark = "*"
		}
		fmt.Fprintf(&b, "%s %-40s %3d %3d %3d %3d\n", mark, op, c.Tests, c.Pass, c.Refused, c.Bad)
	}
	fmt.Fprintf(&b, "encoder subset: %d tests, %d pass, %d refused, %d wrong/crash/hang\n", encoder.Tests, encoder.Pass, encoder.Refused, encoder.Bad)
	fmt.Fprintf(&b, "whole suite:    %d tests, %d pass, %d refused, %d wrong/crash/hang", all.Tests, all.Pass, all.Refused, all.Bad)
	names := make([]string, 0, len(Disputed))
	for name := range Disputed {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "\n%s is checked against another answer than ONNX 1.12's: %s", name, Disputed[name].Why)
	}
	return b.String(), encoder, all
}

// TSV renders one line per test: name, operator, subset ("encoder" or "other"), outcome and
// detail, tab-separated.
func TSV(tests []Test, outcomes map[string]Outcome) string {
	var b strings.Builder
	for _, t := range tests {
		o := outcomes[t.Name]
		sub := "other"
		if t.Encoder {
			sub = "encoder"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Op, sub, o.Status, strings.ReplaceAll(o.Detail, "\n", " "))
	}
	return b.String()
}
