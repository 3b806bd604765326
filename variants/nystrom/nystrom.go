// Package nystrom is Nyström attention (Xiong et al. 2021, "Nyströmformer"): softmax(QKᵀ)V is
// approximated through m landmarks, out = F·A⁺·(B·V) with F = softmax(Q·K̃ᵀ) (n × m),
// A = softmax(Q̃·K̃ᵀ) (m × m), B = softmax(Q̃·Kᵀ + mask) (m × n), where Q̃, K̃ are segment
// means of Q and K and A⁺ is the iterative Moore–Penrose pseudo-inverse
// Z₀ = Aᵀ/c, Z ← ¼·Z(13I − AZ(15I − AZ(7I − AZ))). Cost and memory are O(n·m).
//
// It follows the authors' code, mlpen/Nystromformer code/attention_nystrom.py
// (NystromAttention): Q and K are multiplied by the key mask and by d_k^(-1/4) each; B's logits
// get -1e9 at padded keys; 6 iterations; c = max over the column sums of A. The reference's
// effective init ("original", because its option check is misspelled) takes that maximum over
// the whole batch and every head, so outputs depend on the other sequences of the batch;
// pinv_init=per_matrix takes it per (batch, head) instead (1/‖A‖₁, the reference's unreachable
// "exact" option and xformers' default).
//
// Sequence length. The reference needs n to be a multiple of m and is always run on inputs
// padded to a fixed seq_len. zoo computes exactly what the reference computes on the input
// right-padded with masked positions to n' = m·⌈n/m⌉: the landmarks are the means of m
// consecutive segments of n'/m rows of the masked Q and K, padded positions (key padding and
// the extension alike) counting as zero rows in the mean. Padded keys get -1e9 in B, so they
// add exactly nothing to B·V; F is computed for every query. zoo never falls back to exact
// softmax when n' == m (the reference does); the Nyström formula is always used. Because the
// segments depend on the padded length, a sequence's output depends on how far its batch is
// padded, as in the reference. The optional depthwise-convolution skip on V (conv_kernel_size
// in the reference, off unless configured) is not offered: the IR has no Conv op.
package nystrom

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph or initialisation changes.
// 1.1.0: dropout (training builds only); causal=true is refused (causalRefusal).
const Version = "1.1.0"

// causalRefusal says why nystrom has no causal mode.
const causalRefusal = "causal=true is not possible: each landmark is the mean of a segment of queries or keys, later positions included, so the approximation mixes the future into every row (use vanilla, rope, alibi, relbias, gqa, sparse, linear or performer for clm)"

// Variant is the Nyströmformer encoder.
type Variant struct{}

// New returns the nystrom variant.
func New() Variant { return Variant{} }

// Describe returns the schema: the shared encoder parameters plus attn_bias, num_landmarks,
// pinv_iterations and pinv_init.
func (Variant) Describe() variant.Description {
	causal := nn.CausalParam()
	causal.Doc = "must be false: " + causalRefusal[len("causal=true is "):]
	params := append(nn.EncoderParams(), nn.AttnBiasParam(), causal,
		variant.Param{Name: "num_landmarks", Kind: variant.KindInt, Default: int64(64), Min: variant.MinOf(1),
			Doc: "landmarks m: segment means of Q and K over n'/m rows, n' = n rounded up to a multiple of m (positions past n are masked)"},
		variant.Param{Name: "pinv_iterations", Kind: variant.KindInt, Default: int64(6), Min: variant.MinOf(1),
			Doc: "iterations of the Moore–Penrose pseudo-inverse of the m × m landmark kernel"},
		variant.Param{Name: "pinv_init", Kind: variant.KindString, Default: "original", Choices: []string{"original", "per_matrix"},
			Doc: "Z₀ = Aᵀ/c: original = c is the largest column sum over the whole batch and all heads (the reference; outputs depend on the batch), per_matrix = per (batch, head)"},
	)
	return variant.Description{
		Name:       "nystrom",
		Version:    Version,
		Summary:    "Nyströmformer: softmax attention through m segment-mean landmarks and an iterative pseudo-inverse, O(n·m)",
		Paper:      "https://arxiv.org/abs/2102.03902",
		Complexity: "O(n·m)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Options are the Nyström block's settings.
type Options struct {
	// Bias puts biases on the four projections.
	Bias bool
	// Landmarks is m.
	Landmarks int
	// Iterations is the number of pseudo-inverse iterations.
	Iterations int
	// PerMatrixInit scales Z₀ per (batch, head) instead of over the whole batch.
	PerMatrixInit bool
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("nystrom: %w", err)
	}
	if e.Causal {
		return nil, fmt.Errorf("nystrom: %s", causalRefusal)
	}
	c := nn.NewCtx(ctx, "nystrom", seed)
	c.SetBuildMeta("nystrom", Version, cfg)
	o := Options{Bias: cfg.Bool("attn_bias"), Landmarks: cfg.Int("num_landmarks"), Iterations: cfg.Int("pinv_iterations"),
		PerMatrixInit: cfg.String("pinv_init") == "per_matrix"}
	g, err := c.Encoder(e, Attention(e.DModel, cfg.Int("heads"), o))
	if err != nil {
		return nil, fmt.Errorf("nystrom: %w", err)
	}
	return g, nil
}

// Attention is the Nyström block: W_Q, W_K, W_V, W_O (d → d), heads of width d_k.
func Attention(d, heads int, o Options) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		dk := d / heads
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, o.Bias), heads, dk)
		k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, o.Bias), heads, dk)
		v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, o.Bias), heads, dk)
		out := func() string {
			defer c.B.Scope(prefix)()
			b := c.B
			keep := b.Unsqueeze(b.Where(m.Pad, b.ConstFloat(0), b.ConstFloat(1)), 1, 3) // (B, 1, n, 1)
			root := b.ConstFloat(float32(math.Sqrt(math.Sqrt(float64(dk)))))
			qs := b.Div(b.Mul(q, keep), root)
			ks := b.Div(b.Mul(k, keep), root)
			ql, kl := landmarks(c, qs, o.Landmarks, dk), landmarks(c, ks, o.Landmarks, dk)
			k1 := b.Softmax(b.MatMul(qs, b.Transpose(kl, 0, 1, 3, 2)), -1)                                 // (B, h, n, m)
			k2 := b.Softmax(b.MatMul(ql, b.Transpose(kl, 0, 1, 3, 2)), -1)                                 // (B, h, m, m)
			mask := b.Where(m.Pad, b.ConstFloat(-1e9), b.ConstFloat(0))                                    // (B, n)
			k3 := b.Softmax(b.Add(b.MatMul(ql, b.Transpose(ks, 0, 1, 3, 2)), b.Unsqueeze(mask, 1, 2)), -1) // (B, h, m, n)
			z := pinv(c, k2, o)
			res := b.MatMul(b.MatMul(k1, z), b.MatMul(k3, v))
			return c.MergeHeads(res, d)
		}()
		return c.Linear(prefix+".W_O", out, d, d, o.Bias)
	}
}

// landmarks right-pads x (B, h, n, dk) with zero rows to n' = m·⌈n/m⌉ and returns the means
// of its m segments of n'/m rows, (B, h, m, dk).
func landmarks(c *nn.Ctx, x string, m, dk int) string {
	b := c.B
	shape := b.Shape(x)
	n := b.Slice(shape, b.ConstInts(2), b.ConstInts(3), b.ConstInts(0))
	seg := b.Div(b.Add(n, b.ConstInts(int64(m-1))), b.ConstInts(int64(m)))
	extra := b.Sub(b.Mul(seg, b.ConstInts(int64(m))), n)
	lead := b.Slice(shape, b.ConstInts(0), b.ConstInts(2), b.ConstInts(0))
	zshape := b.Op("Concat", []string{lead, extra, b.ConstInts(int64(dk))}, graph.Attrs{"axis": graph.Int(0)})
	zero, _ := tensor.FromFloat32([]float32{0}, 1)
	zeros := b.Op("ConstantOfShape", []string{zshape}, graph.Attrs{"value": graph.TensorAttr(zero)})
	padded := b.Op("Concat", []string{x, zeros}, graph.Attrs{"axis": graph.Int(2)})
	segs := b.Reshape(padded, 0, 0, int64(m), -1, int64(dk))
	return b.Op("ReduceMean", []string{segs}, graph.Attrs{"axes": graph.Ints(3), "keepdims": graph.Int(0)})
}

// pinv is the reference's iterative_inv of a (B, h, m, m) softmax matrix.
func pinv(c *nn.Ctx, a string, o Options) string {
	b := c.B
	colsum := b.Op("ReduceSum", []string{a, b.ConstInts(-2)}, graph.Attrs{"keepdims": graph.Int(0)}) // (B, h, m)
	var cmax string
	if o.PerMatrixInit {
		cmax = b.Unsqueeze(b.Op("ReduceMax", []string{colsum}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Int(0)}), 2, 3)
	} else {
		cmax = b.Op("ReduceMax", []string{colsum}, graph.Attrs{"keepdims": graph.Int(0)}) // over batch, heads, columns
	}
	z := b.Mul(b.Div(b.ConstFloat(1), cmax), b.Transpose(a, 0, 1, 3, 2))
	eye := func(s float32) string {
		data := make([]float32, o.Landmarks*o.Landmarks)
		for i := 0; i < o.Landmarks; i++ {
			data[i*o.Landmarks+i] = s
		}
		t, _ := tensor.FromFloat32(data, o.Landmarks, o.Landmarks)
		return b.Const(t)
	}
	i7, i13, i15 := eye(7), eye(13), eye(15)
	for it := 0; it < o.Iterations; it++ {
		az := b.MatMul(a, z)
		inner := b.Sub(i15, b.MatMul(az, b.Sub(i7, az)))
		z = b.MatMul(b.Mul(z, b.ConstFloat(0.25)), b.Sub(i13, b.MatMul(az, inner)))
	}
	return z
}
