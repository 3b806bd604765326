package nn

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/variant"
)

// The hyperparameter schema that encoder variants share. Every variant (in-tree or a
// third-party plugin) starts its Describe from EncoderParams and reads it back in Build with
// EncoderConfigFrom, so that a name such as d_model or norm_first means the same thing in
// every variant; softmax-attention variants add AttentionParams (attn_bias, scale) and read
// them with AttentionOptionsFrom.

// EncoderParams returns the hyperparameter schema every encoder variant shares, with the
// seed's defaults: vocab, d_model, heads, layers, d_ff, max_len, norm_first, activation and
// ln_eps. Variants append their own entries and may change an entry's default or doc (the
// slice is theirs); a variant without absolute positions or a length limit drops max_len,
// which EncoderConfigFrom then reads as "no positional table".
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
		DropoutParam(),
	}
}

// DropoutParam is dropout, the seed's nn.Dropout(0.1) on each sub-layer's output before its
// residual add (X + dropout(attn(X)), X + dropout(ffn(X))). It applies only to training
// builds (variant.Training); inference graphs are the same whatever its value. In [0, 1).
func DropoutParam() variant.Param {
	return variant.Param{Name: "dropout", Kind: variant.KindFloat, Default: 0.1, Min: variant.MinOf(0),
		Doc: "dropout on each sub-layer's output before the residual add, in training only (the seed's 0.1); below 1"}
}

// CausalParam is causal: each position attends to itself and earlier positions only (the
// mask of a decoder, for next-token training). A variant whose attention can be made causal
// appends it to its schema and honours Mask.Causal; one whose math cannot (a projection or
// landmarks that mix every position) appends it too and refuses true in Build with the
// reason, so that the refusal names it.
func CausalParam() variant.Param {
	return variant.Param{Name: "causal", Kind: variant.KindBool, Default: false,
		Doc: "attend to the current and earlier positions only (a decoder's mask, for clm training)"}
}

// EncoderConfigFrom reads the values of EncoderParams from cfg (a config resolved against a
// schema that includes them), causal when the schema has CausalParam, and whether cfg asks
// for a training build (variant.Config.Training). With max_len in cfg the encoder adds the seed's sinusoidal
// positions and accepts at most max_len tokens; without it (a schema that dropped max_len)
// it has no absolute positions and no length limit. Variants with another positional scheme
// set PosEncoding afterwards. It returns an error naming the parameters when heads does not
// divide d_model or when EncoderConfig.Validate fails.
func EncoderConfigFrom(cfg variant.Config) (EncoderConfig, error) {
	e := EncoderConfig{
		Vocab: cfg.Int("vocab"), DModel: cfg.Int("d_model"), Layers: cfg.Int("layers"), DFF: cfg.Int("d_ff"),
		PosEncoding: "none", NormFirst: cfg.Bool("norm_first"), Activation: cfg.String("activation"), LNEps: cfg.Float("ln_eps"),
		Causal: cfg.Bool("causal"), Dropout: cfg.Float("dropout"), Training: cfg.Training(),
	}
	if _, ok := cfg["max_len"]; ok {
		e.MaxLen, e.PosEncoding = cfg.Int("max_len"), "sinusoidal"
	}
	if h := cfg.Int("heads"); h < 1 || e.DModel%h != 0 {
		return e, fmt.Errorf("heads=%d must divide d_model=%d", h, e.DModel)
	}
	return e, e.Validate()
}

// AttnBiasParam is attn_bias: whether the attention block's projections W_Q, W_K, W_V and W_O
// carry biases (default true, nn.Linear's default; T5 and LLaMA-style models have none).
func AttnBiasParam() variant.Param {
	return variant.Param{Name: "attn_bias", Kind: variant.KindBool, Default: true,
		Doc: "biases on W_Q, W_K, W_V and W_O (nn.Linear's default; T5 and LLaMA-style models have none)"}
}

// ScaleParam is scale, the one meaning of score scaling in every variant that has it: a
// float, at least 0, default 0. 0 divides Q·Kᵀ by √d_k after the product (the seed's order);
// a positive value multiplies the scores by it instead, so 1 leaves them unscaled (T5's
// convention) and 0.125 is 1/√64 applied as a product. Additive biases (positions, padding)
// come after the scaling. Applied by Ctx.ScaleScores.
func ScaleParam() variant.Param {
	return variant.Param{Name: "scale", Kind: variant.KindFloat, Default: 0.0, Min: variant.MinOf(0),
		Doc: "score scale: 0 divides Q·Kᵀ by √d_k after the product (the seed's order); a positive value multiplies the scores by it (1 = unscaled, T5); position and padding biases are added after scaling"}
}

// AttentionParams returns the knobs of a softmax attention block that variants share:
// AttnBiasParam and ScaleParam. Variants whose attention has no score scale (kernelised or
// linear attention) take AttnBiasParam alone.
func AttentionParams() []variant.Param {
	return []variant.Param{AttnBiasParam(), ScaleParam()}
}

// AttentionOptions are the values of AttentionParams.
type AttentionOptions struct {
	// Bias puts biases on W_Q, W_K, W_V and W_O.
	Bias bool
	// Scale is the score scale as ScaleParam documents it (0: divide by √d_k).
	Scale float64
}

// AttentionOptionsFrom reads attn_bias and scale from cfg; an absent entry reads as false
// and 0.
func AttentionOptionsFrom(cfg variant.Config) AttentionOptions {
	return AttentionOptions{Bias: cfg.Bool("attn_bias"), Scale: cfg.Float("scale")}
}

// ScaleScores applies the score scale to scores (q·kᵀ of head width dk) as ScaleParam
// documents it: scale 0 divides by √dk, scale 1 returns scores unchanged (no op is added),
// any other value multiplies.
func (c *Ctx) ScaleScores(scores string, dk int, scale float64) string {
	switch scale {
	case 0:
		return c.B.Div(scores, c.B.ConstFloat(float32(math.Sqrt(float64(dk)))))
	case 1:
		return scores
	}
	return c.B.Mul(scores, c.B.ConstFloat(float32(scale)))
}

// Metadata keys that every variant's graph carries (SetBuildMeta): which variant and version
// built it, from which resolved config (JSON) and seed. `zoo export --weights` copies them into
// the weights file, and a graph read back from ONNX recovers its config from them.
const (
	MetaVariant        = "variant"
	MetaVariantVersion = "variant_version"
	MetaConfig         = "config"
	MetaSeed           = "seed"
)

// SetBuildMeta records the build in the graph's metadata: the variant's name and version, the
// resolved config cfg as JSON and the Ctx's seed.
func (c *Ctx) SetBuildMeta(name, version string, cfg variant.Config) {
	c.B.SetMeta(MetaVariant, name)
	c.B.SetMeta(MetaVariantVersion, version)
	c.B.SetMeta(MetaConfig, cfg.JSON())
	c.B.SetMeta(MetaSeed, fmt.Sprint(c.Seed))
}
