package cpu

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestRegisteredAndProbe(t *testing.T) {
	b, ok := backends.Lookup("cpu")
	if !ok {
		t.Fatal(`backend "cpu" is not registered`)
	}
	p := b.Probe()
	if !p.Available || p.Priority != 10 || p.Level != simd.Current().String() {
		t.Errorf("probe = %+v", p)
	}
	if !strings.Contains(p.Device, "core") {
		t.Errorf("device %q does not state the core count", p.Device)
	}
	t.Setenv(ThreadsEnv, "3")
	if got := b.Probe().Threads; got != 3 {
		t.Errorf("with ZOO_THREADS=3, Threads = %d", got)
	}
	for _, bad := range []string{"0", "-2", "many", ""} {
		t.Setenv(ThreadsEnv, bad)
		if got := b.Probe().Threads; got < 1 {
			t.Errorf("with ZOO_THREADS=%q, Threads = %d", bad, got)
		}
	}
}

// withKernel replaces op's kernel for the duration of a test.
func withKernel(t *testing.T, op string, mk kernelMaker) {
	old, had := opTable[op]
	if mk == nil {
		delete(opTable, op)
	} else {
		opTable[op] = mk
	}
	t.Cleanup(func() {
		if had {
			opTable[op] = old
		} else {
			delete(opTable, op)
		}
	})
}

func unaryGraph(t *testing.T, ops ...string) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("g")
	v := b.Input("x", tensor.Float32, graph.Sym("n"))
	for _, op := range ops {
		v = b.Op(op, []string{v}, nil)
	}
	b.Output("y", v, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestUnsupportedOp(t *testing.T) {
	withKernel(t, "Erf", nil)
	_, err := Backend{}.Compile(unaryGraph(t, "Abs", "Erf"), backends.Options{})
	var u *backends.UnsupportedOpError
	if !errors.As(err, &u) || u.Op != "Erf" || u.Node != "Erf" || u.Backend != "cpu" {
		t.Fatalf("err = %v, want an UnsupportedOpError for Erf", err)
	}
}

func TestUnsupportedAttribute(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(2))
	y := b.Op("Gelu", []string{x}, graph.Attrs{"approximate": graph.String("fast")})
	b.Output("y", y, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Backend{}.Compile(g, backends.Options{})
	var u *backends.UnsupportedOpError
	if !errors.As(err, &u) || u.Op != "Gelu" || !strings.Contains(err.Error(), "fast") {
		t.Fatalf("err = %v, want an UnsupportedOpError for Gelu's approximate fast", err)
	}
}

func TestBadInputs(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("tokens", tensor.Float32, graph.Sym("batch"), graph.Fixed(3))
	b.Output("y", b.Op("Relu", []string{x}, nil), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Backend{}.Compile(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := &tensor.Tensor{DType: tensor.Float32, Shape: []int{2, 3}, F32: make([]float32, 6)}
	cases := []struct {
		name   string
		inputs map[string]*tensor.Tensor
		want   string
	}{
		{"missing", map[string]*tensor.Tensor{}, `input "tokens" is missing`},
		{"nil", map[string]*tensor.Tensor{"tokens": nil}, `input "tokens" is missing`},
		{"dtype", map[string]*tensor.Tensor{"tokens": {DType: tensor.Int64, Shape: []int{2, 3}, I64: make([]int64, 6)}}, "dtype int64, want float32"},
		{"rank", map[string]*tensor.Tensor{"tokens": {DType: tensor.Float32, Shape: []int{6}, F32: make([]float32, 6)}}, "rank 1"},
		{"fixed dim", map[string]*tensor.Tensor{"tokens": {DType: tensor.Float32, Shape: []int{3, 2}, F32: make([]float32, 6)}}, "dimension 1 must be 3"},
		{"data", map[string]*tensor.Tensor{"tokens": {DType: tensor.Float32, Shape: []int{2, 3}, F32: make([]float32, 5)}}, "holds 5"},
		{"unknown", map[string]*tensor.Tensor{"tokens": good, "mask": good}, `unknown input "mask"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.Run(context.Background(), c.inputs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
			if c.name != "unknown" && !strings.Contains(err.Error(), `"tokens"`) {
				t.Errorf("err = %v does not name the input", err)
			}
		})
	}
	out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"tokens": good})
	if err != nil || len(out["y"].F32) != 6 {
		t.Fatalf("good input: %v %v", out, err)
	}
}

func TestCancellation(t *testing.T) {
	p, err := Backend{}.Compile(unaryGraph(t, "Abs", "Neg", "Abs"), backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"x": tensor.ScalarF(1)}
	in["x"].Shape = []int{1}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Run(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before run: err = %v", err)
	}

	// Cancel while the second node runs: the third must not start.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var ran atomic.Int32
	withKernel(t, "Neg", func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			cancel()
			return []*tensor.Tensor{in[0]}, nil
		}, nil
	})
	withKernel(t, "Abs", func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			ran.Add(1)
			return []*tensor.Tensor{in[0]}, nil
		}, nil
	})
	p, err = Backend{}.Compile(unaryGraph(t, "Abs", "Neg", "Abs"), backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(ctx, in)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `"Abs_1"`) {
		t.Fatalf("err = %v, want cancellation before node Abs_1", err)
	}
	if ran.Load() != 1 {
		t.Errorf("%d Abs nodes ran, want 1", ran.Load())
	}
}

func TestPanicsBecomeErrors(t *testing.T) {
	withKernel(t, "Tanh", func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			var s []int
			_ = s[3]
			return nil, nil
		}, nil
	})
	withKernel(t, "Sigmoid", func(n *graph.Node) (kernel, error) {
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			workpool.For(4, 1000, 1, func(lo, hi int) {
				if hi == 1000 {
					panic("boom in a worker")
				}
			})
			return nil, nil
		}, nil
	})
	for _, op := range []string{"Tanh", "Sigmoid"} {
		p, err := Backend{}.Compile(unaryGraph(t, "Abs", op), backends.Options{Threads: 4})
		if err != nil {
			t.Fatal(err)
		}
		x := &tensor.Tensor{DType: tensor.Float32, Shape: []int{2}, F32: []float32{1, 2}}
		_, err = p.Run(context.Background(), map[string]*tensor.Tensor{"x": x})
		if err == nil || !strings.Contains(err.Error(), `node "`+op+`"`) || !strings.Contains(err.Error(), "internal error") {
			t.Fatalf("%s: err = %v, want an internal error naming the node", op, err)
		}
	}
}

func TestOutputsAreOwnedAndIntermediatesKept(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(2))
	w := b.Param("w", &tensor.Tensor{DType: tensor.Float32, Shape: []int{2}, F32: []float32{10, 20}})
	sum := b.Add(x, w)
	r := b.Relu(sum)
	b.Output("passthrough", x, tensor.Float32)
	b.Output("weight", w, tensor.Float32)
	b.Output("y", r, tensor.Float32)
	b.Output("y2", r, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Backend{}).Compile(g, backends.Options{KeepIntermediates: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown kept intermediate: err = %v", err)
	}
	p, err := Backend{}.Compile(g, backends.Options{KeepIntermediates: []string{sum}})
	if err != nil {
		t.Fatal(err)
	}
	xt := &tensor.Tensor{DType: tensor.Float32, Shape: []int{2}, F32: []float32{-30, 1}}
	out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": xt})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[sum].F32; got[0] != -20 || got[1] != 21 {
		t.Errorf("kept %s = %v", sum, got)
	}
	if got := out["y"].F32; got[0] != 0 || got[1] != 21 {
		t.Errorf("y = %v", got)
	}
	out["passthrough"].F32[0] = 99
	out["weight"].F32[0] = 99
	out["y"].F32[1] = 99
	if xt.F32[0] != -30 || g.Initializer("w").F32[0] != 10 || out["y2"].F32[1] != 21 {
		t.Error("returned outputs share memory with inputs, initializers or each other")
	}
	out, err = p.Run(context.Background(), map[string]*tensor.Tensor{"x": xt})
	if err != nil || out["weight"].F32[0] != 10 {
		t.Errorf("second run: %v %v", out, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": xt}); err == nil {
		t.Error("Run after Close succeeded")
	}
}

func TestMemoryPlan(t *testing.T) {
	g := unaryGraph(t, "Abs", "Neg", "Exp")
	p, err := newProgram(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// steps: Abs, Neg, Exp, y/Identity. Abs's output dies at Neg, Neg's at Exp, Exp's at the
	// Identity; y is an output and is never freed.
	freed := map[string]int{}
	for i, st := range p.plan.Steps {
		for _, s := range st.Free {
			freed[p.plan.Slots[s]] = i
		}
	}
	want := map[string]int{"Abs": 1, "Neg": 2, "Exp": 3}
	for name, at := range want {
		if got, ok := freed[name]; !ok || got != at {
			t.Errorf("%s freed at step %d (%v), want %d", name, got, ok, at)
		}
	}
	if _, ok := freed["y"]; ok {
		t.Error("graph output y is freed")
	}
}

func TestConstantFolding(t *testing.T) {
	// Shape of a statically shaped input, Gather, Unsqueeze, Concat and Reshape shape
	// arithmetic fold away at compile time; only Reshape remains.
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(2), graph.Fixed(6))
	sh := b.Shape(x)
	d0 := b.Gather(sh, b.Const(tensor.Scalar64(0)), 0)
	d0u := b.Unsqueeze(d0, 0)
	target := b.Op("Concat", []string{d0u, b.ConstInts(3, 2)}, graph.Attrs{"axis": graph.Int(0)})
	y := b.Op("Reshape", []string{x, target}, nil)
	b.Output("y", y, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProgram(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, st := range p.plan.Steps {
		ops = append(ops, st.Node.Op)
	}
	if strings.Join(ops, ",") != "Reshape,Identity" {
		t.Errorf("run-time steps %v, want Reshape,Identity", ops)
	}
	xt := &tensor.Tensor{DType: tensor.Float32, Shape: []int{2, 6}, F32: make([]float32, 12)}
	out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": xt})
	if err != nil || !tensor.SameShape(out["y"].Shape, []int{2, 3, 2}) {
		t.Fatalf("y = %v, %v", out["y"], err)
	}
}

func TestCompileErrorsNameTheNode(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(4))
	y := b.Reshape(b.Relu(b.Param("w", &tensor.Tensor{DType: tensor.Float32, Shape: []int{4}, F32: make([]float32, 4)})), 3)
	b.Output("y", b.Add(x, y), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Backend{}.Compile(g, backends.Options{})
	if err == nil || !strings.Contains(err.Error(), `"Reshape"`) || !strings.Contains(err.Error(), "cannot reshape") {
		t.Fatalf("err = %v", err)
	}
}

func randTensor(r *rand.Rand, shape ...int) *tensor.Tensor {
	t, _ := tensor.New(tensor.Float32, shape...)
	for i := range t.F32 {
		t.F32[i] = float32(r.NormFloat64())
	}
	return t
}

// attentionGraph is a small encoder block: projections, multi-head attention with a
// padding mask, residual, LayerNorm and a ReLU feed-forward.
func attentionGraph(t *testing.T, r *rand.Rand, d, heads int) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("block")
	x := b.Input("x", tensor.Float32, graph.Sym("batch"), graph.Sym("seq"), graph.Fixed(int64(d)))
	mask := b.Input("mask", tensor.Bool, graph.Sym("batch"), graph.Sym("seq"))
	dh := d / heads
	proj := func(name string) string {
		w := b.Param(name+".weight", randTensor(r, d, d))
		bias := b.Param(name+".bias", randTensor(r, d))
		return b.Op("Gemm", []string{b.Reshape(x, -1, int64(d)), w, bias}, graph.Attrs{"transB": graph.Int(1)})
	}
	split := func(v string) string {
		return b.Transpose(b.Reshape(v, 0, -1, int64(heads), int64(dh)), 0, 2, 1, 3)
	}
	shape := b.Shape(x)
	q := split(b.Op("Reshape", []string{proj("q"), shape}, nil))
	k := split(b.Op("Reshape", []string{proj("k"), shape}, nil))
	v := split(b.Op("Reshape", []string{proj("v"), shape}, nil))
	scores := b.Div(b.MatMul(q, b.Transpose(k, 0, 1, 3, 2)), b.ConstFloat(float32(math.Sqrt(float64(dh)))))
	m := b.Unsqueeze(b.Unsqueeze(mask, 1), 1)
	scores = b.Where(m, scores, b.ConstFloat(float32(math.Inf(-1))))
	attn := b.MatMul(b.Softmax(scores, -1), v)
	ctx := b.Reshape(b.Transpose(attn, 0, 2, 1, 3), 0, 0, int64(d))
	h := b.LayerNorm(b.Add(x, ctx), b.Param("ln.weight", randTensor(r, d)), b.Param("ln.bias", randTensor(r, d)), 1e-5)
	ff := b.MatMul(b.Relu(b.MatMul(h, b.Param("ff1", randTensor(r, d, 2*d)))), b.Param("ff2", randTensor(r, 2*d, d)))
	out := b.Op("ReduceMean", []string{b.Op("Erf", []string{b.Add(h, ff)}, nil)}, graph.Attrs{"axes": graph.Ints(1), "keepdims": graph.Int(0)})
	b.Output("hidden", b.Add(h, ff), tensor.Float32)
	b.Output("pooled", out, tensor.Float32)
	b.Output("probs", b.Softmax(scores, -1), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestThreadCountIndependence(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	const batch, seq, d, heads = 2, 67, 96, 4
	g := attentionGraph(t, r, d, heads)
	x := randTensor(r, batch, seq, d)
	mask, _ := tensor.New(tensor.Bool, batch, seq)
	for i := range mask.Bool {
		mask.Bool[i] = i%seq < seq-5*(i/seq) // the second sequence has 5 padded keys
	}
	inputs := map[string]*tensor.Tensor{"x": x, "mask": mask}
	var ref map[string]*tensor.Tensor
	for _, threads := range []int{1, 2, 3, 4, 8} {
		p, err := Backend{}.Compile(g, backends.Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Run(context.Background(), inputs)
		if err != nil {
			t.Fatalf("threads %d: %v", threads, err)
		}
		if ref == nil {
			ref = out
			probs := out["probs"]
			if !tensor.SameShape(probs.Shape, []int{batch, heads, seq, seq}) {
				t.Fatalf("probs shape %v", probs.Shape)
			}
			// padded keys get exactly zero probability
			for q := 0; q < seq; q++ {
				if p := probs.F32[((1*heads+2)*seq+q)*seq+seq-1]; p != 0 {
					t.Fatalf("padded key has probability %v", p)
				}
			}
			continue
		}
		for name, want := range ref {
			if !tensor.Equal(out[name], want) {
				t.Errorf("threads %d: output %s differs from threads 1", threads, name)
			}
		}
	}
}

func TestWorkerPool(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		for _, n := range []int{0, 1, 7, 1000} {
			hits := make([]int32, n)
			workpool.For(threads, n, 3, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads %d n %d: index %d visited %d times", threads, n, i, h)
				}
			}
		}
	}
	// nested parallel loops finish (the caller always works through the chunks itself)
	var total atomic.Int64
	workpool.Tasks(4, 16, func(i int) {
		workpool.For(4, 100, 1, func(lo, hi int) { total.Add(int64(hi - lo)) })
	})
	if total.Load() != 1600 {
		t.Fatalf("nested total %d", total.Load())
	}
}
