package graph_test

import (
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
