package cpu

import (
	"math"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Fast CPU kernels for ONNX Runtime's com.microsoft Attention and MultiHeadAttention: the
// projections and both attention products go to SGEMM, one (batch, head) matrix per task,
// with the op table's mask rules (graph.AttentionMask). Anything outside the common shapes
// (past state, attention_bias of another shape, packed MultiHeadAttention) runs the
// reference evaluation, which also gives the errors.

func makeMSAttention(n *graph.Node) (kernel, error) {
	heads := int(n.Int("num_heads", 0))
	causal := n.Int("unidirectional", 0) != 0
	filter := attrF(n, "mask_filter_value", -10000)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x, w := in[0], in[1]
		bias, mask, ab := optIn(in, 2), optIn(in, 3), optIn(in, 5)
		if heads < 1 || optIn(in, 4) != nil || len(in) > 6 && in[6] != nil || x == nil || w == nil || x.DType != tensor.Float32 ||
			len(x.Shape) != 3 || len(w.Shape) != 2 || w.Shape[0] != x.Shape[2] || n.Int("do_rotary", 0) != 0 || len(n.Outputs) > 1 {
			return graph.EvalNode(n, in)
		}
		batch, s, d, width := x.Shape[0], x.Shape[1], x.Shape[2], w.Shape[1]
		hq, _, hv, err := graph.AttentionQKVSizes(n, width)
		if err != nil || (bias != nil && bias.Len() != width) || !biasFits(ab, batch, heads, s, s) {
			return graph.EvalNode(n, in)
		}
		m, err := graph.AttentionMask(mask, batch, s, s, filter, causal)
		if err != nil {
			return graph.EvalNode(n, in)
		}
		proj := make([]float32, batch*s*width)
		e.sgemmParallel(e.threads, false, false, batch*s, width, d, 1, x.F32, d, w.F32, width, 0, proj, width)
		if bias != nil {
			for r := 0; r < batch*s; r++ {
				row := proj[r*width:][:width]
				for j, b := range bias.F32 {
					row[j] += b
				}
			}
		}
		out, err := e.alloc(tensor.Float32, []int{batch, s, hv})
		if err != nil {
			return nil, err
		}
		dh := hq / heads
		scale := msScale(n, dh)
		msAttend(e, attendArgs{q: proj, k: proj[hq:], v: proj[2*hq:], qs: width, ks: width, vs: width,
			batch: batch, heads: heads, s: s, t: s, dh: dh, dv: hv / heads, scale: scale, mask: m, bias: ab, out: out.F32})
		return []*tensor.Tensor{out}, nil
	}, nil
}

func makeMSMultiHeadAttention(n *graph.Node) (kernel, error) {
	heads := int(n.Int("num_heads", 0))
	causal := n.Int("unidirectional", 0) != 0
	filter := attrF(n, "mask_filter_value", -10000)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		q, k, v := optIn(in, 0), optIn(in, 1), optIn(in, 2)
		bias, mask, ab := optIn(in, 3), optIn(in, 4), optIn(in, 5)
		if heads < 1 || q == nil || k == nil || v == nil || optIn(in, 6) != nil || optIn(in, 7) != nil || len(n.Outputs) > 1 ||
			len(q.Shape) != 3 || len(k.Shape) != 3 || len(v.Shape) != 3 || q.DType != tensor.Float32 {
			return graph.EvalNode(n, in)
		}
		batch, s, d, t, dv := q.Shape[0], q.Shape[1], q.Shape[2], k.Shape[1], v.Shape[2]
		if k.Shape[0] != batch || v.Shape[0] != batch || k.Shape[2] != d || v.Shape[1] != t || d%heads != 0 || dv%heads != 0 ||
			(bias != nil && bias.Len() != 2*d+dv) || !biasFits(ab, batch, heads, s, t) {
			return graph.EvalNode(n, in)
		}
		m, err := graph.AttentionMask(mask, batch, s, t, filter, causal)
		if err != nil {
			return graph.EvalNode(n, in)
		}
		qd, kd, vd := q.F32, k.F32, v.F32
		if bias != nil {
			qd, kd, vd = addRowBias(qd, bias.F32[:d]), addRowBias(kd, bias.F32[d:2*d]), addRowBias(vd, bias.F32[2*d:])
		}
		out, err := e.alloc(tensor.Float32, []int{batch, s, dv})
		if err != nil {
			return nil, err
		}
		msAttend(e, attendArgs{q: qd, k: kd, v: vd, qs: d, ks: d, vs: dv, batch: batch, heads: heads, s: s, t: t,
			dh: d / heads, dv: dv / heads, scale: msScale(n, d/heads), mask: m, bias: ab, out: out.F32})
		return []*tensor.Tensor{out}, nil
	}, nil
}

// attendArgs describes one attention step over row-major (B, S or T, N·H) operands whose
// rows are qs, ks and vs apart.
type attendArgs struct {
	q, k, v                    []float32
	qs, ks, vs                 int
	batch, heads, s, t, dh, dv int
	scale                      float32
	mask                       []float32 // (B, S, T) additive, or nil
	bias                       *tensor.Tensor
	out                        []float32 // (B, S, N·dv)
}

// msAttend computes softmax(scale·Q·Kᵀ + mask + bias)·V for every (batch, head) matrix.
func msAttend(e *exec, a attendArgs) {
	workpool.Tasks(e.threads, a.batch*a.heads, func(task int) {
		b, h := task/a.heads, task%a.heads
		scores := make([]float32, a.s*a.t)
		q := a.q[b*a.s*a.qs+h*a.dh:]
		k := a.k[b*a.t*a.ks+h*a.dh:]
		e.sgemm(false, true, a.s, a.t, a.dh, a.scale, q, a.qs, k, a.ks, 0, scores, a.t)
		for i := 0; i < a.s; i++ {
			row := scores[i*a.t:][:a.t]
			if a.mask != nil {
				for j, mv := range a.mask[(b*a.s+i)*a.t:][:a.t] {
					row[j] += mv
				}
			}
			if a.bias != nil {
				bb := b
				if a.bias.Shape[0] == 1 {
					bb = 0
				}
				for j, bv := range a.bias.F32[((bb*a.heads+h)*a.s+i)*a.t:][:a.t] {
					row[j] += bv
				}
			}
			mx := float32(math.Inf(-1))
			for _, x := range row {
				mx = max(mx, x)
			}
			var sum float32
			for j, x := range row {
				row[j] = float32(math.Exp(float64(x - mx)))
				sum += row[j]
			}
			inv := 1 / sum
			for j := range row {
				row[j] *= inv
			}
		}
		e.sgemm(false, false, a.s, a.dv, a.t, 1, scores, a.t, a.v[b*a.t*a.vs+h*a.dv:], a.vs, 0, a.out[b*a.s*a.heads*a.dv+h*a.dv:], a.heads*a.dv)
	})
}

// biasFits reports whether attention_bias is absent or (B or 1, N, S, T).
func biasFits(ab *tensor.Tensor, batch, heads, s, t int) bool {
	return ab == nil || (ab.DType == tensor.Float32 && len(ab.Shape) == 4 && (ab.Shape[0] == batch || ab.Shape[0] == 1) &&
		ab.Shape[1] == heads && ab.Shape[2] == s && ab.Shape[3] == t)
}

// addRowBias returns x with b added to each row of len(b).
func addRowBias(x, b []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = v + b[i%len(b)]
	}
	return y
}

// msScale is the scale attribute, or 1/√head_size when it is 0 (absent), as the op table
// defines it.
func msScale(n *graph.Node, headSize int) float32 {
	if a, ok := n.Attrs["scale"]; ok && a.Kind == graph.AttrFloat && a.F != 0 {
		return a.F
	}
	return float32(1 / math.Sqrt(float64(headSize)))
}

// attrF returns the node's float attribute name, or def.
func attrF(n *graph.Node, name string, def float32) float32 {
	if a, ok := n.Attrs[name]; ok && a.Kind == graph.AttrFloat {
		return a.F
	}
	return def
}

// optIn returns in[i], or nil when absent.
func optIn(in []*tensor.Tensor, i int) *tensor.Tensor {
	if i < len(in) {
		return in[i]
	}
	return nil
}
