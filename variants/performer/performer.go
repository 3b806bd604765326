// Package performer is FAVOR+ attention (Choromanski et al. 2020, "Rethinking Attention with
// Performers"): softmax(q·k/√d_k) is approximated by positive random features,
// φ(x) = m^(-1/2)·[exp(ω_r·x̂ - ‖x̂‖²/2 - stab) + ε]_r with x̂ = x·d_k^(-1/4), and attention is
// computed in O(n) as D⁻¹·φ(Q)(φ(K)ᵀV) with D = diag(φ(Q)·Σ_j φ(K_j)).
//
// It follows lucidrains/performer-pytorch (performer_pytorch.py: softmax_kernel,
// gaussian_orthogonal_random_matrix, linear_attention): nb_features defaults to
// int(d_k·ln d_k), ε = 1e-4, no ε in D. The random features Ω (m × d_k) are drawn once from the
// model seed and stored as the buffer self_attn.projection_matrix (never redrawn), so PyTorch
// loads them by name. Construction, as gaussian_orthogonal_random_matrix: ⌈m/d_k⌉ blocks, each
// the transpose of the Q factor of a d_k × d_k standard-normal matrix (zoo orthonormalises
// the columns by modified Gram–Schmidt in float64: Q's columns with R's diagonal positive),
// stacked and cut to m rows; row r is then scaled by the norm of a fresh d_k-dimensional
// Gaussian vector (feature_scaling=chi, the reference's scaling=0) or by √d_k (sqrt_dk,
// scaling=1). Draw order, from the stream named after the buffer: the blocks' Gaussians row
// by row, then the m × d_k Gaussians of the chi norms.
//
// Two choices differ from performer-pytorch on purpose, and the PyTorch fixture does the same:
// the key stabiliser is the maximum of ω·k̂ over the valid (non-padded) keys and features of
// each (batch, head), as google-research's JAX code and newer performer-pytorch releases
// (amax over sequence and features) do, instead of one global maximum over the whole batch,
// so that a sequence's output does not depend on the rest of the batch; and padded keys are
// excluded exactly by zeroing their φ(K) rows, where performer-pytorch zeroes the raw keys
// (whose features ratio·(exp(-stab)+ε) still leak into the sums). The stabilisers cancel
// between numerator and D except through ε. A row with no valid key at all has no
// stabiliser and its output is undefined (NaN), as padded rows are. The encoder around it is
// the seed's.
package performer

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/initrand"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph or initialisation changes.
// 1.1.0: causal (prefix sums by CumSum; key features unstabilised) and dropout (training
// builds only).
const Version = "1.1.0"

// Variant is the Performer (FAVOR+) encoder.
type Variant struct{}

// New returns the performer variant.
func New() Variant { return Variant{} }

// Describe returns the schema: the shared encoder parameters plus attn_bias, nb_features,
// feature_scaling and kernel_eps.
func (Variant) Describe() variant.Description {
	params := append(nn.EncoderParams(), nn.AttnBiasParam(), nn.CausalParam(),
		variant.Param{Name: "nb_features", Kind: variant.KindInt, Default: int64(0), Min: variant.MinOf(0),
			Doc: "random features m per head; 0 means int(d_k·ln d_k) as performer-pytorch (266 for d_k=64)"},
		variant.Param{Name: "feature_scaling", Kind: variant.KindString, Default: "chi", Choices: []string{"chi", "sqrt_dk"},
			Doc: "row norms of the orthogonal features: chi = norms of fresh Gaussian vectors (reference scaling=0), sqrt_dk = √d_k (scaling=1)"},
		variant.Param{Name: "kernel_eps", Kind: variant.KindFloat, Default: 1e-4, Min: variant.MinOf(0),
			Doc: "ε added to every feature, exp(…)+ε (performer-pytorch softmax_kernel eps); queries are scaled by d_k^-1/4 inside the kernel, as the reference"},
	)
	return variant.Description{
		Name:       "performer",
		Version:    Version,
		Summary:    "Performer (FAVOR+): positive orthogonal random features approximate softmax, O(n); features fixed by the seed",
		Paper:      "https://arxiv.org/abs/2009.14794",
		Complexity: "O(n·m)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Features returns the number of random features for head width dk: nb when positive, else
// int(dk·ln dk), at least 1.
func Features(nb, dk int) int {
	if nb > 0 {
		return nb
	}
	return max(1, int(float64(dk)*math.Log(float64(dk))))
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("performer: %w", err)
	}
	heads := cfg.Int("heads")
	c := nn.NewCtx(ctx, "performer", seed)
	c.SetBuildMeta("performer", Version, cfg)
	opts := Options{
		Bias: cfg.Bool("attn_bias"), Features: Features(cfg.Int("nb_features"), e.DModel/heads),
		SqrtScaling: cfg.String("feature_scaling") == "sqrt_dk", Eps: cfg.Float("kernel_eps"),
	}
	g, err := c.Encoder(e, Attention(e.DModel, heads, opts))
	if err != nil {
		return nil, fmt.Errorf("performer: %w", err)
	}
	return g, nil
}

// OrthogonalFeatures draws the (rows × dk) feature matrix Ω from the stream named name, as
// described in the package comment.
func OrthogonalFeatures(seed uint64, name string, rows, dk int, sqrtScaling bool) *tensor.Tensor {
	r := initrand.New(seed, name)
	out := make([]float64, 0, rows*dk)
	for len(out) < rows*dk {
		g := make([]float64, dk*dk) // row-major, as torch.randn((dk, dk))
		for i := range g {
			g[i] = r.Normal()
		}
		// Modified Gram–Schmidt on the columns of g; column j of Q becomes row j of the block.
		q := make([][]float64, dk)
		for j := 0; j < dk; j++ {
			col := make([]float64, dk)
			for i := 0; i < dk; i++ {
				col[i] = g[i*dk+j]
			}
			for p := 0; p < j; p++ {
				dot := 0.0
				for i := range col {
					dot += q[p][i] * col[i]
				}
				for i := range col {
					col[i] -= dot * q[p][i]
				}
			}
			norm := 0.0
			for _, x := range col {
				norm += x * x
			}
			norm = math.Sqrt(norm)
			for i := range col {
				col[i] /= norm
			}
			q[j] = col
		}
		for j := 0; j < dk && len(out) < rows*dk; j++ {
			out = append(out, q[j]...)
		}
	}
	data := make([]float32, rows*dk)
	for i := 0; i < rows; i++ {
		mult := math.Sqrt(float64(dk))
		if !sqrtScaling {
			s := 0.0
			for j := 0; j < dk; j++ {
				x := r.Normal()
				s += x * x
			}
			mult = math.Sqrt(s)
		}
		for j := 0; j < dk; j++ {
			data[i*dk+j] = float32(mult * out[i*dk+j])
		}
	}
	t, _ := tensor.FromFloat32(data, rows, dk)
	return t
}

// Options are the FAVOR+ block's settings.
type Options struct {
	// Bias puts biases on the four projections.
	Bias bool
	// Features is m, the number of random features per head.
	Features int
	// SqrtScaling scales feature rows by √d_k instead of chi-distributed norms.
	SqrtScaling bool
	// Eps is the ε added to every feature.
	Eps float64
}

// Attention is the FAVOR+ block: W_Q, W_K, W_V, W_O (d → d), heads of width d_k, random
// features prefix.projection_matrix (m × d_k) shared by the heads of a layer.
func Attention(d, heads int, o Options) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		dk := d / heads
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, o.Bias), heads, dk)
		k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, o.Bias), heads, dk)
		v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, o.Bias), heads, dk)
		pname := prefix + ".projection_matrix"
		proj := c.Buffer(pname, []int{o.Features, dk}, func() *tensor.Tensor { return OrthogonalFeatures(c.Seed, pname, o.Features, dk, o.SqrtScaling) })
		out := func() string {
			defer c.B.Scope(prefix)()
			b := c.B
			pad := b.Unsqueeze(m.Pad, 1, 3) // (B, 1, n, 1), true at padding
			fq := kernel(c, q, proj, dk, o, "", false)
			fk := kernel(c, k, proj, dk, o, pad, m.Causal)
			if m.Causal {
				return c.MergeHeads(causalAttention(c, fq, fk, v), d)
			}
			// linear_attention: D⁻¹ = 1/(φ(Q)·Σ_j φ(K_j)), context = φ(K)ᵀV, out = φ(Q)·context·D⁻¹
			ksum := b.Op("ReduceSum", []string{fk, b.ConstInts(2)}, graph.Attrs{"keepdims": graph.Int(1)}) // (B, h, 1, m)
			dinv := b.Div(b.ConstFloat(1), b.MatMul(fq, b.Transpose(ksum, 0, 1, 3, 2)))                    // (B, h, n, 1)
			context := b.MatMul(b.Transpose(fk, 0, 1, 3, 2), v)                                            // (B, h, m, dk)
			return c.MergeHeads(b.Mul(b.MatMul(fq, context), dinv), d)
		}()
		return c.Linear(prefix+".W_O", out, d, d, o.Bias)
	}
}

// kernel is performer-pytorch's softmax_kernel for x (B, h, n, dk): queries (pad == "") are
// stabilised by their row maximum, keys by the maximum over valid keys and features of each
// (batch, head), and padded key rows are zeroed. A causal model's keys are not stabilised
// (unstable is set): that maximum would let a later key change an earlier output through
// the ε term. The exponent w·u − |u|²/2 (u = x/d_k^¼) is at most |w|²/2, about d_k/2, so
// unstabilised features stay finite in float32 for heads up to a few hundred wide.
func kernel(c *nn.Ctx, x, proj string, dk int, o Options, pad string, unstable bool) string {
	b := c.B
	norm := math.Pow(float64(dk), -0.25)
	ratio := math.Pow(float64(o.Features), -0.5)
	dd := b.MatMul(b.Mul(x, b.ConstFloat(float32(norm))), b.Transpose(proj, 1, 0)) // (B, h, n, m)
	sq := b.Op("ReduceSum", []string{b.Mul(x, x), b.ConstInts(-1)}, graph.Attrs{"keepdims": graph.Int(1)})
	diag := b.Mul(b.Div(sq, b.ConstFloat(2)), b.ConstFloat(float32(norm*norm))) // (B, h, n, 1)
	var stab string
	switch {
	case unstable:
		stab = b.ConstFloat(0)
	case pad == "":
		stab = b.Op("ReduceMax", []string{dd}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Int(1)})
	default:
		valid := b.Where(pad, b.ConstFloat(float32(math.Inf(-1))), dd)
		stab = b.Op("ReduceMax", []string{valid}, graph.Attrs{"axes": graph.Ints(2, 3), "keepdims": graph.Int(1)})
	}
	e := b.Op("Exp", []string{b.Sub(b.Sub(dd, diag), stab)}, nil)
	phi := b.Mul(b.Add(e, b.ConstFloat(float32(o.Eps))), b.ConstFloat(float32(ratio)))
	if pad != "" {
		phi = b.Where(pad, b.ConstFloat(0), phi)
	}
	return phi
}

// causalAttention is causal FAVOR+ (performer-pytorch's causal_linear_attention without its
// chunking): out_i = φ(q_i)·C_i / (φ(q_i)·z_i) with the prefix sums C_i = Σ_{j≤i} φ(k_j)v_jᵀ
// (m × d_k per position: O(n·m·d_k) memory) and z_i = Σ_{j≤i} φ(k_j), by CumSum over the
// sequence, for fq, fk (B, h, n, m) and v (B, h, n, dk).
func causalAttention(c *nn.Ctx, fq, fk, v string) string {
	b := c.B
	seq := b.Const(tensor.Scalar64(2))
	ctx := b.Op("CumSum", []string{b.Mul(b.Unsqueeze(fk, 4), b.Unsqueeze(v, 3)), seq}, nil)  // (B, h, n, m, dk)
	num := b.Op("Squeeze", []string{b.MatMul(b.Unsqueeze(fq, 3), ctx), b.ConstInts(3)}, nil) // (B, h, n, dk)
	z := b.Op("CumSum", []string{fk, seq}, nil)
	den := b.Op("ReduceSum", []string{b.Mul(fq, z), b.ConstInts(-1)}, graph.Attrs{"keepdims": graph.Int(1)})
	return b.Mul(num, b.Div(b.ConstFloat(1), den))
}
