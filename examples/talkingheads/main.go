// Command talkingheads is a third-party zoo variant plugin: talking-heads attention
// (Shazeer et al. 2020, https://arxiv.org/abs/2003.02436). The attention logits and the
// attention weights are each mixed across heads by a learned h×h matrix, before and after the
// softmax. Everything else is the seed's encoder.
//
//	go build -o talkingheads . && zoo run talkingheads --registry registry.yaml --preset tiny --input text.txt
package main

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version changes whenever the graph or the initialisation changes.
const Version = "0.1.0"

// TalkingHeads is the variant.
type TalkingHeads struct{}

// Describe returns the encoder schema every zoo variant shares (nn.EncoderParams: d_model,
// heads, layers, ...).
func (TalkingHeads) Describe() variant.Description {
	return variant.Description{
		Name:       "talkingheads",
		Version:    Version,
		Summary:    "talking-heads attention: learned mixing across heads before and after the softmax",
		Paper:      "https://arxiv.org/abs/2003.02436",
		Complexity: "O(n²)",
		Params:     nn.EncoderParams(),
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build returns the encoder with talking-heads attention in every layer.
func (TalkingHeads) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("talkingheads: %w", err)
	}
	c := nn.NewCtx(ctx, "talkingheads", seed)
	c.SetBuildMeta("talkingheads", Version, cfg)
	return c.Encoder(e, attention(e.DModel, cfg.Int("heads")))
}

// attention is talking-heads attention. The mixing matrices proj_logits and proj_weights are
// bias-free Linear(h, h) layers (PyTorch names …self_attn.proj_logits.weight) applied over
// the head axis; the padding bias is added after the logit mixing so padded keys get
// weight 0 in every head.
func attention(d, heads int) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		b, dk := c.B, d/heads
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, true), heads, dk) // (B, h, n, dk)
		k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, true), heads, dk)
		v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, true), heads, dk)
		mix := func(name, s string) string { // (B, h, n, n) → heads last → Linear → back
			t := b.Transpose(s, 0, 2, 3, 1)
			return b.Transpose(c.Linear(prefix+"."+name, t, heads, heads, false), 0, 3, 1, 2)
		}
		logits := b.Div(b.MatMul(q, b.Transpose(k, 0, 1, 3, 2)), b.ConstFloat(float32(math.Sqrt(float64(dk)))))
		logits = b.Add(mix("proj_logits", logits), m.Bias)
		weights := mix("proj_weights", b.Softmax(logits, -1))
		return c.Linear(prefix+".W_O", c.MergeHeads(b.MatMul(weights, v), d), d, d, true)
	}
}

func main() { plugin.Serve(TalkingHeads{}) }
