// Package linformer is the Linformer encoder (Wang et al. 2020, arXiv 2006.04768): multi-head
// attention whose keys and values are compressed along the SEQUENCE axis by learned
// projections E, F ∈ R^{k×max_len}, so that attention costs O(n·k) instead of O(n²):
//
//	head_i = softmax( (x W_Qⁱ) · (E_i · x W_Kⁱ)ᵀ / √d_k ) · (F_i · x W_Vⁱ)
//
// E and F have one column per position up to max_len; a shorter input of length n uses their
// first n columns (fairseq's compress_k.weight[:, 0:n], lucidrains' proj[:n]). Keys and values
// are projected by W_K / W_V first and compressed second (the paper's order; with biases it
// differs from fairseq's compress-then-project), and the rows of padded tokens are set to
// zero before the compression, so padding contributes nothing to the k compressed slots (a
// key-padding mask cannot be applied after compression, because each slot mixes tokens).
//
// The seed's "Linformer" applied nn.Linear(d_model, k) to the feature axis and then viewed the
// result as (B, k, h, d_k), which only runs when n == d_model and never compresses the
// sequence; this package follows the paper (see shared/reference/variants.md §2).
//
// Everything else is the seed's encoder (post-LN by default, ReLU FFN, sinusoidal positions,
// LayerNorm eps 1e-5, biased projections), each convention a hyperparameter.
package linformer

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph, the initialisation or the
// meaning of a hyperparameter changes. 1.1.0: scale is nn.ScaleParam's float (0 divides by
// √d_k, 1 leaves the scores unscaled), where 1.0.0 had a bool (true, false).
// 1.2.0: dropout (training builds only); causal=true is refused (causalRefusal).
const Version = "1.2.0"

// causalRefusal says why linformer has no causal mode.
const causalRefusal = "causal=true is not possible: the projections E and F mix the keys and values of every position, later ones included, into k summaries, so no query can be kept from the future (use vanilla, rope, alibi, relbias, gqa, sparse, linear or performer for clm)"

// causalParam is nn.CausalParam for a variant that must refuse true.
func causalParam() variant.Param {
	p := nn.CausalParam()
	p.Doc = "must be false: " + causalRefusal[len("causal=true is "):]
	return p
}

// Sharing modes of the projections E and F (paper §4).
const (
	// ShareNone gives every head of every layer its own E_i and F_i (h, k, max_len).
	ShareNone = "none"
	// ShareHeadwise gives each layer one E and one F (k, max_len) shared by its heads.
	ShareHeadwise = "headwise"
	// ShareKeyValue gives each layer one matrix E (k, max_len) used for keys and values.
	ShareKeyValue = "key-value"
	// ShareLayerwise uses a single E (k, max_len) for every layer, head, key and value.
	ShareLayerwise = "layerwise"
)

// Variant is the Linformer encoder.
type Variant struct{}

// New returns the Linformer variant.
func New() Variant { return Variant{} }

// Describe returns the schema: the shared encoder schema (with max_len 4096, the number of
// columns of E and F) plus k, sharing and the shared attention parameters (attn_bias, scale).
func (Variant) Describe() variant.Description {
	params := nn.EncoderParams()
	for i := range params {
		if params[i].Name == "max_len" {
			params[i].Default = int64(4096)
			params[i].Doc = "longest sequence: columns of E and F (shorter inputs use the first n) and rows of the positional table"
		}
	}
	params = append(params,
		variant.Param{Name: "k", Kind: variant.KindInt, Default: int64(256), Min: variant.MinOf(1),
			Doc: "projected length: keys and values are compressed from n to k positions (must be <= max_len)"},
		variant.Param{Name: "sharing", Kind: variant.KindString, Default: ShareHeadwise,
			Choices: []string{ShareNone, ShareHeadwise, ShareKeyValue, ShareLayerwise},
			Doc:     "E/F sharing: none (per head), headwise (per layer), key-value (per layer, E=F), layerwise (one E for the model)"},
	)
	params = append(append(params, nn.AttentionParams()...), causalParam())
	return variant.Description{
		Name:       "linformer",
		Version:    Version,
		Summary:    "Linformer: keys and values projected along the sequence axis to k slots (E, F ∈ R^{k×max_len})",
		Paper:      "https://arxiv.org/abs/2006.04768",
		Complexity: "O(n·k)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// config is the attention block's part of the hyperparameters.
type config struct {
	d, heads, k, maxLen int
	sharing             string
	nn.AttentionOptions
}

// Build returns the encoder graph for cfg with weights drawn from seed. E and F are drawn
// U(±1/√k) (lucidrains/linformer's init_); everything else as the seed's encoder.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("linformer: %w", err)
	}
	if e.Causal {
		return nil, fmt.Errorf("linformer: %s", causalRefusal)
	}
	a := config{d: e.DModel, heads: cfg.Int("heads"), k: cfg.Int("k"), maxLen: cfg.Int("max_len"),
		sharing: cfg.String("sharing"), AttentionOptions: nn.AttentionOptionsFrom(cfg)}
	if a.k > a.maxLen {
		return nil, fmt.Errorf("linformer: k=%d must not exceed max_len=%d (E and F compress at most max_len positions to k)", a.k, a.maxLen)
	}
	switch a.sharing {
	case ShareNone, ShareHeadwise, ShareKeyValue, ShareLayerwise:
	default:
		return nil, fmt.Errorf("linformer: unknown sharing %q (want none, headwise, key-value or layerwise)", a.sharing)
	}
	c := nn.NewCtx(ctx, "linformer", seed)
	c.SetBuildMeta("linformer", Version, cfg)
	g, err := c.Encoder(e, Attention(a.d, a.heads, a.k, a.maxLen, a.sharing, a.AttentionOptions))
	if err != nil {
		return nil, fmt.Errorf("linformer: %w", err)
	}
	return g, nil
}

// ProjectionNames returns the parameter names of E and F for layer (equal when shared
// between keys and values) under the attention block's prefix.
func ProjectionNames(prefix, sharing string) (e, f string) {
	switch sharing {
	case ShareLayerwise:
		return "E", "E"
	case ShareKeyValue:
		return prefix + ".E", prefix + ".E"
	}
	return prefix + ".E", prefix + ".F"
}

// Attention returns the Linformer attention block: W_Q, W_K, W_V, W_O (d → d), keys and
// values zeroed at padded positions and compressed along the sequence axis by the first n
// columns of E and F, h heads of width d/h. Parameters: prefix.W_{Q,K,V,O}.{weight,bias},
// and E/F as ProjectionNames says, of shape (k, maxLen), or (h, k, maxLen) with sharing none;
// o.Scale is nn.ScaleParam's score scale.
func Attention(d, heads, k, maxLen int, sharing string, o nn.AttentionOptions) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, layer int, x string, m nn.Mask) string {
		dk := d / heads
		shape := []int{k, maxLen}
		if sharing == ShareNone {
			shape = []int{heads, k, maxLen}
		}
		en, fn := ProjectionNames(prefix, sharing)
		param := func(name string) string {
			if sharing == ShareLayerwise && layer > 0 {
				return name // created by layer 0
			}
			return c.Uniform(name, 1/math.Sqrt(float64(k)), shape...)
		}
		E := param(en)
		F := E
		if fn != en {
			F = param(fn)
		}
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, o.Bias), heads, dk)
		kx := c.Linear(prefix+".W_K", x, d, d, o.Bias)
		vx := c.Linear(prefix+".W_V", x, d, d, o.Bias)
		out := func() string {
			defer c.B.Scope(prefix)()
			// Zero the rows of padded tokens: (B, n, 1) condition against (B, n, d).
			padRows := c.B.Unsqueeze(m.Pad, 2)
			zero := c.B.ConstFloat(0)
			kx = c.B.Where(padRows, zero, kx)
			vx = c.B.Where(padRows, zero, vx)
			n := c.SeqLen(m.Pad)
			axis := c.B.ConstInts(int64(len(shape) - 1))
			cols := func(p string) string { return c.B.Slice(p, c.B.ConstInts(0), n, axis) }
			En := cols(E)
			Fn := En
			if F != E {
				Fn = cols(F)
			}
			var kc, vc string
			if sharing == ShareNone {
				// (h, k, n) · (B, h, n, dk) → (B, h, k, dk)
				kc = c.B.MatMul(En, c.SplitHeads(kx, heads, dk))
				vc = c.B.MatMul(Fn, c.SplitHeads(vx, heads, dk))
			} else {
				// (k, n) · (B, n, d) → (B, k, d) → (B, h, k, dk)
				kc = c.SplitHeads(c.B.MatMul(En, kx), heads, dk)
				vc = c.SplitHeads(c.B.MatMul(Fn, vx), heads, dk)
			}
			return c.MergeHeads(c.DotProductAttention(q, kc, vc, "", dk, o.Scale), d)
		}()
		return c.Linear(prefix+".W_O", out, d, d, o.Bias)
	}
}
