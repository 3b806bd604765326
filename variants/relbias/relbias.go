// Package relbias is the encoder with T5-style relative position bias (Raffel et al. 2020,
// arXiv 1910.10683): every head adds a learned scalar, looked up by the bucket of the relative
// position j − i, to its attention scores:
//
//	scores[b, h, i, j] = scale(q_i·k_j) + Emb[bucket(j − i), h] + mask[b, j]
//
// Buckets are HF T5's _relative_position_bucket, bidirectional: half of num_buckets for keys to
// the left (and j = i), half for keys to the right; within a half the first max_exact =
// num_buckets/4 distances get a bucket each and larger distances share logarithmically wider
// buckets up to max_distance, beyond which everything falls into the last bucket. Defaults
// (32 buckets, max_distance 128) give j−i = 0→0, −1…−7→1…7, −8…−11→8, …, ≤−91→15, +1…+7→17…23,
// …, ≥+91→31. The bucket of j−i is the same for every |j−i| ≥ max_distance, so the graph clamps
// j−i to ±max_distance and looks it up in a small int64 table computed at build time (float32
// arithmetic, as torch does it) — no length limit and no (n × n) initializer.
//
// As in T5, only the first layer owns the embedding (layers.0.self_attn.relative_attention_bias,
// (num_buckets, heads)); the bias it computes is shared by every layer. T5 also drops the
// 1/√d_k scaling (scale=1, nn.ScaleParam's "unscaled"), has no absolute positions, no Linear
// biases and pre-norm layers with eps 1e-6: the registry's t5 preset selects those. T5's
// RMSNorm and bias-free FFN are not reproduced: norms are LayerNorm and the FFN keeps its
// biases.
package relbias

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

// EmbeddingName is the bias table's parameter name (HF T5's module path inside layer 0).
const EmbeddingName = "layers.0.self_attn.relative_attention_bias.weight"

// Variant is the relative-position-bias encoder.
type Variant struct{}

// New returns the relbias variant.
func New() Variant { return Variant{} }

// Describe returns the shared encoder schema plus pos_encoding, num_buckets, max_distance and
// the shared attention parameters (attn_bias, scale).
func (Variant) Describe() variant.Description {
	params := nn.EncoderParams()
	for i := range params {
		if params[i].Name == "max_len" {
			params[i].Doc = "longest sequence the model accepts (the bias itself has no length limit; with pos_encoding=sinusoidal, rows of the table)"
		}
	}
	params = append(params,
		variant.Param{Name: "pos_encoding", Kind: variant.KindString, Default: "none", Choices: []string{"none", "sinusoidal"},
			Doc: "absolute positions added to the embedding: none (T5) or the seed's sinusoidal table"},
		variant.Param{Name: "num_buckets", Kind: variant.KindInt, Default: int64(32), Min: variant.MinOf(4),
			Doc: "relative-position buckets (half per direction; even, at least 4)"},
		variant.Param{Name: "max_distance", Kind: variant.KindInt, Default: int64(128), Min: variant.MinOf(1),
			Doc: "distance from which all relative positions share the last bucket of their direction"},
	)
	params = append(append(params, nn.AttentionParams()...), nn.CausalParam())
	return variant.Description{
		Name:       "relbias",
		Version:    Version,
		Summary:    "T5 relative position bias: learned per-head scalar per bucketed distance j-i, owned by layer 0, shared by all layers",
		Paper:      "https://arxiv.org/abs/1910.10683",
		Complexity: "O(n²)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build returns the encoder graph for cfg with weights drawn from seed; the bias table is
// drawn N(0, 1) like nn.Embedding.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("relbias: %w", err)
	}
	e.PosEncoding = cfg.String("pos_encoding")
	nb, maxDist := cfg.Int("num_buckets"), cfg.Int("max_distance")
	if nb < 4 || nb%2 != 0 {
		return nil, fmt.Errorf("relbias: num_buckets=%d must be even and at least 4", nb)
	}
	c := nn.NewCtx(ctx, "relbias", seed)
	c.SetBuildMeta("relbias", Version, cfg)
	a := &attention{d: e.DModel, heads: cfg.Int("heads"), buckets: nb, maxDist: maxDist,
		AttentionOptions: nn.AttentionOptionsFrom(cfg)}
	g, err := c.Encoder(e, a.block)
	if err != nil {
		return nil, fmt.Errorf("relbias: %w", err)
	}
	return g, nil
}

// Bucket is HF T5's _relative_position_bucket(relative_position, bidirectional=True,
// num_buckets, max_distance) for one relative position rel = j − i, in float32 arithmetic
// as torch evaluates it.
func Bucket(rel, numBuckets, maxDistance int) int {
	nb := numBuckets / 2
	bucket := 0
	if rel > 0 {
		bucket = nb
	}
	rp := rel
	if rp < 0 {
		rp = -rp
	}
	maxExact := nb / 2
	if rp < maxExact {
		return bucket + rp
	}
	// max_exact + (log(rp / max_exact) / log(max_distance / max_exact) * (nb - max_exact)).long()
	ratio := float32(math.Log(float64(float32(rp) / float32(maxExact))))
	ratio /= float32(math.Log(float64(maxDistance) / float64(maxExact)))
	large := maxExact + int(ratio*float32(nb-maxExact))
	return bucket + min(large, nb-1)
}

// BucketTable returns Bucket(rel) for rel = −maxDistance … maxDistance (index rel +
// maxDistance); every |rel| ≥ maxDistance has the bucket of ±maxDistance.
func BucketTable(numBuckets, maxDistance int) []int64 {
	out := make([]int64, 2*maxDistance+1)
	for i := range out {
		out[i] = int64(Bucket(i-maxDistance, numBuckets, maxDistance))
	}
	return out
}

// attention is multi-head attention with the shared relative position bias.
type attention struct {
	d, heads, buckets, maxDist int
	nn.AttentionOptions
	shared string // (B, h, n, n) bias incl. padding, built by layer 0
}

// positionBias builds Emb[bucket(clamp(j − i)), h] as (1, h, n, n) plus the padding bias.
func (a *attention) positionBias(c *nn.Ctx, pad, padBias string) string {
	b := c.B
	emb := c.Normal(EmbeddingName, 0, 1, a.buckets, a.heads)
	lut, _ := tensor.FromInt64(BucketTable(a.buckets, a.maxDist), 2*a.maxDist+1)
	table := b.Const(lut)
	defer b.Scope("layers.0.self_attn.relative_attention_bias")()
	n := c.ScalarSeqLen(pad)
	pos := b.Op("Range", []string{b.Const(tensor.Scalar64(0)), n, b.Const(tensor.Scalar64(1))}, nil)
	rel := b.Sub(b.Unsqueeze(pos, 0), b.Unsqueeze(pos, 1)) // (n, n): j − i
	D := int64(a.maxDist)
	rel = b.Op("Max", []string{b.Op("Min", []string{rel, b.Const(tensor.Scalar64(D))}, nil), b.Const(tensor.Scalar64(-D))}, nil)
	buckets := b.Gather(table, b.Add(rel, b.Const(tensor.Scalar64(D))), 0) // (n, n)
	values := b.Transpose(b.Gather(emb, buckets, 0), 2, 0, 1)              // (h, n, n)
	return b.Add(b.Unsqueeze(values, 0), padBias)                          // (B, h, n, n)
}

// block is the nn.AttentionFunc: layer 0 builds the bias, every layer adds it.
func (a *attention) block(c *nn.Ctx, prefix string, layer int, x string, m nn.Mask) string {
	d, heads := a.d, a.heads
	dk := d / heads
	if a.shared == "" {
		a.shared = a.positionBias(c, m.Pad, m.Bias)
	}
	q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, a.Bias), heads, dk)
	k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, a.Bias), heads, dk)
	v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, a.Bias), heads, dk)
	o := func() string {
		defer c.B.Scope(prefix)()
		return c.MergeHeads(c.DotProductAttention(q, k, v, a.shared, dk, a.Scale), d)
	}()
	return c.Linear(prefix+".W_O", o, d, d, a.Bias)
}
