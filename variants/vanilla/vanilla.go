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
// 1.1.0: causal (each position attends to itself and earlier ones) and dropout (training builds only).
const Version = "1.1.0"

// Variant is the vanilla encoder.
type Variant struct{}

// New returns the vanilla variant.
func New() Variant { return Variant{} }

// Describe returns the shared encoder schema (nn.EncoderParams) with the seed's defaults.
func (Variant) Describe() variant.Description {
	return variant.Description{
		Name:       "vanilla",
		Version:    Version,
		Summary:    "multi-head softmax attention, post-LN, ReLU FFN, sinusoidal positions (the seed's encoder)",
		Paper:      "https://arxiv.org/abs/1706.03762",
		Complexity: "O(n²)",
		Params:     append(nn.EncoderParams(), nn.CausalParam()),
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("vanilla: %w", err)
	}
	c := nn.NewCtx(ctx, "vanilla", seed)
	c.SetBuildMeta("vanilla", Version, cfg)
	g, err := c.Encoder(e, nn.MultiHeadAttention(e.DModel, cfg.Int("heads")))
	if err != nil {
		return nil, fmt.Errorf("vanilla: %w", err)
	}
	return g, nil
}
