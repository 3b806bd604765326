package autodiff_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestLayerSegment(t *testing.T) {
	for _, c := range []struct{ node, want string }{
		{"layers.3.ffn/Add", "layers.3"},
		{"layers.12/MatMul_2", "layers.12"},
		{"layers.0.self_attn.W_Q/MatMul", "layers.0"},
		{"embedding/Gather", ""},
		{"fc/MatMul", ""},
		{"layers./Add", ""},
		{"grad/layers.0/Mul", ""},
	} {
		if got := autodiff.LayerSegment(c.node); got != c.want {
			t.Errorf("LayerSegment(%q) = %q, want %q", c.node, got, c.want)
		}
	}
}

// stack is a residual stack of layers (Relu(h·W + b) + h, then LayerNorm and a Softmax-weighted
// mix) under the layers.N scopes, with a loss over the last one.
func stack(t *testing.T, layers, n, d int) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("stack")
	x := b.Input("x", tensor.Float32, graph.Fixed(int64(n)), graph.Fixed(int64(d)))
	seed := float32(0.37)
	next := func() float32 { seed = float32(math.Mod(float64(seed)*997+0.123, 1)); return seed - 0.5 }
	vals := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = next()
		}
		return v
	}
	h := x
	for l := 0; l < layers; l++ {
		pop := b.Scope("layers." + string(rune('0'+l)))
		w := b.Param(b.Prefix()+".w", f32(s(d, d), vals(d*d)...))
		bias := b.Param(b.Prefix()+".b", f32(s(d), vals(d)...))
		scale := b.Param(b.Prefix()+".g", f32(s(d), vals(d)...))
		u := b.Add(b.Relu(b.Add(b.MatMul(h, w), bias)), h)
		ln := b.LayerNorm(u, scale, bias, 1e-5)
		att := b.Softmax(b.MatMul(ln, b.Transpose(ln, 1, 0)), -1)
		h = b.Add(b.MatMul(att, ln), u)
		pop()
	}
	b.Output("loss", sumAll(b, b.Mul(h, h)), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Checkpoint changes where the backward pass reads its activations from, not what it computes:
// the same loss and gradients bit for bit, copies named as such, and a lower peak of live
// activation bytes (graph.Cost's walk, the estimate zoo's memory guard uses).
func TestCheckpointSameGradientsLessMemory(t *testing.T) {
	const layers, n, d = 4, 16, 8
	g := stack(t, layers, n, d)
	gg, names, err := autodiff.Gradients(context.Background(), g, "loss", nil)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := autodiff.Checkpoint(gg, len(g.Nodes), autodiff.LayerSegment)
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, nd := range cg.Nodes {
		if strings.HasPrefix(nd.Name, autodiff.RecomputePrefix) {
			copies++
		}
	}
	if copies == 0 || len(cg.Nodes) != len(gg.Nodes)+copies {
		t.Fatalf("%d recomputed nodes, %d nodes against %d", copies, len(cg.Nodes), len(gg.Nodes))
	}
	xv := make([]float32, n*d)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i)))
	}
	x := f32(s(n, d), xv...)
	in := map[string]*tensor.Tensor{"x": x}
	want, err := gg.Eval(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cg.Eval(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range append([]string{"loss"}, valuesOf(names)...) {
		a, b := want[o], got[o]
		if a == nil || b == nil || len(a.F32) != len(b.F32) {
			t.Fatalf("%s: %v against %v", o, a, b)
		}
		for i := range a.F32 {
			if math.Float32bits(a.F32[i]) != math.Float32bits(b.F32[i]) {
				t.Fatalf("%s[%d]: %v checkpointed, %v plain", o, i, b.F32[i], a.F32[i])
			}
		}
	}
	shapes := map[string][]int{"x": {n, d}}
	plain, err := gg.Cost(shapes)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := cg.Cost(shapes)
	if err != nil {
		t.Fatal(err)
	}
	if ck.ActivationBytes >= plain.ActivationBytes {
		t.Errorf("peak activations %d bytes checkpointed, %d plain: want fewer", ck.ActivationBytes, plain.ActivationBytes)
	}
	t.Logf("peak activations: %d bytes plain, %d checkpointed (%d copies of forward nodes)", plain.ActivationBytes, ck.ActivationBytes, copies)

	if same, err := autodiff.Checkpoint(gg, len(g.Nodes), func(string) string { return "" }); err != nil || same != gg {
		t.Errorf("no segments: got a new graph (%v), want the same one", err)
	}
	if _, err := autodiff.Checkpoint(gg, len(gg.Nodes)+1, autodiff.LayerSegment); err == nil {
		t.Error("forward beyond the graph: no error")
	}
}

func valuesOf(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
