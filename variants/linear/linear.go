// Package linear is linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"):
// softmax(q·k) is replaced by the kernel φ(q)·φ(k) with φ(x) = elu(x) + 1, so that attention
// is computed right to left in O(n): out_i = φ(Q_i)ᵀ(Σ_j φ(K_j)V_jᵀ) / (φ(Q_i)ᵀΣ_j φ(K_j) + ε).
// It follows idiap/fast-transformers' LinearAttention (fast_transformers/attention/
// linear_attention.py): no 1/√d_k scaling, ε = 1e-6 added to the normaliser, whose reciprocal
// multiplies the numerator; padded keys are excluded by zeroing their φ(K) rows (zoo also
// zeroes their V rows, which changes nothing). No n×n matrix is ever formed. The encoder
// around it is the seed's.
package linear

import (
	"context"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph or initialisation changes.
// 1.1.0: causal (prefix sums by CumSum) and dropout (training builds only).
const Version = "1.1.0"

// Variant is the linear-attention encoder.
type Variant struct{}

// New returns the linear variant.
func New() Variant { return Variant{} }

// Describe returns the schema: the shared encoder parameters plus attn_bias and attn_eps.
func (Variant) Describe() variant.Description {
	params := append(nn.EncoderParams(), nn.AttnBiasParam(), nn.CausalParam(),
		variant.Param{Name: "attn_eps", Kind: variant.KindFloat, Default: 1e-6, Min: variant.MinOf(0),
			Doc: "ε added to the normaliser φ(Q_i)·Σ_j φ(K_j) (fast-transformers' LinearAttention eps); the feature map is elu(x)+1 and the scores are not scaled by 1/√d_k"},
	)
	return variant.Description{
		Name:       "linear",
		Version:    Version,
		Summary:    "linear attention: feature map elu(x)+1, φ(Q)(φ(K)ᵀV) normalised, O(n) time and memory",
		Paper:      "https://arxiv.org/abs/2006.16236",
		Complexity: "O(n)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("linear: %w", err)
	}
	c := nn.NewCtx(ctx, "linear", seed)
	c.SetBuildMeta("linear", Version, cfg)
	g, err := c.Encoder(e, Attention(e.DModel, cfg.Int("heads"), cfg.Bool("attn_bias"), cfg.Float("attn_eps")))
	if err != nil {
		return nil, fmt.Errorf("linear: %w", err)
	}
	return g, nil
}

// KeepColumn returns the key-padding mask as a float (B, 1, n, 1) column: 1 at real tokens,
// 0 at padding, for multiplying (B, h, n, ·) rows.
func KeepColumn(c *nn.Ctx, m nn.Mask) string {
	keep := c.B.Where(m.Pad, c.B.ConstFloat(0), c.B.ConstFloat(1))
	return c.B.Unsqueeze(keep, 1, 3)
}

// Attention is the linear-attention block: W_Q, W_K, W_V, W_O (d → d), heads of width d_k;
// φ = elu + 1 on Q and K; KV = φ(K)ᵀV (d_k × d_k per head), Z = 1/(φ(Q)·Σ_j φ(K_j) + eps),
// out = (φ(Q)·KV)·Z. With causal=true the sums run over j ≤ i only (causal).
func Attention(d, heads int, bias bool, eps float64) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		dk := d / heads
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, bias), heads, dk)
		k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, bias), heads, dk)
		v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, bias), heads, dk)
		o := func() string {
			defer c.B.Scope(prefix)()
			b := c.B
			phi := func(t string) string {
				return b.Add(b.Op("Elu", []string{t}, graph.Attrs{"alpha": graph.Float(1)}), b.ConstFloat(1))
			}
			keep := KeepColumn(c, m)
			fq := phi(q)
			fk := b.Mul(phi(k), keep) // padded keys contribute nothing
			vm := b.Mul(v, keep)
			if m.Causal {
				return c.MergeHeads(causal(c, fq, fk, vm, eps), d)
			}
			kv := b.MatMul(b.Transpose(fk, 0, 1, 3, 2), vm)                                                // (B, h, dk, dk)
			ksum := b.Op("ReduceSum", []string{fk, b.ConstInts(2)}, graph.Attrs{"keepdims": graph.Int(1)}) // (B, h, 1, dk)
			den := b.MatMul(fq, b.Transpose(ksum, 0, 1, 3, 2))                                             // (B, h, n, 1)
			z := b.Div(b.ConstFloat(1), b.Add(den, b.ConstFloat(float32(eps))))
			return c.MergeHeads(b.Mul(b.MatMul(fq, kv), z), d)
		}()
		return c.Linear(prefix+".W_O", o, d, d, bias)
	}
}

// causal is causal linear attention (fast-transformers' CausalLinearAttention) for fq, fk, v
// (B, h, n, dk), padded keys already zeroed: out_i = φ(q_i)·S_i / (φ(q_i)·z_i + eps) with the
// prefix sums S_i = Σ_{j≤i} φ(k_j)v_jᵀ and z_i = Σ_{j≤i} φ(k_j), by CumSum over the sequence.
// S holds a d_k × d_k matrix per position: O(n·d_k²) memory, O(n) in the sequence.
func causal(c *nn.Ctx, fq, fk, v string, eps float64) string {
	b := c.B
	seq := b.Const(tensor.Scalar64(2))
	outer := b.Mul(b.Unsqueeze(fk, 4), b.Unsqueeze(v, 3))                                  // (B, h, n, dk, dk): φ(k_j)v_jᵀ
	s := b.Op("CumSum", []string{outer, seq}, nil)                                         // S_i
	num := b.Op("Squeeze", []string{b.MatMul(b.Unsqueeze(fq, 3), s), b.ConstInts(3)}, nil) // (B, h, n, dk)
	z := b.Op("CumSum", []string{fk, seq}, nil)                                            // z_i (B, h, n, dk)
	den := b.Op("ReduceSum", []string{b.Mul(fq, z), b.ConstInts(-1)}, graph.Attrs{"keepdims": graph.Int(1)})
	return b.Mul(num, b.Div(b.ConstFloat(1), b.Add(den, b.ConstFloat(float32(eps)))))
}
