package onnx_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// ONNX's own operator conformance suite: the backend "node" tests that ship with onnx (922 in
// onnx 1.12), each a model.onnx holding one operator (or the function-expanded form of one,
// test_*_expanded) with test_data_set_N/input_K.pb and output_K.pb. The tests are not
// committed (27 MB): testdata/nodetests/gen.py writes them in about five seconds with Debian's
// python3-onnx, which CI installs; the test skips where python3-onnx is missing, or reads
// $ZOO_ONNX_NODE_TESTS when that names a directory gen.py wrote.
//
// Each test is imported, compiled for the CPU backend and run, and every output is compared as
// ONNX's runner compares (onnx.backend.test.runner: the same dtype and shape, floats within
// rtol 1e-3 and atol 1e-7 with NaN equal to NaN; integers and booleans exactly). A test ends in
// one of five outcomes: it passes; zoo refuses it (the import, compile or run returns an error,
// which must be one line); or a wrong answer, a crash (a panic) or a hang (no answer in a
// minute), each of which fails the test. testdata/nodetests/passing.txt lists the tests that
// pass: one that stops passing fails the test too, and one that starts passing asks for the
// list to be rewritten (ZOO_UPDATE_NODETESTS=1). The log holds the counts per operator, for the
// encoder subset (encoderOps) and the whole suite; ZOO_NODETESTS_REPORT=FILE also writes one
// line per test (name, operator, subset, outcome, detail), tab-separated.

const (
	nodeTestsEnv      = "ZOO_ONNX_NODE_TESTS"
	nodeTestsUpdate   = "ZOO_UPDATE_NODETESTS"
	nodeTestsReport   = "ZOO_NODETESTS_REPORT"
	nodeTestsPassing  = "testdata/nodetests/passing.txt"
	nodeTestRtol      = 1e-3
	nodeTestAtol      = 1e-7
	nodeTestTimeLimit = time.Minute
)

// The outcomes of one node test.
const (
	outPass    = "pass"
	outRefused = "refused"
	outWrong   = "wrong"
	outCrash   = "crash"
	outHang    = "hang"
)

// nodeTest is one test directory.
type nodeTest struct {
	name, dir string
	// op is the operator under test: the model's one op type, or for an expanded test the
	// op of the test it expands.
	op      string
	encoder bool
}

// nodeOutcome is what running one test gave.
type nodeOutcome struct {
	status, detail string
}

// nodeTestsDir returns the directory holding the node tests (its node/ folder), generating
// them when $ZOO_ONNX_NODE_TESTS is unset.
func nodeTestsDir(t *testing.T) string {
	if dir := os.Getenv(nodeTestsEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "node")); err != nil {
			t.Fatalf("%s=%s: no node tests there (%v); write them with /usr/bin/python3 testdata/nodetests/gen.py %s", nodeTestsEnv, dir, err, dir)
		}
		return dir
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import onnx, numpy").Run(); err != nil {
		t.Skip("Debian's python3-onnx is not installed (apt-get install python3-onnx): it writes ONNX's node tests")
	}
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "testdata/nodetests/gen.py", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("testdata/nodetests/gen.py: %v\n%s", err, out)
	}
	return dir
}

// listNodeTests reads every test's model to name its operator.
func listNodeTests(t *testing.T, dir string) []nodeTest {
	entries, err := os.ReadDir(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	opsOf := map[string][]string{}
	var tests []nodeTest
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		nt := nodeTest{name: e.Name(), dir: filepath.Join(dir, "node", e.Name())}
		data, err := os.ReadFile(filepath.Join(nt.dir, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		var m onnxpb.ModelProto
		if err := proto.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", nt.name, err)
		}
		seen := map[string]bool{}
		var ops []string
		for _, n := range m.GetGraph().GetNode() {
			if op := n.GetOpType(); !seen[op] {
				seen[op] = true
				ops = append(ops, op)
			}
		}
		opsOf[nt.name] = ops
		tests = append(tests, nt)
	}
	for i := range tests {
		nt := &tests[i]
		ops := opsOf[nt.name]
		if base, ok := strings.CutSuffix(nt.name, "_expanded"); ok && opsOf[base] != nil {
			ops = opsOf[base]
		}
		if len(ops) > 1 {
			// A few tests build their input with a helper op first (Cast, Constant).
			ops = slicesWithout(ops, "Constant")
		}
		nt.op = strings.Join(ops, "+")
		nt.encoder = encoderOps[nt.op]
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].name < tests[j].name })
	return tests
}

func slicesWithout(s []string, drop string) []string {
	var out []string
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// readModelIO returns the names of the model's graph inputs and outputs, in order.
func readModelIO(path string) (ins, outs []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
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

// readPB decodes a test_data_set tensor.
func readPB(path string) (*tensor.Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return onnx.DecodeTensorProto(data)
}

// disputedOutputs replaces the expected outputs of the tests where ONNX 1.12's reference
// gives another answer than PyTorch and ONNX Runtime, and zoo follows them; each passes only
// with that answer, and the log lists them.
var disputedOutputs = map[string]struct {
	why  string
	want map[int]*tensor.Tensor
}{
	"test_resize_downsample_scales_linear_align_corners": {
		why: "with scales, ONNX's reference takes align_corners' length_resized as in·scale unrounded (1.2 and 2.4 here: onnx/onnx#2462); " +
			"PyTorch's interpolate and ONNX Runtime take the output length (1 and 2), and zoo follows them",
		want: map[int]*tensor.Tensor{0: {DType: tensor.Float32, Shape: []int{1, 1, 1, 2}, F32: []float32{1, 4}}},
	},
	"test_resize_downsample_scales_cubic_align_corners": {
		why:  "the same rule in cubic mode (4×4 → 3×3 by 0.8: ONNX's reference uses 3.2 as the output length); ONNX Runtime 1.30 gives these values",
		want: map[int]*tensor.Tensor{0: {DType: tensor.Float32, Shape: []int{1, 1, 3, 3}, F32: []float32{1, 2.5, 4, 7, 8.5, 10, 13, 14.5, 16}}},
	},
}

// runNodeTest runs one test on the CPU backend, guarding against a panic and a hang.
func runNodeTest(nt nodeTest) nodeOutcome {
	done := make(chan nodeOutcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- nodeOutcome{outCrash, fmt.Sprintf("panic: %v\n%s", r, debug.Stack())}
			}
		}()
		done <- runNodeTestOnce(nt)
	}()
	select {
	case o := <-done:
		return o
	case <-time.After(nodeTestTimeLimit):
		return nodeOutcome{outHang, fmt.Sprintf("no answer in %v", nodeTestTimeLimit)}
	}
}

func runNodeTestOnce(nt nodeTest) nodeOutcome {
	refuse := func(err error) nodeOutcome { return nodeOutcome{outRefused, err.Error()} }
	model := filepath.Join(nt.dir, "model.onnx")
	inNames, outNames, err := readModelIO(model)
	if err != nil {
		return nodeOutcome{outCrash, "read the model: " + err.Error()}
	}
	g, err := onnx.ImportFile(model)
	if err != nil {
		return refuse(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		return refuse(err)
	}
	defer p.Close()
	sets, _ := filepath.Glob(filepath.Join(nt.dir, "test_data_set_*"))
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
			if d, ok := disputedOutputs[nt.name]; ok && d.want[k] != nil {
				want, err = d.want[k], nil
			}
			if err != nil {
				// zoo ran a graph whose expected output it cannot even read (e.g. float64):
				// that is a refusal of the output type, not a comparison.
				return refuse(fmt.Errorf("expected output %q: %w", name, err))
			}
			g, ok := got[name]
			if !ok {
				return nodeOutcome{outWrong, fmt.Sprintf("%s: output %q missing", filepath.Base(set), name)}
			}
			if err := compareNodeOutput(g, want); err != nil {
				return nodeOutcome{outWrong, fmt.Sprintf("%s: output %q: %v", filepath.Base(set), name, err)}
			}
		}
	}
	return nodeOutcome{status: outPass}
}

// compareNodeOutput compares as ONNX's backend test runner does.
func compareNodeOutput(got, want *tensor.Tensor) error {
	if got.DType != want.DType {
		return fmt.Errorf("dtype %v, want %v", got.DType, want.DType)
	}
	if !tensor.SameShape(got.Shape, want.Shape) {
		return fmt.Errorf("shape %v, want %v", got.Shape, want.Shape)
	}
	switch {
	case want.DType.IsFloat():
		for i, w := range want.F32 {
			g := got.F32[i]
			if !closeNode(float64(g), float64(w)) {
				return fmt.Errorf("element %d: %v, want %v (rtol %g, atol %g)", i, g, w, nodeTestRtol, nodeTestAtol)
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

// closeNode is numpy's assert_allclose(rtol=1e-3, atol=1e-7) for one element.
func closeNode(g, w float64) bool {
	switch {
	case math.IsNaN(w) || math.IsNaN(g):
		return math.IsNaN(w) && math.IsNaN(g)
	case math.IsInf(w, 0) || math.IsInf(g, 0):
		return g == w
	}
	return math.Abs(g-w) <= nodeTestAtol+nodeTestRtol*math.Abs(w)
}

func TestONNXNodeTests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: ONNX's node tests take a few seconds to write and run")
	}
	dir := nodeTestsDir(t)
	tests := listNodeTests(t, dir)
	if len(tests) == 0 {
		t.Fatalf("no node tests in %s/node", dir)
	}
	outcomes := map[string]nodeOutcome{}
	for _, nt := range tests {
		o := runNodeTest(nt)
		if o.status == outRefused && strings.Contains(o.detail, "\n") {
			t.Errorf("%s (%s): the refusal is more than one line:\n%s", nt.name, nt.op, o.detail)
		}
		switch o.status {
		case outWrong, outCrash, outHang:
			t.Errorf("%s (%s): %s: %s", nt.name, nt.op, o.status, o.detail)
		}
		outcomes[nt.name] = o
	}
	logNodeCounts(t, tests, outcomes)
	if path := os.Getenv(nodeTestsReport); path != "" {
		var b strings.Builder
		for _, nt := range tests {
			o := outcomes[nt.name]
			sub := "other"
			if nt.encoder {
				sub = "encoder"
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", nt.name, nt.op, sub, o.status, strings.ReplaceAll(o.detail, "\n", " "))
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkPassingList(t, tests, outcomes)
}

// checkPassingList compares the passes with testdata/nodetests/passing.txt (or rewrites it).
func checkPassingList(t *testing.T, tests []nodeTest, outcomes map[string]nodeOutcome) {
	var passing []string
	for _, nt := range tests {
		if outcomes[nt.name].status == outPass {
			passing = append(passing, nt.name)
		}
	}
	if os.Getenv(nodeTestsUpdate) == "1" {
		text := "# ONNX 1.12's node tests that zoo's CPU backend passes (onnx/nodetests_test.go; rewrite with ZOO_UPDATE_NODETESTS=1)\n" + strings.Join(passing, "\n") + "\n"
		if err := os.WriteFile(nodeTestsPassing, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d passing tests", nodeTestsPassing, len(passing))
		return
	}
	data, err := os.ReadFile(nodeTestsPassing)
	if err != nil {
		t.Fatalf("%v (write it with %s=1)", err, nodeTestsUpdate)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			listed[line] = true
		}
	}
	var newly []string
	for _, nt := range tests {
		o := outcomes[nt.name]
		switch {
		case listed[nt.name] && o.status != outPass:
			t.Errorf("%s (%s) passed before and now is %s: %s", nt.name, nt.op, o.status, o.detail)
		case !listed[nt.name] && o.status == outPass:
			newly = append(newly, nt.name)
		}
	}
	if len(newly) > 0 {
		t.Errorf("%d tests pass that %s does not list (%s): rewrite it with %s=1", len(newly), nodeTestsPassing, strings.Join(newly, ", "), nodeTestsUpdate)
	}
}

// logNodeCounts logs the outcomes per operator and in total, for the encoder subset and for
// the whole suite.
func logNodeCounts(t *testing.T, tests []nodeTest, outcomes map[string]nodeOutcome) {
	type counts struct{ tests, pass, refused, bad int }
	add := func(c *counts, o nodeOutcome) {
		c.tests++
		switch o.status {
		case outPass:
			c.pass++
		case outRefused:
			c.refused++
		default:
			c.bad++
		}
	}
	perOp := map[string]*counts{}
	var enc, all counts
	for _, nt := range tests {
		o := outcomes[nt.name]
		if perOp[nt.op] == nil {
			perOp[nt.op] = &counts{}
		}
		add(perOp[nt.op], o)
		add(&all, o)
		if nt.encoder {
			add(&enc, o)
		}
	}
	ops := make([]string, 0, len(perOp))
	for op := range perOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "ONNX node tests on the CPU backend, per operator (* the encoder subset): tests pass refused wrong/crash/hang\n")
	for _, op := range ops {
		c := perOp[op]
		mark := " "
		if encoderOps[op] {
			mark = "*"
		}
		fmt.Fprintf(&b, "%s %-40s %3d %3d %3d %3d\n", mark, op, c.tests, c.pass, c.refused, c.bad)
	}
	fmt.Fprintf(&b, "encoder subset: %d tests, %d pass, %d refused, %d wrong/crash/hang\n", enc.tests, enc.pass, enc.refused, enc.bad)
	fmt.Fprintf(&b, "whole suite:    %d tests, %d pass, %d refused, %d wrong/crash/hang", all.tests, all.pass, all.refused, all.bad)
	for _, name := range slices.Sorted(maps.Keys(disputedOutputs)) {
		fmt.Fprintf(&b, "\n%s is checked against another answer than ONNX 1.12's: %s", name, disputedOutputs[name].why)
	}
	t.Log(b.String())
}

// encoderOps are the operators of the encoder subset: every operator a Transformer encoder, or
// a file exported from one, may use (arithmetic and math, comparison and logic, reductions,
// shape and indexing, casts, matrix products and Einsum, activations, normalizations, Dropout,
// Resize, Pad, Conv and pooling, quantization). Left out: recurrent cells, control flow,
// sequences and optionals, training and loss ops, random ops, signal processing, detection
// and sampling ops, string ops, and the rest of the vision ops. A test belongs to the subset
// when its operator does (an expanded test when the operator it expands does).
var encoderOps = map[string]bool{}

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
			encoderOps[op] = true
		}
	}
}
