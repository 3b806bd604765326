package nn

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/internal/memlimit"
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
//
// Every parameter and buffer the blocks add is counted against the weight budget that the
// build's context carries (memlimit.WithBudget; the plugin server sets it from the memory
// available), before it is allocated. Once the budget is passed, or the context is done, the
// Ctx allocates nothing more: the builder records the error (a *memlimit.OverBudget, whose
// Needed keeps counting the rest of the model, or the context's error), the blocks go on
// returning names so that building code reads straight through, and Build returns the error.
type Ctx struct {
	B    *graph.Builder
	Seed uint64
	// Context is the build's context (Variant.Build's ctx): the blocks stop early with its
	// error once it is done.
	Context context.Context

	name      string
	weights   int64                // bytes of every parameter and buffer asked for so far
	allocated int64                // bytes of those allocated
	over      *memlimit.OverBudget // set once the budget is passed
}

// NewCtx starts a graph called name whose weights are drawn from seed, for a build that
// runs under ctx (a nil ctx means context.Background()).
func NewCtx(ctx context.Context, name string, seed uint64) *Ctx {
	if ctx == nil {
		ctx = context.Background()
	}
	return &Ctx{B: graph.NewBuilder(name), Seed: seed, Context: ctx, name: name}
}

// WeightBytes returns the bytes of every parameter and buffer asked for so far, including
// those not allocated because the build went over its budget.
func (c *Ctx) WeightBytes() int64 { return c.weights }

// float32Bytes is the size of a float32 tensor of shape, saturating at math.MaxInt64
// (negative dimensions count as 0: the tensor's own check reports them).
func float32Bytes(shape []int) int64 {
	n := int64(4)
	for _, d := range shape {
		if d <= 0 {
			return 0
		}
		if n > math.MaxInt64/int64(d) {
			return math.MaxInt64
		}
		n *= int64(d)
	}
	return n
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// reserve counts a float32 tensor of shape under name against the budget and reports
// whether it may be allocated: false once the build has failed, its context is done or the
// budget is passed (the builder then holds the error).
func (c *Ctx) reserve(name string, shape []int) bool {
	c.weights = addSat(c.weights, float32Bytes(shape))
	if c.over != nil {
		c.over.Needed = max(c.over.Needed, c.weights)
		return false
	}
	if c.B.Err() != nil {
		return false
	}
	if c.Context != nil {
		if err := c.Context.Err(); err != nil {
			c.B.Fail(fmt.Errorf("build stopped at %s: %w", name, err))
			return false
		}
		if budget := memlimit.BudgetFrom(c.Context); budget > 0 && c.weights > budget {
			c.overBudget(name, budget, c.weights)
			return false
		}
	}
	c.allocated = addSat(c.allocated, float32Bytes(shape))
	return true
}

// precheck refuses at once, before anything is allocated, when bytes more (the known size
// of parts still to come, named what) would pass the budget.
func (c *Ctx) precheck(what string, bytes int64) {
	if c.over != nil || c.B.Err() != nil || c.Context == nil {
		return
	}
	if budget := memlimit.BudgetFrom(c.Context); budget > 0 && addSat(c.weights, bytes) > budget {
		c.overBudget(what, budget, addSat(c.weights, bytes))
	}
}

func (c *Ctx) overBudget(first string, budget, needed int64) {
	what := c.name
	if what == "" {
		what = "the model"
	}
	c.over = &memlimit.OverBudget{What: what, Needed: needed, Budget: budget, First: first}
	c.B.Fail(c.over)
}

// extrapolate adds bytes that were not counted one by one (layers not built once the budget
// was passed) to the size reported.
func (c *Ctx) extrapolate(bytes int64) {
	c.weights = addSat(c.weights, bytes)
	if c.over != nil {
		c.over.Needed = max(c.over.Needed, c.weights)
		c.over.Estimated = true
	}
}

// placeholder stands for a tensor that was not allocated; the build has already failed, so
// it never reaches a graph that is used.
func placeholder(shape []int) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Float32, Shape: append([]int(nil), shape...)}
}

// Uniform adds a learned parameter drawn U(±bound) from the seed under name, counted against
// the build's weight budget (see Ctx).
func (c *Ctx) Uniform(name string, bound float64, shape ...int) string {
	if !c.reserve(name, shape) {
		return c.B.Param(name, placeholder(shape))
	}
	return c.B.Param(name, initrand.Uniform(c.Seed, name, bound, shape...))
}

// Normal adds a learned parameter drawn N(mean, std²) from the seed under name, counted
// against the build's weight budget.
func (c *Ctx) Normal(name string, mean, std float64, shape ...int) string {
	if !c.reserve(name, shape) {
		return c.B.Param(name, placeholder(shape))
	}
	return c.B.Param(name, initrand.Normal(c.Seed, name, mean, std, shape...))
}

// Fill adds a learned parameter of shape filled with v under name, counted against the
// build's weight budget.
func (c *Ctx) Fill(name string, v float32, shape ...int) string {
	if !c.reserve(name, shape) {
		return c.B.Param(name, placeholder(shape))
	}
	return c.B.Param(name, initrand.Fill(v, shape...))
}

// Buffer adds non-learned float32 state of shape (a table) under name, counted against the
// build's weight budget: compute, which must return a tensor of that shape, runs only when
// the budget allows.
func (c *Ctx) Buffer(name string, shape []int, compute func() *tensor.Tensor) string {
	if !c.reserve(name, shape) {
		return c.B.Buffer(name, placeholder(shape))
	}
	return c.B.Buffer(name, compute())
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
	w := c.Uniform(prefix+".weight", bound, out, in)
	defer c.B.Scope(prefix)()
	y := c.B.MatMul(x, c.B.Transpose(w, 1, 0))
	if bias {
		y = c.B.Add(y, c.Uniform(prefix+".bias", bound, out))
	}
	return y
}

// LayerNorm normalises x over its last axis (width d) with prefix.weight = 1 and
// prefix.bias = 0, like nn.LayerNorm.
func (c *Ctx) LayerNorm(prefix, x string, d int, eps float64) string {
	w := c.Fill(prefix+".weight", 1, d)
	b := c.Fill(prefix+".bias", 0, d)
	defer c.B.Scope(prefix)()
	return c.B.LayerNorm(x, w, b, float32(eps))
}

// Embedding looks tokens up in prefix.weight (vocab, d), drawn N(0, 1) like nn.Embedding.
func (c *Ctx) Embedding(prefix, tokens string, vocab, d int) string {
	w := c.Normal(prefix+".weight", 0, 1, vocab, d)
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
	pe := c.Buffer(prefix+".pe", []int{maxLen, d}, func() *tensor.Tensor { return SinusoidalTable(maxLen, d) })
	defer c.B.Scope(prefix)()
	n := c.SeqLen(tokens)
	rows := c.B.Slice(pe, c.B.ConstInts(0), n, c.B.ConstInts(0))
	return c.B.Add(x, rows)
}

// SeqLen returns a 1-element int64 value holding n, the sequence length of tokens (B, n).
func (c *Ctx) SeqLen(tokens string) string {
	return c.B.Slice(c.B.Shape(tokens), c.B.ConstInts(1), c.B.ConstInts(2), c.B.ConstInts(0))
}

// Mask is the key-padding mask, and the causal mask when the model is causal, in the forms
// attention blocks need.
type Mask struct {
	// Pad is the bool input (B, n), true at padding.
	Pad string
	// Bias is the additive float mask: (B, 1, 1, n), -inf at padded keys and 0 elsewhere, or,
	// when Causal, (B, 1, n, n), also -inf where the key comes after the query. Add it to
	// (B, h, n, n) scores.
	Bias string
	// Causal is set when each query may see only itself and earlier keys; Future is then the
	// (n, n) bool value, true where key j > query i.
	Causal bool
	Future string
}

// KeyPaddingMask turns the bool key-padding input into an additive attention bias.
func (c *Ctx) KeyPaddingMask(pad string) Mask {
	defer c.B.Scope("mask")()
	bias := c.B.Where(pad, c.B.ConstFloat(float32(math.Inf(-1))), c.B.ConstFloat(0))
	return Mask{Pad: pad, Bias: c.B.Unsqueeze(bias, 1, 2)}
}

// CausalMask returns m made causal: Future (n, n), true where key j comes after query i, and
// Bias widened to (B, 1, n, n) with -inf at those entries as well as at padded keys. Every
// query row keeps key 0 (a window's first token is never padding), so no row is all -inf.
func (c *Ctx) CausalMask(m Mask) Mask {
	defer c.B.Scope("mask")()
	b := c.B
	n := c.ScalarSeqLen(m.Pad)
	pos := b.Op("Range", []string{b.Const(tensor.Scalar64(0)), n, b.Const(tensor.Scalar64(1))}, nil)
	future := b.Op("Greater", []string{b.Unsqueeze(pos, 0), b.Unsqueeze(pos, 1)}, nil) // (n, n): j > i
	bias := b.Where(future, b.ConstFloat(float32(math.Inf(-1))), b.ConstFloat(0))
	return Mask{Pad: m.Pad, Bias: b.Add(m.Bias, bias), Causal: true, Future: future}
}

// Dropout is the training graph's dropout of x (B, n, d) at site (a module path): x times the
// graph input DropoutInput(site), (batch, seq, d) float32, that the trainer fills with 0 or
// 1/(1 − p) for each element (lmdata.DropoutFeeds, from the run's seed and the step), so the
// graph stays standard ONNX with no random op and a step's masks are reproducible.
func (c *Ctx) Dropout(site, x string, d int) string {
	keep := c.B.Input(variant.DropoutInput(site), tensor.Float32, graph.Sym(DimBatch), graph.Sym(DimSeq), graph.Fixed(int64(d)))
	defer c.B.Scope(site + ".dropout")()
	return c.B.Mul(x, keep)
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

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
