// Package rope is the encoder with rotary position embedding (Su et al. 2021, RoFormer,
// arXiv 2104.09864): queries and keys of every head are rotated by their position before
// Q·Kᵀ, so that the scores depend on relative positions only; values are not rotated and there
// is no additive positional encoding.
//
// With d_rot rotated dimensions (rope_dim, default the whole head width d_k), frequencies
// θ_i = base^(−2i/d_rot) for i = 0 … d_rot/2−1 (base 10000) and angles φ(p, i) = p·θ_i at
// position p = 0 … n−1 (padding does not shift positions):
//
//   - rotate-half layout ("half", GPT-NeoX / HF LLaMA rotate_half, the default): dimension i
//     is paired with i + d_rot/2; cos and sin tables are cat(cos φ, cos φ) and
//     y = x·cos + cat(−x₂, x₁)·sin with x₁ = x[:d_rot/2], x₂ = x[d_rot/2:].
//   - interleaved layout ("interleaved", GPT-J / RoFormer): dimension 2i is paired with 2i+1;
//     tables are repeat_interleave(cos φ, 2) and y = x·cos + (−x₁, x₀, −x₃, x₂, …)·sin.
//
// Only the first d_rot dimensions of each head rotate (x-transformers' partial rotary); the
// rest pass through. The cos/sin tables (max_len, d_rot) are computed in float64 and rounded
// once, and travel as buffers rope.cos and rope.sin shared by all layers.
//
// Everything else is the seed's encoder (post-LN, ReLU, LayerNorm eps 1e-5, biased
// projections, 1/√d_k scaling), each convention a hyperparameter.
package rope

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph, the initialisation or the
// meaning of a hyperparameter changes. 1.1.0: scale is nn.ScaleParam's float (0 divides by
// √d_k, 1 leaves the scores unscaled), where 1.0.0 had a bool (true, false).
// 1.2.0: causal (each position attends to itself and earlier ones) and dropout (training builds only).
const Version = "1.2.0"

// Layouts of the rotated pairs.
const (
	// LayoutHalf pairs dimension i with i + d_rot/2 (GPT-NeoX, HF LLaMA).
	LayoutHalf = "half"
	// LayoutInterleaved pairs dimension 2i with 2i+1 (GPT-J, RoFormer).
	LayoutInterleaved = "interleaved"
)

// Variant is the RoPE encoder.
type Variant struct{}

// New returns the RoPE variant.
func New() Variant { return Variant{} }

// Describe returns the shared encoder schema (max_len: rows of the rotation tables) plus
// rope_base, rope_layout, rope_dim and the shared attention parameters (attn_bias, scale).
func (Variant) Describe() variant.Description {
	params := nn.EncoderParams()
	for i := range params {
		if params[i].Name == "max_len" {
			params[i].Doc = "rows of the cos/sin rotation tables: the longest sequence the model accepts"
		}
	}
	params = append(params,
		variant.Param{Name: "rope_base", Kind: variant.KindFloat, Default: 10000.0, Min: variant.MinOf(1),
			Doc: "base of the rotation frequencies θ_i = base^(-2i/d_rot)"},
		variant.Param{Name: "rope_layout", Kind: variant.KindString, Default: LayoutHalf, Choices: []string{LayoutHalf, LayoutInterleaved},
			Doc: "pairing of rotated dimensions: half (i with i+d_rot/2, NeoX/LLaMA) or interleaved (2i with 2i+1, GPT-J/RoFormer)"},
		variant.Param{Name: "rope_dim", Kind: variant.KindInt, Default: int64(0), Min: variant.MinOf(0),
			Doc: "rotated dimensions per head, even and <= d_k; 0 rotates all d_k (the rest pass through unrotated)"},
	)
	params = append(append(params, nn.AttentionParams()...), nn.CausalParam())
	return variant.Description{
		Name:       "rope",
		Version:    Version,
		Summary:    "rotary position embedding on queries and keys (RoFormer; rotate-half or interleaved), no additive positions",
		Paper:      "https://arxiv.org/abs/2104.09864",
		Complexity: "O(n²)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("rope: %w", err)
	}
	e.PosEncoding = "none"
	heads := cfg.Int("heads")
	dk := e.DModel / heads
	rot := cfg.Int("rope_dim")
	if rot == 0 {
		rot = dk
	}
	if rot%2 != 0 || rot > dk {
		return nil, fmt.Errorf("rope: rope_dim=%d must be even and at most d_k=%d (d_model/heads)", rot, dk)
	}
	layout := cfg.String("rope_layout")
	if layout != LayoutHalf && layout != LayoutInterleaved {
		return nil, fmt.Errorf("rope: unknown rope_layout %q (want half or interleaved)", layout)
	}
	c := nn.NewCtx(ctx, "rope", seed)
	c.SetBuildMeta("rope", Version, cfg)
	var sinT *tensor.Tensor // the tables are computed together, within the weight budget
	cos := c.Buffer("rope.cos", []int{e.MaxLen, rot}, func() (cosT *tensor.Tensor) {
		cosT, sinT = Tables(e.MaxLen, rot, cfg.Float("rope_base"), layout)
		return cosT
	})
	r := &rotary{cos: cos, sin: c.Buffer("rope.sin", []int{e.MaxLen, rot}, func() *tensor.Tensor { return sinT }), dk: dk, rot: rot, layout: layout}
	g, err := c.Encoder(e, r.attention(e.DModel, heads, nn.AttentionOptionsFrom(cfg)))
	if err != nil {
		return nil, fmt.Errorf("rope: %w", err)
	}
	return g, nil
}

// Tables returns the cos and sin tables (maxLen, rot) for the layout: entry (p, j) is
// cos/sin(p·base^(−2i/rot)) with i = j mod rot/2 (half) or i = ⌊j/2⌋ (interleaved), computed in
// float64 and rounded once.
func Tables(maxLen, rot int, base float64, layout string) (cos, sin *tensor.Tensor) {
	cs := make([]float32, maxLen*rot)
	sn := make([]float32, maxLen*rot)
	half := rot / 2
	for p := 0; p < maxLen; p++ {
		for j := 0; j < rot; j++ {
			i := j % half
			if layout == LayoutInterleaved {
				i = j / 2
			}
			angle := float64(p) * math.Pow(base, -float64(2*i)/float64(rot))
			cs[p*rot+j] = float32(math.Cos(angle))
			sn[p*rot+j] = float32(math.Sin(angle))
		}
	}
	cos, _ = tensor.FromFloat32(cs, maxLen, rot)
	sin, _ = tensor.FromFloat32(sn, maxLen, rot)
	return cos, sin
}

// rotary applies the rotation; the sliced tables are built once and shared by every layer.
type rotary struct {
	cos, sin   string // buffers (max_len, rot)
	cosN, sinN string // first n rows (n, rot)
	dk, rot    int
	layout     string
	sliced     bool
}

func (r *rotary) slices(c *nn.Ctx, pad string) {
	if r.sliced {
		return
	}
	defer c.B.Scope("rope")()
	n := c.SeqLen(pad)
	r.cosN = c.B.Slice(r.cos, c.B.ConstInts(0), n, c.B.ConstInts(0))
	r.sinN = c.B.Slice(r.sin, c.B.ConstInts(0), n, c.B.ConstInts(0))
	r.sliced = true
}

// apply rotates x (B, h, n, dk) by position.
func (r *rotary) apply(c *nn.Ctx, x string) string {
	b := c.B
	last := func(v string, from, to int64, axis int64) string {
		return b.Slice(v, b.ConstInts(from), b.ConstInts(to), b.ConstInts(axis))
	}
	xr, pass := x, ""
	if r.rot < r.dk {
		xr, pass = last(x, 0, int64(r.rot), 3), last(x, int64(r.rot), int64(r.dk), 3)
	}
	var rotated string
	if r.layout == LayoutHalf {
		h := int64(r.rot / 2)
		x1, x2 := last(xr, 0, h, 3), last(xr, h, int64(r.rot), 3)
		rotated = b.Op("Concat", []string{b.Op("Neg", []string{x2}, nil), x1}, graph.Attrs{"axis": graph.Int(3)})
	} else {
		pairs := b.Reshape(xr, 0, 0, 0, int64(r.rot/2), 2)
		even, odd := last(pairs, 0, 1, 4), last(pairs, 1, 2, 4)
		rotated = b.Reshape(b.Op("Concat", []string{b.Op("Neg", []string{odd}, nil), even}, graph.Attrs{"axis": graph.Int(4)}), 0, 0, 0, int64(r.rot))
	}
	y := b.Add(b.Mul(xr, r.cosN), b.Mul(rotated, r.sinN))
	if pass != "" {
		y = b.Op("Concat", []string{y, pass}, graph.Attrs{"axis": graph.Int(3)})
	}
	return y
}

// attention is multi-head attention with rotated queries and keys.
func (r *rotary) attention(d, heads int, o nn.AttentionOptions) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		dk := d / heads
		r.slices(c, m.Pad)
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, o.Bias), heads, dk)
		k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, o.Bias), heads, dk)
		v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, o.Bias), heads, dk)
		out := func() string {
			defer c.B.Scope(prefix)()
			q, k := r.apply(c, q), r.apply(c, k)
			return c.MergeHeads(c.DotProductAttention(q, k, v, m.Bias, dk, o.Scale), d)
		}()
		return c.Linear(prefix+".W_O", out, d, d, o.Bias)
	}
}
