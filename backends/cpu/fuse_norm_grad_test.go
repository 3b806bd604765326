package cpu_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// autodiff's LayerNorm backward fuses into one step (dx, dγ and dβ), which agrees with the
// unfused program and the reference evaluator on awkward shapes (one feature, one row, row
// counts that are no multiple of the fused kernel's block) and gives the same bits for
// any thread count.
func TestFusedLayerNormGrad(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, shape := range [][]int{{1, 1}, {3, 1}, {2, 5}, {2, 3, 7}, {4, 33, 16}, {70, 3}} {
		name := fmt.Sprint(shape)
		d := shape[len(shape)-1]
		b := graph.NewBuilder("lng")
		x := b.Param("x", randT(r, shape...))
		gamma, beta := b.Param("gamma", randT(r, d)), b.Param("beta", randT(r, d))
		y := b.Op("LayerNormalization", []string{x, gamma, beta}, graph.Attrs{"axis": graph.Int(-1), "epsilon": graph.Float(1e-5)})
		b.Output("loss", b.Op("ReduceSum", []string{b.Mul(y, b.Buffer("r", randT(r, shape...)))}, graph.Attrs{"keepdims": graph.Int(0)}), tensor.Float32)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		params := []string{"x", "gamma", "beta"}
		gg, _, err := autodiff.Gradients(context.Background(), g, "loss", params)
		if err != nil {
			t.Fatal(err)
		}
		lifted, err := autodiff.LiftParams(gg, params)
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, lifted, backends.Options{Threads: 2})
		if n := fused.Fusions()["layernorm-backward"]; n != 1 {
			t.Fatalf("%s: fusions %v, want one layernorm-backward", name, fused.Fusions())
		}
		in := map[string]*tensor.Tensor{}
		for _, p := range params {
			in[p] = g.Initializer(p)
		}
		got := runAgree(t, fused, plain, in, 1e-5)
		ref, err := lifted.Eval(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range params {
			o := autodiff.GradName(p)
			if d, ok := maxDiff(got[o], ref[o]); !ok || d > 1e-5 {
				t.Errorf("%s: %s differs from the reference evaluator's by %g", name, o, d)
			}
		}
		p1, err := cpu.Backend{}.Compile(lifted, backends.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		p3, err := cpu.Backend{}.Compile(lifted, backends.Options{Threads: 3})
		if err != nil {
			t.Fatal(err)
		}
		runBitwise(t, name+" threads 1 vs 3", p1.(*cpu.Program), p3.(*cpu.Program), in)
	}
}
