package cpu_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// A linear layer with run-time weights, x·Transpose(W) [+ b [→ Relu]], fuses into one step
// and agrees with the unfused program and with the reference evaluator, on awkward shapes
// (one row, one input or output feature, widths that are no multiple of a micro-tile, 3-D
// inputs); an "Add" of a full-size value instead of a bias vector declines at run time (the
// fused step runs the unfused ones), and a transpose read twice does not fuse.
func TestFusedRuntimeLinear(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct {
		x       []int
		n       int
		tail    string // "", "bias", "relu", "residual"
		twice   bool
		fusions string
	}{
		{[]int{1, 4}, 3, "", false, "runtime-linear"},
		{[]int{5, 1}, 1, "bias", false, "runtime-linear+bias"},
		{[]int{7, 9}, 65, "relu", false, "runtime-linear+bias+relu"},
		{[]int{2, 3, 17}, 40, "relu", false, "runtime-linear+bias+relu"},
		{[]int{2, 50, 64}, 130, "bias", false, "runtime-linear+bias"},
		{[]int{3, 5, 8}, 6, "residual", false, "runtime-linear+bias"},
		{[]int{4, 8}, 5, "relu", true, ""},
	} {
		name := fmt.Sprintf("%v×%d/%s/twice=%v", c.x, c.n, c.tail, c.twice)
		k := c.x[len(c.x)-1]
		b := graph.NewBuilder("rtl")
		dims := make([]graph.Dim, len(c.x))
		for i, d := range c.x {
			dims[i] = graph.Fixed(int64(d))
		}
		x := b.Input("x", tensor.Float32, dims...)
		w := b.Input("w", tensor.Float32, graph.Fixed(int64(c.n)), graph.Fixed(int64(k)))
		wt := b.Transpose(w, 1, 0)
		y := b.MatMul(x, wt)
		in := map[string]*tensor.Tensor{"x": randT(r, c.x...), "w": randT(r, c.n, k)}
		outShape := append(append([]int{}, c.x[:len(c.x)-1]...), c.n)
		switch c.tail {
		case "bias", "relu":
			y = b.Add(y, b.Input("b", tensor.Float32, graph.Fixed(int64(c.n))))
			in["b"] = randT(r, c.n)
			if c.tail == "relu" {
				y = b.Op("Relu", []string{y}, nil)
			}
		case "residual":
			odims := append(append([]graph.Dim{}, dims[:len(dims)-1]...), graph.Fixed(int64(c.n)))
			y = b.Add(b.Input("res", tensor.Float32, odims...), y)
			in["res"] = randT(r, outShape...)
		}
		b.Output("y", y, tensor.Float32)
		if c.twice {
			b.Output("wt", wt, tensor.Float32)
		}
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
		got := fused.Fusions()
		if c.fusions == "" && len(got) != 0 || c.fusions != "" && (len(got) != 1 || got[c.fusions] != 1) {
			t.Errorf("%s: fusions %v, want %q once", name, got, c.fusions)
		}
		out := runAgree(t, fused, plain, in, 1e-5)
		ref, err := g.Eval(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := maxDiff(out["y"], ref["y"]); !ok || d > 1e-5 {
			t.Errorf("%s: fused and the reference evaluator differ by %g", name, d)
		}
	}
}

// A Gemm of two run-time matrices (a training step's input gradient dY·W) runs with its
// right operand packed once, and agrees with the unfused program and the reference
// evaluator for either orientation of B and awkward shapes; transA, alpha or a C keep the
// plain Gemm.
func TestFusedRuntimeGemm(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, c := range []struct {
		m, k, n int
		attrs   graph.Attrs
		matches int
	}{
		{1, 1, 1, nil, 1}, {7, 9, 65, nil, 1}, {130, 64, 40, graph.Attrs{"transB": graph.Int(1)}, 1}, {50, 3, 200, nil, 1},
		{6, 5, 4, graph.Attrs{"transA": graph.Int(1)}, 0}, {6, 5, 4, graph.Attrs{"alpha": graph.Float(2)}, 0},
	} {
		name := fmt.Sprintf("%d×%d×%d/%v", c.m, c.k, c.n, c.attrs)
		b := graph.NewBuilder("rtg")
		as, bs := []int{c.m, c.k}, []int{c.k, c.n}
		if c.attrs["transA"].I != 0 {
			as = []int{c.k, c.m}
		}
		if c.attrs["transB"].I != 0 {
			bs = []int{c.n, c.k}
		}
		x := b.Input("a", tensor.Float32, graph.Fixed(int64(as[0])), graph.Fixed(int64(as[1])))
		w := b.Input("b", tensor.Float32, graph.Fixed(int64(bs[0])), graph.Fixed(int64(bs[1])))
		b.Output("y", b.Op("Gemm", []string{x, w}, c.attrs), tensor.Float32)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
		if got := fused.Fusions()["runtime-gemm"]; got != c.matches {
			t.Errorf("%s: %d runtime-gemm fusions, want %d", name, got, c.matches)
		}
		in := map[string]*tensor.Tensor{"a": randT(r, as...), "b": randT(r, bs...)}
		out := runAgree(t, fused, plain, in, 1e-5)
		ref, err := g.Eval(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := maxDiff(out["y"], ref["y"]); !ok || d > 1e-4 {
			t.Errorf("%s: fused and the reference evaluator differ by %g", name, d)
		}
	}
}

// In a training step (parameters lifted to inputs), every linear layer of the tiny
// vanilla encoder fuses, the feed-forward input ones with their Relu, so does every
// LayerNorm's and Relu's backward and every linear layer's input gradient, and the fused step's loss and gradients agree with the unfused
// program's.
func TestFusedRuntimeLinearInTraining(t *testing.T) {
	v := vanilla.New()
	cfg, err := variant.Resolve(v.Describe(), map[string]any{"d_model": 32, "heads": 4, "layers": 2, "d_ff": 64})
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	params := autodiff.Params(g)
	train, _, err := autodiff.Gradients(context.Background(), lg, autodiff.OutputLoss, params)
	if err != nil {
		t.Fatal(err)
	}
	lifted, err := autodiff.LiftParams(train, params)
	if err != nil {
		t.Fatal(err)
	}
	fused, plain := compileBoth(t, lifted, backends.Options{Threads: 2})
	fu := fused.Fusions()
	// Per layer: Q, K, V, O and the second feed-forward product with a bias, the first with
	// bias and Relu; then the output projection.
	if fu["runtime-linear+bias+relu"] != 2 || fu["runtime-linear+bias"] != 2*5+1 || fu["layernorm-backward"] != 2*2 || fu["relu-backward"] != 2 || fu["runtime-gemm"] != 13 {
		t.Errorf("fusions %v, want 2 runtime-linear+bias+relu, 11 runtime-linear+bias, 13 runtime-gemm, 4 layernorm-backward and 2 relu-backward", fu)
	}
	r := rand.New(rand.NewSource(9))
	for _, n := range []int{1, 7, 33} {
		in := encoderInputs(2, n)
		targets, _ := tensor.New(tensor.Int64, 2, n)
		for i := range targets.I64 {
			in["tokens"].I64[i] = 1 + r.Int63n(256)
			targets.I64[i] = r.Int63n(257)
		}
		for j := n / 2; j < n; j++ {
			in["key_padding_mask"].Bool[n+j] = j > 0
		}
		in[autodiff.InputTargets] = targets
		for _, p := range params {
			in[p] = g.Initializer(p)
		}
		runAgree(t, fused, plain, in, 1e-5)
	}
}
