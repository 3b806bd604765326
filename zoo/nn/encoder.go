package nn

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// AttentionFunc builds one attention block under module path prefix for x (B, n, d) and
// returns its output (B, n, d). layer is the layer index (for blocks that share parameters
// across layers).
type AttentionFunc func(c *Ctx, prefix string, layer int, x string, m Mask) string

// EncoderConfig holds the conventions every encoder shares; variants fill it from their
// hyperparameters so nothing is implicit.
type EncoderConfig struct {
	Vocab, DModel, Layers, DFF int
	// MaxLen bounds the sequence length (the positional table's rows); 0 means no absolute
	// positional encoding.
	MaxLen int
	// PosEncoding is "sinusoidal" or "none".
	PosEncoding string
	// NormFirst selects pre-LN (adds a final LayerNorm "norm"); false is the seed's post-LN.
	NormFirst  bool
	Activation string
	LNEps      float64
	// Causal masks each query's later keys (Mask.Causal); the attention block must honour it.
	Causal bool
	// Dropout is the rate of the sub-layer dropout, applied only when Training is set.
	Dropout float64
	// Training builds the training graph: dropout sites become inputs (DropoutInput).
	Training bool
}

// Validate reports the first impossible setting, naming the hyperparameter.
func (e EncoderConfig) Validate() error {
	checks := []struct {
		name string
		v    int
	}{{"vocab", e.Vocab}, {"d_model", e.DModel}, {"layers", e.Layers}, {"d_ff", e.DFF}}
	for _, ch := range checks {
		if ch.v < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", ch.name, ch.v)
		}
	}
	if e.PosEncoding == "sinusoidal" && e.MaxLen < 1 {
		return fmt.Errorf("max_len must be at least 1 with sinusoidal positions, got %d", e.MaxLen)
	}
	if !(e.LNEps > 0) {
		return fmt.Errorf("ln_eps must be positive, got %v", e.LNEps)
	}
	if !(e.Dropout >= 0 && e.Dropout < 1) {
		return fmt.Errorf("dropout must be at least 0 and below 1, got %v", e.Dropout)
	}
	return nil
}

// EncoderLayer is one Transformer encoder layer under prefix: attention, residual,
// LayerNorm (norm1), FFN (ffn), residual, LayerNorm (norm2), post-LN or pre-LN.
// In a training build each sub-layer's output passes through Dropout before the residual add,
// as the seed's layer does.
func (c *Ctx) EncoderLayer(cfg EncoderConfig, prefix string, layer int, x string, m Mask, attn AttentionFunc) string {
	drop := func(site, v string) string {
		if !cfg.Training || cfg.Dropout == 0 {
			return v
		}
		return c.Dropout(site, v, cfg.DModel)
	}
	if cfg.NormFirst {
		a := drop(prefix+".self_attn", attn(c, prefix+".self_attn", layer, c.LayerNorm(prefix+".norm1", x, cfg.DModel, cfg.LNEps), m))
		x = c.B.Add(x, a)
		f := drop(prefix+".ffn", c.FFN(prefix+".ffn", c.LayerNorm(prefix+".norm2", x, cfg.DModel, cfg.LNEps), cfg.DModel, cfg.DFF, cfg.Activation))
		return c.B.Add(x, f)
	}
	a := drop(prefix+".self_attn", attn(c, prefix+".self_attn", layer, x, m))
	x = c.LayerNorm(prefix+".norm1", c.B.Add(x, a), cfg.DModel, cfg.LNEps)
	f := drop(prefix+".ffn", c.FFN(prefix+".ffn", x, cfg.DModel, cfg.DFF, cfg.Activation))
	return c.LayerNorm(prefix+".norm2", c.B.Add(x, f), cfg.DModel, cfg.LNEps)
}

// LayerOutputMeta is the metadata key prefix recording each layer's output value, so that
// parity checks can compare layer by layer: Meta["layer_output.3"] = value name.
const LayerOutputMeta = "layer_output."

// Encoder builds the whole model: inputs tokens (B, n) int64 and key_padding_mask (B, n)
// bool (true = padding); embedding, positional encoding, cfg.Layers encoder layers with the
// given attention block, and the output projection fc; outputs hidden (B, n, d) and logits
// (B, n, vocab). It returns the finished, validated graph.
func (c *Ctx) Encoder(cfg EncoderConfig, attn AttentionFunc) (*graph.Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := c.B
	// The parts this function allocates itself, checked together first: a model far too wide
	// is refused before its embedding is drawn.
	own := addSat(addSat(float32Bytes([]int{cfg.Vocab, cfg.DModel}), float32Bytes([]int{cfg.DModel, cfg.Vocab})), float32Bytes([]int{cfg.Vocab}))
	if cfg.PosEncoding == "sinusoidal" {
		own = addSat(own, float32Bytes([]int{cfg.MaxLen, cfg.DModel}))
	}
	c.precheck("embedding.weight, fc.weight and the positional table", own)
	tokens := b.Input(InputTokens, tensor.Int64, graph.Sym(DimBatch), graph.Sym(DimSeq))
	pad := b.Input(InputKeyPadding, tensor.Bool, graph.Sym(DimBatch), graph.Sym(DimSeq))
	x := c.Embedding("embedding", tokens, cfg.Vocab, cfg.DModel)
	switch cfg.PosEncoding {
	case "sinusoidal":
		x = c.SinusoidalPE("pos_encoding", x, tokens, cfg.MaxLen, cfg.DModel)
	case "none", "":
	default:
		return nil, fmt.Errorf("unknown positional encoding %q (want sinusoidal or none)", cfg.PosEncoding)
	}
	m := c.KeyPaddingMask(pad)
	if cfg.Causal {
		m = c.CausalMask(m)
	}
	if cfg.Training && cfg.Dropout > 0 {
		b.SetMeta(variant.MetaDropout, fmt.Sprint(cfg.Dropout))
	}
	for i := 0; i < cfg.Layers; i++ {
		before := c.weights
		x = c.EncoderLayer(cfg, Join("layers", i), i, x, m, attn)
		b.SetMeta(fmt.Sprint(LayerOutputMeta, i), x)
		// The remaining layers have this one's shape: check them all before drawing the next,
		// and once over budget count them without building them, so that a million layers
		// are refused at once, with their size.
		rest := satMul(int64(cfg.Layers-1-i), c.weights-before)
		c.precheck(Join("layers", i+1)+" onwards", rest)
		if c.over != nil && i+1 < cfg.Layers {
			c.extrapolate(rest)
			break
		}
	}
	if cfg.NormFirst {
		x = c.LayerNorm("norm", x, cfg.DModel, cfg.LNEps)
	}
	b.Output(OutputHidden, x, tensor.Float32, graph.Sym(DimBatch), graph.Sym(DimSeq), graph.Fixed(int64(cfg.DModel)))
	logits := c.Linear("fc", x, cfg.DModel, cfg.Vocab, true)
	b.Output(OutputLogits, logits, tensor.Float32, graph.Sym(DimBatch), graph.Sym(DimSeq), graph.Fixed(int64(cfg.Vocab)))
	return b.Build()
}

// MultiHeadAttention is the seed's attention block: W_Q, W_K, W_V, W_O (d → d, biased),
// h heads of width d/h, scaled dot-product with the key-padding bias.
func MultiHeadAttention(d, heads int) AttentionFunc {
	return func(c *Ctx, prefix string, _ int, x string, m Mask) string {
		dk := d / heads
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, true), heads, dk)
		k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, true), heads, dk)
		v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, true), heads, dk)
		o := func() string {
			defer c.B.Scope(prefix)()
			return c.MergeHeads(c.ScaledDotProduct(q, k, v, m.Bias, dk), d)
		}()
		return c.Linear(prefix+".W_O", o, d, d, true)
	}
}
