package autodiff_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// sumAll adds ReduceSum over every axis.
func sumAll(b *graph.Builder, x string) string {
	return b.Op("ReduceSum", []string{x}, graph.Attrs{"keepdims": graph.Int(0)})
}

func evalGrads(t *testing.T, g *graph.Graph, wrt []string, inputs map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	t.Helper()
	gg, names, err := autodiff.Gradients(context.Background(), g, "loss", wrt)
	if err != nil {
		t.Fatal(err)
	}
	out, err := gg.Eval(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]*tensor.Tensor{}
	for p, n := range names {
		if n != autodiff.GradName(p) {
			t.Errorf("gradient of %s is output %q, want %q", p, n, autodiff.GradName(p))
		}
		res[p] = out[n]
	}
	if out["loss"] == nil {
		t.Error("the gradient graph does not output the loss")
	}
	return res
}

func wantF32(t *testing.T, what string, got *tensor.Tensor, want ...float32) {
	t.Helper()
	if got == nil || len(got.F32) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i, w := range want {
		if math.Abs(float64(got.F32[i]-w)) > 1e-6*math.Max(1, math.Abs(float64(w))) {
			t.Fatalf("%s: got %v, want %v", what, got.F32, want)
		}
	}
}

// A value used several times sums its gradients; a parameter the loss does not reach gets
// zeros; a buffer and a StopGradient cut the gradient.
func TestAccumulationAndCuts(t *testing.T) {
	b := graph.NewBuilder("acc")
	x := b.Param("x", f32(s(3), 1, 2, -3))
	w := b.Param("w", f32(s(3), 0.5, 0.5, 0.5))
	b.Param("unused", f32(s(2), 1, 1))
	buf := b.Buffer("buf", f32(s(3), 2, 2, 2))
	// loss = Σ x·x + Σ x·buf + Σ stop(x)·w + Σ w·x  → d/dx = 2x + buf + w, d/dw = x + x
	y := b.Add(b.Add(sumAll(b, b.Mul(x, x)), sumAll(b, b.Mul(x, buf))), b.Add(sumAll(b, b.Mul(autodiff.StopGradient(b, x), w)), sumAll(b, b.Mul(w, x))))
	b.Output("loss", y, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	nodes := len(g.Nodes)
	grads := evalGrads(t, g, nil, nil)
	if len(g.Nodes) != nodes {
		t.Error("Gradients modified its input graph")
	}
	wantF32(t, "d/dx", grads["x"], 2*1+2+0.5, 2*2+2+0.5, 2*-3+2+0.5)
	wantF32(t, "d/dw", grads["w"], 2, 4, -6)
	wantF32(t, "d/dunused", grads["unused"], 0, 0)
	if _, ok := grads["buf"]; ok {
		t.Error("a buffer got a gradient")
	}
	only := evalGrads(t, g, []string{"w"}, nil)
	if len(only) != 1 {
		t.Errorf("wrt [w]: gradients for %d parameters", len(only))
	}
	wantF32(t, "d/dw alone", only["w"], 2, 4, -6)
}

// The returned graph carries no StopGradient mark (an ONNX runtime would reject it), and Strip
// removes them from a forward graph without touching the original.
func TestStripRemovesMarks(t *testing.T) {
	b := graph.NewBuilder("strip")
	x := b.Param("x", f32(s(2), 1, 2))
	b.Output("loss", sumAll(b, b.Mul(autodiff.StopGradient(b, x), x)), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	marked := func(g *graph.Graph) int {
		n := 0
		for _, nd := range g.Nodes {
			if _, ok := nd.Attrs["zoo_stop_gradient"]; ok {
				n++
			}
		}
		return n
	}
	gg, _, err := autodiff.Gradients(context.Background(), g, "loss", nil)
	if err != nil {
		t.Fatal(err)
	}
	if marked(gg) != 0 || marked(autodiff.Strip(g)) != 0 || marked(g) != 1 {
		t.Errorf("marks: gradient graph %d, stripped %d, original %d; want 0, 0, 1", marked(gg), marked(autodiff.Strip(g)), marked(g))
	}
}

func TestGradientsErrors(t *testing.T) {
	build := func(t *testing.T, f func(b *graph.Builder)) *graph.Graph {
		b := graph.NewBuilder("bad")
		f(b)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	vec := func(b *graph.Builder) (string, string) {
		return b.Param("x", f32(s(4), 1, 2, 3, 4)), b.Buffer("buf", f32(s(4), 1, 1, 1, 1))
	}
	cases := []struct {
		name string
		g    func(b *graph.Builder)
		loss string
		wrt  []string
		want string
	}{
		{"loss not scalar", func(b *graph.Builder) { x, _ := vec(b); b.Output("loss", b.Mul(x, x), tensor.Float32) }, "loss", nil, "want a float32 scalar"},
		{"loss missing", func(b *graph.Builder) { x, _ := vec(b); b.Output("loss", sumAll(b, x), tensor.Float32) }, "nope", nil, `"nope" is not a value`},
		{"wrt buffer", func(b *graph.Builder) { x, buf := vec(b); b.Output("loss", sumAll(b, b.Mul(x, buf)), tensor.Float32) }, "loss", []string{"buf"}, "is a buffer"},
		{"wrt unknown", func(b *graph.Builder) { x, _ := vec(b); b.Output("loss", sumAll(b, x), tensor.Float32) }, "loss", []string{"y"}, `"y" is not an initializer`},
		{"rule refuses", func(b *graph.Builder) {
			x, _ := vec(b)
			y := b.Op("Slice", []string{x, b.ConstInts(0), b.ConstInts(4), b.ConstInts(0), b.ConstInts(2)}, nil)
			b.Output("loss", sumAll(b, y), tensor.Float32)
		}, "loss", nil, "only constant steps of 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := autodiff.Gradients(context.Background(), build(t, c.g), c.loss, c.wrt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		g := build(t, func(b *graph.Builder) { x, _ := vec(b); b.Output("loss", sumAll(b, b.Mul(x, x)), tensor.Float32) })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := autodiff.Gradients(ctx, g, "loss", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	})
	t.Run("nil graph", func(t *testing.T) {
		if _, _, err := autodiff.Gradients(context.Background(), nil, "loss", nil); err == nil {
			t.Fatal("no error")
		}
	})
}

// CrossEntropy's value against the formula computed here in float64: PyTorch's
// label-smoothed cross-entropy, mean over counted positions.
func TestCrossEntropyValue(t *testing.T) {
	logits := []float64{1, 2, 0.5, -1, 3, 0, 0, 0, 100, -100, 0, 1}
	targets := []int64{1, 0, -7, 2}
	counted := []bool{true, true, false, true}
	const eps = 0.2
	want, n := 0.0, 0
	for p := 0; p < 4; p++ {
		if !counted[p] {
			continue
		}
		row := logits[3*p : 3*p+3]
		m := math.Max(row[0], math.Max(row[1], row[2]))
		lse := m + math.Log(math.Exp(row[0]-m)+math.Exp(row[1]-m)+math.Exp(row[2]-m))
		smooth := 0.0
		for _, v := range row {
			smooth += (lse - v) / 3
		}
		want += (1-eps)*(lse-row[targets[p]]) + eps*smooth
		n++
	}
	want /= float64(n)
	b := graph.NewBuilder("xent")
	l := b.Input("logits", tensor.Float32, graph.Fixed(2), graph.Fixed(2), graph.Fixed(3))
	tg := b.Input("targets", tensor.Int64, graph.Fixed(2), graph.Fixed(2))
	c := b.Input("counted", tensor.Bool, graph.Fixed(2), graph.Fixed(2))
	b.Output("loss", autodiff.CrossEntropy(b, l, tg, c, eps), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	lt, _ := tensor.New(tensor.Float32, 2, 2, 3)
	for i, v := range logits {
		lt.F32[i] = float32(v)
	}
	out, err := g.Eval(context.Background(), map[string]*tensor.Tensor{"logits": lt, "targets": i64(s(2, 2), targets...), "counted": bools(s(2, 2), counted...)})
	if err != nil {
		t.Fatal(err)
	}
	if got := float64(out["loss"].F32[0]); math.Abs(got-want) > 1e-6*want {
		t.Fatalf("loss %v, want %v", got, want)
	}
}

func TestWithCrossEntropy(t *testing.T) {
	b := graph.NewBuilder("model")
	x := b.Input("tokens", tensor.Int64, graph.Sym("batch"), graph.Sym("seq"))
	emb := b.Param("emb", rnd(300, -1, 1, 5, 4))
	b.Output("logits", b.Gather(emb, x, 0), tensor.Float32, graph.Sym("batch"), graph.Sym("seq"), graph.Fixed(4))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{IgnoreIndex: 0, LabelSmoothing: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"tokens": i64(s(2, 3), 1, 2, 4, 3, 0, 0), autodiff.InputTargets: i64(s(2, 3), 2, 0, 1, 3, 0, 0)}
	checkFD(t, lg, in)
	for _, c := range []struct {
		o    autodiff.LossOptions
		want string
	}{
		{autodiff.LossOptions{Logits: "hidden"}, `no output "hidden"`},
		{autodiff.LossOptions{LabelSmoothing: 1.5}, "label smoothing"},
	} {
		if _, err := autodiff.WithCrossEntropy(g, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c.o, err, c.want)
		}
	}
	if _, err := autodiff.WithCrossEntropy(lg, autodiff.LossOptions{}); err == nil || !strings.Contains(err.Error(), "already has an input") {
		t.Errorf("twice: error %v", err)
	}
}

// A training graph with its parameters lifted to inputs computes the same loss and gradients
// from fed weights.
func TestLiftParams(t *testing.T) {
	b := graph.NewBuilder("lift")
	x := b.Param("x", f32(s(3), 1, 2, -3))
	w := b.Param("w", f32(s(3), 0.5, 1, 2))
	b.Output("loss", sumAll(b, b.Mul(b.Mul(x, w), x)), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	gg, names, err := autodiff.Gradients(context.Background(), g, "loss", nil)
	if err != nil {
		t.Fatal(err)
	}
	lifted, err := autodiff.LiftParams(gg, autodiff.Params(g))
	if err != nil {
		t.Fatal(err)
	}
	if lifted.Initializer("x") != nil || gg.Initializer("x") == nil {
		t.Fatal("x is still an initializer of the lifted graph, or was taken from the original")
	}
	out, err := lifted.Eval(context.Background(), map[string]*tensor.Tensor{"x": f32(s(3), 2, 0, 1), "w": f32(s(3), 1, 1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	wantF32(t, "loss", out["loss"], 5)
	wantF32(t, "d/dx", out[names["x"]], 4, 0, 2)
	wantF32(t, "d/dw", out[names["w"]], 4, 0, 1)
	for _, bad := range [][]string{{"nope"}, {"x", "x"}} {
		if _, err := autodiff.LiftParams(gg, bad); err == nil {
			t.Errorf("LiftParams(%q): no error", bad)
		}
	}
}

// A position that does not count cannot bring a NaN into the loss or the gradient (padded
// positions' logits are unspecified).
func TestCrossEntropyIgnoresNaNAtUncounted(t *testing.T) {
	logits := rnd(400, -2, 2, 1, 3, 4)
	for k := 4; k < 8; k++ {
		logits.F32[k] = float32(math.NaN())
	}
	b := graph.NewBuilder("nan")
	l := b.Param("logits", logits)
	tg := b.Input("targets", tensor.Int64, graph.Fixed(1), graph.Fixed(3))
	counted := b.Op("Not", []string{b.Op("Equal", []string{tg, b.Const(tensor.Scalar64(0))}, nil)}, nil)
	b.Output("loss", autodiff.CrossEntropy(b, l, tg, counted, 0.1), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	grads := evalGrads(t, g, nil, map[string]*tensor.Tensor{"targets": i64(s(1, 3), 2, 0, 3)})
	for k, v := range grads["logits"].F32 {
		if math.IsNaN(float64(v)) || (k >= 4 && k < 8 && v != 0) {
			t.Fatalf("gradient %v: NaN, or nonzero at the uncounted position", grads["logits"].F32)
		}
	}
}
