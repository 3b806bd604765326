package graph_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// tinyVanilla builds, with the Builder alone, the seed's post-LN encoder at d_model 64, 4
// heads, 2 layers, d_ff 128, a 257-token vocabulary and max_len 128: token embedding plus a
// sliced positional table, a key-padding bias, per layer Q/K/V/O projections with biases,
// scaled scores, softmax, residual adds with LayerNorm and a ReLU FFN, and an output
// projection. The graph tests use it instead of a variant, so that they depend on nothing
// above package graph; its structure is what vanillaFLOPs counts.
func tinyVanilla(t *testing.T) *graph.Graph {
	t.Helper()
	const d, h, dff, vocab, layers, maxLen = 64, 4, 128, 257, 2, 128
	const dk = d / h
	b := graph.NewBuilder("vanilla")
	tokens := b.Input("tokens", tensor.Int64, batch, seq)
	mask := b.Input("key_padding_mask", tensor.Bool, batch, seq)
	param := func(name string, shape ...int) string {
		n := 1
		for _, s := range shape {
			n *= s
		}
		return b.Param(name, mustF(make([]float32, n), shape...))
	}
	linear := func(x, name string, in, out int) string {
		return b.Add(b.MatMul(x, param(name+".weight", in, out)), param(name+".bias", out))
	}
	x := b.Gather(param("embedding.weight", vocab, d), tokens, 0)
	pe := b.Buffer("pos_encoding.pe", mustF(make([]float32, maxLen*d), maxLen, d))
	x = b.Add(x, b.Slice(pe, b.ConstInts(0), seqLen(b, tokens), b.ConstInts(0)))
	bias := b.Where(mask, b.ConstFloat(float32(math.Inf(-1))), b.ConstFloat(0))
	bias = b.Unsqueeze(bias, 1, 2) // (batch, 1, 1, seq)
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("layers.%d.", l)
		heads := func(y string) string { return b.Transpose(b.Reshape(y, 0, 0, h, dk), 0, 2, 1, 3) }
		q := heads(linear(x, p+"self_attn.q_proj", d, d))
		k := heads(linear(x, p+"self_attn.k_proj", d, d))
		v := heads(linear(x, p+"self_attn.v_proj", d, d))
		s := b.Div(b.MatMul(q, b.Transpose(k, 0, 1, 3, 2)), b.ConstFloat(float32(math.Sqrt(dk))))
		a := b.MatMul(b.Softmax(b.Add(s, bias), -1), v)
		a = b.Reshape(b.Transpose(a, 0, 2, 1, 3), 0, 0, d)
		x = b.LayerNorm(b.Add(x, linear(a, p+"self_attn.out_proj", d, d)), param(p+"norm1.weight", d), param(p+"norm1.bias", d), 1e-5)
		f := linear(b.Relu(linear(x, p+"linear1", d, dff)), p+"linear2", dff, d)
		x = b.LayerNorm(b.Add(x, f), param(p+"norm2.weight", d), param(p+"norm2.bias", d), 1e-5)
	}
	b.Output("hidden", x, tensor.Float32, batch, seq, fx(d))
	b.Output("logits", linear(x, "fc", d, vocab), tensor.Float32, batch, seq, fx(vocab))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The reference evaluator runs the whole encoder; every value has the shape ConcreteShapes
// gives, padded keys get no attention, and a cancelled context stops it.
func TestEvalTinyVanilla(t *testing.T) {
	g := tinyVanilla(t)
	// Give the weights values so that the check below is not about zeros.
	for i, in := range g.Initializers {
		if graph.IsConstName(in.Name) || in.Tensor.DType != tensor.Float32 {
			continue
		}
		for j := range in.Tensor.F32 {
			in.Tensor.F32[j] = float32(math.Sin(float64(i*131+j))) * 0.5
		}
	}
	tokens := mustI([]int64{1, 5, 9, 200, 256, 3, 3, 7, 0, 1}, 2, 5)
	mask, _ := tensor.FromBool([]bool{false, false, false, false, true, false, false, true, true, true}, 2, 5)
	in := map[string]*tensor.Tensor{"tokens": tokens, "key_padding_mask": mask}
	out, err := g.Eval(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := g.ConcreteShapes(map[string][]int{"tokens": {2, 5}, "key_padding_mask": {2, 5}})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range out {
		if !tensor.SameShape(v.Shape, shapes[name]) {
			t.Errorf("%s: %s, ConcreteShapes says %v", name, tensor.ShapeString(v.Shape), shapes[name])
		}
		for _, f := range v.F32 {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				t.Fatalf("%s holds %v", name, f)
			}
		}
	}
	// A padded key does not influence the unpadded positions: changing its token leaves them.
	tokens2 := tokens.Clone()
	tokens2.I64[4] = 42 // batch 0, position 4 is padded
	out2, err := g.Eval(context.Background(), map[string]*tensor.Tensor{"tokens": tokens2, "key_padding_mask": mask})
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := out["hidden"], out2["hidden"]
	for j := 0; j < 4*64; j++ { // positions 0..3 of batch 0
		if math.Abs(float64(h1.F32[j]-h2.F32[j])) > 1e-6 {
			t.Fatalf("hidden[%d] changed from %v to %v when a padded token changed", j, h1.F32[j], h2.F32[j])
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Eval(ctx, in); err == nil {
		t.Error("cancelled context: no error")
	}
	if _, err := g.Eval(context.Background(), map[string]*tensor.Tensor{"tokens": tokens}); err == nil {
		t.Error("missing input: no error")
	}
	if _, err := g.Eval(context.Background(), map[string]*tensor.Tensor{"tokens": tokens, "key_padding_mask": tokens}); err == nil {
		t.Error("mask of the wrong dtype: no error")
	}
}
