// Package vanilla is the seed's encoder: multi-head attention (Vaswani et al. 2017) in a
// post-LN layer with a ReLU FFN, sinusoidal positions, an embedding and an output projection.
// Its parameter names are the seed's PyTorch state_dict keys.
package vanilla

import (
	"context"

	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph or initialisation changes.
const Version = "1.0.0"

// Variant is the vanilla encoder.
type Variant struct{}

// New returns the vanilla variant.
func New() Variant { return Variant{} }

// EncoderParams is the hyperparameter schema every encoder variant shares, with the seed's
// defaults. Variants append their own entries.
func EncoderParams() []variant.Param {
	one := variant.MinOf(1)
	return []variant.Param{
		{Name: "vocab", Kind: variant.KindInt, Default: int64(257), Doc: "vocabulary size (257 = byte-level tokenizer: 0 padding, byte b is b+1)", Min: one},
		{Name: "d_model", Kind: variant.KindInt, Default: int64(512), Doc: "model width", Min: one},
		{Name: "heads", Kind: variant.KindInt, Default: int64(8), Doc: "attention heads; must divide d_model", Min: one},
		{Name: "layers", Kind: variant.KindInt, Default: int64(6), Doc: "encoder layers", Min: one},
		{Name: "d_ff", Kind: variant.KindInt, Default: int64(2048), Doc: "feed-forward width", Min: one},
		{Name: "max_len", Kind: variant.KindInt, Default: int64(5000), Doc: "rows of the positional table: the longest sequence the model accepts", Min: one},
		{Name: "norm_first", Kind: variant.KindBool, Default: false, Doc: "pre-LN layers with a final LayerNorm; false is the seed's post-LN"},
		{Name: "activation", Kind: variant.KindString, Default: "relu", Doc: "FFN activation (gelu is the exact erf form)", Choices: []string{"relu", "gelu"}},
		{Name: "ln_eps", Kind: variant.KindFloat, Default: 1e-5, Doc: "LayerNorm epsilon", Min: variant.MinOf(0)},
	}
}

// EncoderConfig reads the shared schema's values from cfg and checks that heads divides
// d_model.
func EncoderConfig(cfg variant.Config) (nn.EncoderConfig, error) {
	e := nn.EncoderConfig{
		Vocab: cfg.Int("vocab"), DModel: cfg.Int("d_model"), Layers: cfg.Int("layers"), DFF: cfg.Int("d_ff"),
		MaxLen: cfg.Int("max_len"), PosEncoding: "sinusoidal", NormFirst: cfg.Bool("norm_first"),
		Activation: cfg.String("activation"), LNEps: cfg.Float("ln_eps"),
	}
	if h := cfg.Int("heads"); h < 1 || e.DModel%h != 0 {
		return e, fmt.Errorf("heads=%d must divide d_model=%d", h, e.DModel)
	}
	return e, e.Validate()
}

// Describe returns the schema with the seed's defaults.
func (Variant) Describe() variant.Description {
	return variant.Description{
		Name:       "vanilla",
		Version:    Version,
		Summary:    "multi-head softmax attention, post-LN, ReLU FFN, sinusoidal positions (the seed's encoder)",
		Paper:      "https://arxiv.org/abs/1706.03762",
		Complexity: "O(n²)",
		Params:     EncoderParams(),
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := EncoderConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vanilla: %w", err)
	}
	c := nn.NewCtx(ctx, "vanilla", seed)
	c.B.SetMeta("variant", "vanilla")
	c.B.SetMeta("variant_version", Version)
	c.B.SetMeta("config", cfg.JSON())
	c.B.SetMeta("seed", fmt.Sprint(seed))
	g, err := c.Encoder(e, nn.MultiHeadAttention(e.DModel, cfg.Int("heads")))
	if err != nil {
		return nil, fmt.Errorf("vanilla: %w", err)
	}
	return g, nil
}
