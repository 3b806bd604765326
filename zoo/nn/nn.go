package nn

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/initrand"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// The encoder's input and output names, defined by the contract in package variant and
// repeated here because every block of this package writes them.
const (
	InputTokens     = variant.InputTokens
	InputKeyPadding = variant.InputKeyPadding
	OutputHidden    = variant.OutputHidden
	OutputLogits    = variant.OutputLogits
	DimBatch        = variant.DimBatch
	DimSeq          = variant.DimSeq
)

// Ctx carries the builder, the seed and the build's context through the blocks.
type Ctx struct {
	B    *graph.Builder
	Seed uint64
	// Context is the build's context (Variant.Build's ctx): the blocks stop early with its
	// error once it is done.
	Context context.Context
}

// NewCtx starts a graph called name whose weights are drawn from seed, for a build that
// runs under ctx (a nil ctx means context.Background()).
func NewCtx(ctx context.Context, name string, seed uint64) *Ctx {
	if ctx == nil {
		ctx = context.Background()
	}
	return &Ctx{B: graph.NewBuilder(name), Seed: seed, Context: ctx}
}

// uniform adds a parameter drawn U(±bound) under name.
func (c *Ctx) uniform(name string, bound float64, shape ...int) string {
	return c.B.Param(name, initrand.Uniform(c.Seed, name, bound, shape...))
}

// Join joins module path parts with dots, skipping empty ones.
func Join(parts ...any) string {
	out := ""
	for _, p := range parts {
		s := fmt.Sprint(p)
		if s == "" {
			continue
		}
		if out != "" {
			out += "."
		}
		out += s
	}
	return out
}

// Linear applies y = x·Wᵀ + b with W of shape (out, in) named prefix.weight and b named
// prefix.bias, initialised U(±1/√in) like nn.Linear. x may have any leading dimensions.
func (c *Ctx) Linear(prefix, x string, in, out int, bias bool) string {
	bound := 1 / math.Sqrt(float64(in))
	w := c.uniform(prefix+".weight", bound, out, in)
	defer c.B.Scope(prefix)()
	y := c.B.MatMul(x, c.B.Transpose(w, 1, 0))
	if bias {
		y = c.B.Add(y, c.uniform(prefix+".bias", bound, out))
	}
	return y
}

// LayerNorm normalises x over its last axis (width d) with prefix.weight = 1 and
// prefix.bias = 0, like nn.LayerNorm.
func (c *Ctx) LayerNorm(prefix, x string, d int, eps float64) string {
	w := c.B.Param(prefix+".weight", initrand.Fill(1, d))
	b := c.B.Param(prefix+".bias", initrand.Fill(0, d))
	defer c.B.Scope(prefix)()
	return c.B.LayerNorm(x, w, b, float32(eps))
}

// Embedding looks tokens up in prefix.weight (vocab, d), drawn N(0, 1) like nn.Embedding.
func (c *Ctx) Embedding(prefix, tokens string, vocab, d int) string {
	w := c.B.Param(prefix+".weight", initrand.Normal(c.Seed, prefix+".weight", 0, 1, vocab, d))
	defer c.B.Scope(prefix)()
	return c.B.Gather(w, tokens, 0)
}

// SinusoidalTable returns the seed's positional-encoding table (maxLen, d):
// PE[pos, 2i] = sin(pos·10000^(-2i/d)), PE[pos, 2i+1] = cos(pos·10000^(-2i/d)), computed in
// float64 and rounded once. PyTorch computes it in float32 and differs by up to a few 1e-6 at
// large positions, which is why the table travels with the weights as a buffer.
func SinusoidalTable(maxLen, d int) *tensor.Tensor {
	data := make([]float32, maxLen*d)
	for pos := 0; pos < maxLen; pos++ {
		for i := 0; i < d; i += 2 {
			angle := float64(pos) * math.Exp(float64(i)*(-math.Log(10000)/float64(d)))
			data[pos*d+i] = float32(math.Sin(angle))
			if i+1 < d {
				data[pos*d+i+1] = float32(math.Cos(angle))
			}
		}
	}
	t, _ := tensor.FromFloat32(data, maxLen, d)
	return t
}

// SinusoidalPE adds the first n rows of the sinusoidal table (buffer prefix.pe, maxLen × d)
// to x of shape (B, n, d), like the seed's PositionalEncoding.
func (c *Ctx) SinusoidalPE(prefix, x, tokens string, maxLen, d int) string {
	pe := c.B.Buffer(prefix+".pe", SinusoidalTable(maxLen, d))
	defer c.B.Scope(prefix)()
	n := c.SeqLen(tokens)
	rows := c.B.Slice(pe, c.B.ConstInts(0), n, c.B.ConstInts(0))
	return c.B.Add(x, rows)
}

// SeqLen returns a 1-element int64 value holding n, the sequence length of tokens (B, n).
func (c *Ctx) SeqLen(tokens string) string {
	return c.B.Slice(c.B.Shape(tokens), c.B.ConstInts(1), c.B.ConstInts(2), c.B.ConstInts(0))
}

// Mask is the key-padding mask in the forms attention blocks need.
type Mask struct {
	// Pad is the bool input (B, n), true at padding.
	Pad string
	// Bias is the additive float mask (B, 1, 1, n): -inf at padded keys, 0 elsewhere; add it
	// to (B, h, n, n) scores.
	Bias string
}

// KeyPaddingMask turns the bool key-padding input into an additive attention bias.
func (c *Ctx) KeyPaddingMask(pad string) Mask {
	defer c.B.Scope("mask")()
	bias := c.B.Where(pad, c.B.ConstFloat(float32(math.Inf(-1))), c.B.ConstFloat(0))
	return Mask{Pad: pad, Bias: c.B.Unsqueeze(bias, 1, 2)}
}

// Activation applies "relu" or "gelu" (exact, through Erf, as PyTorch's default GELU).
func (c *Ctx) Activation(kind, x string) string {
	switch kind {
	case "relu":
		return c.B.Relu(x)
	case "gelu":
		// 0.5·x·(1 + erf(x/√2))
		e := c.B.Op("Erf", []string{c.B.Div(x, c.B.ConstFloat(float32(math.Sqrt2)))}, nil)
		return c.B.Mul(c.B.Mul(x, c.B.ConstFloat(0.5)), c.B.Add(e, c.B.ConstFloat(1)))
	}
	c.B.Failf("unknown activation %q (want relu or gelu)", kind)
	return x
}

// FFN is the position-wise feed-forward block nn.Sequential(Linear(d, dff), act,
// Linear(dff, d)): parameters prefix.0.* and prefix.2.*.
func (c *Ctx) FFN(prefix, x string, d, dff int, act string) string {
	h := c.Linear(prefix+".0", x, d, dff, true)
	h = c.Activation(act, h)
	return c.Linear(prefix+".2", h, dff, d, true)
}

// SplitHeads reshapes (B, n, h·dk) to (B, h, n, dk).
func (c *Ctx) SplitHeads(x string, heads, dk int) string {
	return c.B.Transpose(c.B.Reshape(x, 0, 0, int64(heads), int64(dk)), 0, 2, 1, 3)
}

// MergeHeads reshapes (B, h, n, dk) back to (B, n, h·dk).
func (c *Ctx) MergeHeads(x string, d int) string {
	return c.B.Reshape(c.B.Transpose(x, 0, 2, 1, 3), 0, 0, int64(d))
}

// ScaledDotProduct computes softmax(q·kᵀ/√dk + bias)·v for q, k, v of shape (B, h, n, dk)
// and an additive bias broadcastable to (B, h, n, n) ("" for none). It divides the scores
// after the product, as the seed does.
func (c *Ctx) ScaledDotProduct(q, k, v, bias string, dk int) string {
	scores := c.B.MatMul(q, c.B.Transpose(k, 0, 1, 3, 2))
	scores = c.B.Div(scores, c.B.ConstFloat(float32(math.Sqrt(float64(dk)))))
	if bias != "" {
		scores = c.B.Add(scores, bias)
	}
	return c.B.MatMul(c.B.Softmax(scores, -1), v)
}
