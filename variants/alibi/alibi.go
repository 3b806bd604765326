// Package alibi is attention with linear biases (Press et al. 2021, "Train Short, Test Long"):
// no positional embedding; every head h adds -m_h·|i-j| to its scores, with the paper's
// geometric head slopes m_h. The paper's form is causal (-m_h·(i-j) for j ≤ i); an encoder
// attends both ways, and zoo uses the symmetric distance |i-j| as MosaicBERT
// (BertEncoder.rebuild_alibi_tensor) and x-transformers' AlibiPositionalBias do. The causal
// form with the mask removed is not equivalent: softmax's shift invariance that makes m·j and
// -m·(i-j) agree needs every key j ≤ i. The encoder around it is the seed's.
package alibi

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph or initialisation changes.
// 1.1.0: causal (each position attends to itself and earlier ones) and dropout (training builds only).
const Version = "1.1.0"

// Variant is the ALiBi encoder.
type Variant struct{}

// New returns the alibi variant.
func New() Variant { return Variant{} }

// Describe returns the schema: the shared encoder parameters without max_len (ALiBi has no
// positional table and no length limit) plus the shared attention parameters (attn_bias and
// scale; the ALiBi bias is added after scaling).
func (Variant) Describe() variant.Description {
	params := slices.DeleteFunc(nn.EncoderParams(), func(p variant.Param) bool { return p.Name == "max_len" })
	params = append(append(params, nn.AttentionParams()...), nn.CausalParam())
	return variant.Description{
		Name:       "alibi",
		Version:    Version,
		Summary:    "ALiBi: no positional embedding, per-head linear distance penalty -m_h·|i-j| on the scores (symmetric encoder form)",
		Paper:      "https://arxiv.org/abs/2108.12409",
		Complexity: "O(n²)",
		Params:     params,
		Caps:       variant.Capabilities{KeyPadding: true},
	}
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg) // no max_len in the schema: no positional table
	if err != nil {
		return nil, fmt.Errorf("alibi: %w", err)
	}
	c := nn.NewCtx(ctx, "alibi", seed)
	c.SetBuildMeta("alibi", Version, cfg)
	g, err := c.Encoder(e, Attention(e.DModel, cfg.Int("heads"), nn.AttentionOptionsFrom(cfg)))
	if err != nil {
		return nil, fmt.Errorf("alibi: %w", err)
	}
	return g, nil
}

// Slopes returns the paper's head slopes (ofirpress/attention_with_linear_biases get_slopes):
// for h a power of two, start = 2^(-8/h) and m_k = start^k for k = 1..h (h = 8: 1/2, 1/4, …,
// 1/256); otherwise the slopes of the largest power of two c below h followed by every other
// slope of 2c, the first h-c of them (h = 12: 1/2 … 1/256, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5).
// Values are computed in float64 as the reference computes them (start·ratio^i).
func Slopes(h int) []float64 {
	pow2 := func(n int) []float64 {
		start := math.Pow(2, -math.Pow(2, -(math.Log2(float64(n))-3)))
		out := make([]float64, n)
		for i := range out {
			out[i] = start * math.Pow(start, float64(i))
		}
		return out
	}
	if h < 1 {
		return nil
	}
	if h&(h-1) == 0 {
		return pow2(h)
	}
	c := 1
	for c*2 < h {
		c *= 2
	}
	out := pow2(c)
	next := Slopes(2 * c)
	for i := 0; i < h-c; i++ {
		out = append(out, next[2*i])
	}
	return out
}

// Bias builds the (h, n, n) ALiBi bias -m_h·|i-j| for the sequence length of tokens (B, n):
// Range → |j-i| → Cast → Mul by the negated slopes, a constant of shape (h, 1, 1).
func Bias(c *nn.Ctx, tokens string, heads int) string {
	defer c.B.Scope("alibi")()
	b := c.B
	n := b.Op("Squeeze", []string{c.SeqLen(tokens), b.ConstInts(0)}, nil)
	pos := b.Op("Range", []string{b.Const(tensor.Scalar64(0)), n, b.Const(tensor.Scalar64(1))}, nil)
	dist := b.Op("Abs", []string{b.Sub(b.Unsqueeze(pos, 0), b.Unsqueeze(pos, 1))}, nil) // (n, n): |j-i|
	distF := b.Op("Cast", []string{dist}, graph.Attrs{"to": graph.Int(1)})              // FLOAT
	slopes := Slopes(heads)
	neg := make([]float32, heads)
	for i, s := range slopes {
		neg[i] = float32(-s)
	}
	st, _ := tensor.FromFloat32(neg, heads, 1, 1)
	return b.Mul(distF, b.Const(st))
}

// Attention is multi-head attention (W_Q, W_K, W_V, W_O: d → d) whose scores get the ALiBi
// bias and the key-padding mask: softmax(Q·Kᵀ/√d_k - m_h·|i-j| + mask)·V. The (h, n, n) bias
// is built once per graph and shared by every layer, so each graph needs its own
// AttentionFunc (Build makes one per call). o.Scale is nn.ScaleParam's score scale.
func Attention(d, heads int, o nn.AttentionOptions) nn.AttentionFunc {
	alibi := ""
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		if alibi == "" {
			alibi = Bias(c, nn.InputTokens, heads)
		}
		dk := d / heads
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, o.Bias), heads, dk)
		k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, o.Bias), heads, dk)
		v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, o.Bias), heads, dk)
		out := func() string {
			defer c.B.Scope(prefix)()
			b := c.B
			scores := c.ScaleScores(b.MatMul(q, b.Transpose(k, 0, 1, 3, 2)), dk, o.Scale)
			scores = b.Add(b.Add(scores, alibi), m.Bias)
			return c.MergeHeads(b.MatMul(b.Softmax(scores, -1), v), d)
		}()
		return c.Linear(prefix+".W_O", out, d, d, o.Bias)
	}
}
