// Package gqa is grouped-query attention (Ainslie et al. 2023) and, with one key/value head,
// multi-query attention (Shazeer 2019): h query heads share kv_heads key/value heads, query
// head i reading key/value head i // (h/kv_heads), the rule of Hugging Face's repeat_kv and
// PyTorch's repeat_interleave (not i % kv_heads). The encoder around it is the seed's.
package gqa

import (
	"context"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph or initialisation changes.
// 1.1.0: causal (each position attends to itself and earlier ones) and dropout (training builds only).
const Version = "1.1.0"

// Variant is the grouped-query attention encoder.
type Variant struct{}

// New returns the gqa variant.
func New() Variant { return Variant{} }

// Describe returns the schema: the shared encoder parameters plus kv_heads and the shared
// attention parameters (attn_bias, scale).
func (Variant) Describe() variant.Description {
	params := append(nn.EncoderParams(),
		variant.Param{Name: "kv_heads", Kind: variant.KindInt, Default: int64(2), Min: variant.MinOf(1),
			Doc: "key/value heads; must divide heads (1 = multi-query attention, heads = multi-head attention); W_K and W_V are (kv_heads·d_k, d_model)"})
	params = append(append(params, nn.AttentionParams()...), nn.CausalParam())
	return variant.Description{
		Name:       "gqa",
		Version:    Version,
		Summary:    "grouped-query attention (kv_heads key/value heads shared by groups of query heads; kv_heads=1 is multi-query)",
		Paper:      "https://arxiv.org/abs/2305.13245",
		Complexity: "O(n²)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("gqa: %w", err)
	}
	heads, kv := cfg.Int("heads"), cfg.Int("kv_heads")
	if kv < 1 || heads%kv != 0 {
		return nil, fmt.Errorf("gqa: kv_heads=%d must divide heads=%d (1 is multi-query attention)", kv, heads)
	}
	c := nn.NewCtx(ctx, "gqa", seed)
	c.SetBuildMeta("gqa", Version, cfg)
	g, err := c.Encoder(e, Attention(e.DModel, heads, kv, nn.AttentionOptionsFrom(cfg)))
	if err != nil {
		return nil, fmt.Errorf("gqa: %w", err)
	}
	return g, nil
}

// Attention is the grouped-query attention block: W_Q (d → d), W_K and W_V (d → kv·d_k),
// W_O (d → d), heads query heads of width d_k = d/heads. Query head i = g·r + j (r = heads/kv)
// reads key/value head g. The graph never copies K and V r times: it folds each group's r
// query heads into one (r·n, d_k) block per key/value head, which is the same arithmetic as
// repeat_kv with a fraction of the memory. o.Scale is nn.ScaleParam's score scale.
func Attention(d, heads, kv int, o nn.AttentionOptions) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		dk := d / heads
		r := heads / kv
		q := c.Linear(prefix+".W_Q", x, d, d, o.Bias)
		k := c.Linear(prefix+".W_K", x, d, kv*dk, o.Bias)
		v := c.Linear(prefix+".W_V", x, d, kv*dk, o.Bias)
		out := func() string {
			defer c.B.Scope(prefix)()
			b := c.B
			// (B, n, h·dk) → (B, n, kv, r, dk) → (B, kv, r, n, dk) → (B, kv, r·n, dk)
			qg := b.Transpose(b.Reshape(q, 0, 0, int64(kv), int64(r), int64(dk)), 0, 2, 3, 1, 4)
			qg = b.Reshape(qg, 0, int64(kv), -1, int64(dk))
			kh, vh := c.SplitHeads(k, kv, dk), c.SplitHeads(v, kv, dk)
			// scores (B, kv, r·n, n); the padding bias (B, 1, 1, n) broadcasts over every query row
			scores := c.ScaleScores(b.MatMul(qg, b.Transpose(kh, 0, 1, 3, 2)), dk, o.Scale)
			bias := m.Bias
			if m.Causal && r > 1 {
				// the causal bias (B, 1, n, n) varies by query row: repeat it for the r query
				// heads of a group, whose rows follow one another
				rep := make([]string, r)
				for i := range rep {
					rep[i] = bias
				}
				bias = b.Op("Concat", rep, graph.Attrs{"axis": graph.Int(2)}) // (B, 1, r·n, n)
			}
			scores = b.Add(scores, bias)
			y := b.MatMul(b.Softmax(scores, -1), vh) // (B, kv, r·n, dk)
			// (B, kv, r·n, dk) → (B, kv, r, n, dk) → (B, n, kv, r, dk) → (B, n, d)
			y = b.Reshape(y, 0, int64(kv), int64(r), -1, int64(dk))
			return b.Reshape(b.Transpose(y, 0, 3, 1, 2, 4), 0, 0, int64(d))
		}()
		return c.Linear(prefix+".W_O", out, d, d, o.Bias)
	}
}
