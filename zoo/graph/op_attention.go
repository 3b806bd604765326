package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Attention (ai.onnx opset 23): softmax(Q·Kᵀ·scale + mask)·V over 4-D (B, heads, seq, head)
// or 3-D (B, seq, hidden) operands, with grouped-query heads (each group of q_num_heads /
// kv_num_heads query heads shares one key/value head), a bool (true = attend) or additive
// float mask broadcast to (B, q_heads, q_seq, total_seq) and padded with -inf up to total_seq,
// an optional causal mask offset by the past length, past key/value caches, softcap (applied
// after the mask, as opset 23 defines) and the optional QK output at qk_matmul_output_mode
// 0 (scaled QKᵀ), 1 (plus mask), 2 (softcapped) or 3 (softmax).

func init() {
	register(&OpDef{
		Name: "Attention", SinceVersion: 23, ThroughVersion: LatestOpset,
		Doc:     "scaled dot-product attention with masks, grouped-query heads and KV caches",
		Inputs:  ps(req("Q"), req("K"), req("V"), opt("attn_mask"), opt("past_key"), opt("past_value")),
		Outputs: ps(req("Y"), opt("present_key"), opt("present_value"), opt("qk_matmul_output")),
		Attrs: []AttrDef{intAttr("is_causal", 0), optIntAttr("kv_num_heads"), optIntAttr("q_num_heads"),
			intAttr("qk_matmul_output_mode", 0), optFloatAttr("scale"), floatAttr("softcap", 0), optIntAttr("softmax_precision")},
		infer: (*nodeCtx).attention,
		Eval:  evalAttention,
		Grad:  NoGradYet,
		Cost: func(n *Node, in, out []TensorType) (OpCost, error) {
			// Two products of (q_seq × total × head) per query head: QKᵀ and P·V.
			q, y := in[0], out[0]
			if len(q.Shape) < 3 || len(out) < 1 {
				return OpCost{}, errors.New("Attention needs 3-D or 4-D operands")
			}
			qe, err := q.elems()
			if err != nil {
				return OpCost{}, err
			}
			k := in[1].Shape
			total := int64(k[len(k)-2])
			if len(k) == 3 {
				total = int64(k[1])
			}
			if len(in) > 4 && len(in[4].Shape) == 4 {
				total += int64(in[4].Shape[2])
			}
			ye, err := y.elems()
			if err != nil {
				return OpCost{}, err
			}
			f, err := mulChecked(qe+ye, total, 2)
			return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, err
		},
	})
}

// AttentionDims are an Attention node's operand sizes in the 4-D layout: batch, query and
// key/value heads, query and new key/value sequence lengths, the past length, the key and
// value head sizes, and whether the operands are 3-D (B, seq, heads·head).
type AttentionDims struct {
	B, QHeads, KVHeads, QSeq, KVSeq, Past, HeadK, HeadV int
	ThreeD                                              bool
}

// Total is the key/value length attended over: the past plus the new keys.
func (d AttentionDims) Total() int { return d.Past + d.KVSeq }

// AttentionShapes checks an Attention node's Q, K, V (and past_key, nil when absent) shapes
// and returns their sizes; the error says which shape is wrong.
func AttentionShapes(n *Node, q, k, v []int, past []int) (AttentionDims, error) {
	var d AttentionDims
	if len(q) != len(k) || len(q) != len(v) || (len(q) != 3 && len(q) != 4) {
		return d, fmt.Errorf("Q, K and V have ranks %d, %d, %d, want all 3 or all 4", len(q), len(k), len(v))
	}
	d.B = q[0]
	if len(q) == 4 {
		d.QHeads, d.QSeq, d.HeadK = q[1], q[2], q[3]
		d.KVHeads, d.KVSeq = k[1], k[2]
		d.HeadV = v[3]
		if k[3] != d.HeadK || v[1] != d.KVHeads || v[2] != d.KVSeq {
			return d, fmt.Errorf("K %v and V %v do not match Q %v", k, v, q)
		}
	} else {
		d.ThreeD = true
		d.QHeads, d.KVHeads = int(attrInt(n, "q_num_heads")), int(attrInt(n, "kv_num_heads"))
		if d.QHeads <= 0 || d.KVHeads <= 0 {
			return d, errors.New("3-D Q, K and V need q_num_heads and kv_num_heads")
		}
		if q[2]%d.QHeads != 0 || k[2]%d.KVHeads != 0 || v[2]%d.KVHeads != 0 {
			return d, fmt.Errorf("hidden sizes Q %d, K %d, V %d are not multiples of the head counts %d, %d", q[2], k[2], v[2], d.QHeads, d.KVHeads)
		}
		d.QSeq, d.HeadK, d.KVSeq, d.HeadV = q[1], q[2]/d.QHeads, k[1], v[2]/d.KVHeads
		if k[2]/d.KVHeads != d.HeadK || v[1] != d.KVSeq {
			return d, fmt.Errorf("K %v and V %v do not match Q %v", k, v, q)
		}
	}
	if k[0] != d.B || v[0] != d.B {
		return d, fmt.Errorf("batch sizes differ: Q %d, K %d, V %d", d.B, k[0], v[0])
	}
	if d.KVHeads <= 0 || d.QHeads%d.KVHeads != 0 {
		return d, fmt.Errorf("q_num_heads %d is not a multiple of kv_num_heads %d", d.QHeads, d.KVHeads)
	}
	if past != nil {
		if len(past) != 4 || past[0] != d.B || past[1] != d.KVHeads || past[3] != d.HeadK {
			return d, fmt.Errorf("past_key has shape %v, want (%d, %d, past, %d)", past, d.B, d.KVHeads, d.HeadK)
		}
		d.Past = past[2]
	}
	return d, nil
}

func (c *nodeCtx) attention() ([]*absVal, error) {
	var sh [3]Shape
	for i := 0; i < 3; i++ {
		v, err := c.req(i)
		if err != nil {
			return nil, err
		}
		if v.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
		sh[i] = v.shape
	}
	for i := 4; i < 6; i++ {
		if v := c.arg(i); v != nil && v.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
	}
	if m := c.arg(3); m != nil && m.dt != tensor.Float32 && m.dt != tensor.Bool {
		return nil, fmt.Errorf("attn_mask %q has dtype %v, want bool or float32", c.name(3), m.dt)
	}
	outs := []*absVal{mk(tensor.Float32, nil), mk(tensor.Float32, nil), mk(tensor.Float32, nil), mk(tensor.Float32, nil)}
	if sh[0] == nil || sh[1] == nil || sh[2] == nil || !fullyKnown(sh[0]) || !fullyKnown(sh[1]) || !fullyKnown(sh[2]) {
		if sh[0] != nil {
			outs[0].shape = make(Shape, len(sh[0]))
			for i := range outs[0].shape {
				outs[0].shape[i] = unknownDim
			}
			outs[0].shape[0] = sh[0][0]
			if len(sh[0]) == 4 {
				outs[0].shape[1], outs[0].shape[2] = sh[0][1], sh[0][2]
			} else {
				outs[0].shape[1] = sh[0][1]
			}
		}
		return outs, nil
	}
	var past []int
	if p := c.arg(4); p != nil && p.shape != nil && fullyKnown(p.shape) {
		past = ints(sizes(p.shape))
	}
	d, err := AttentionShapes(c.n, ints(sizes(sh[0])), ints(sizes(sh[1])), ints(sizes(sh[2])), past)
	if err != nil {
		return nil, err
	}
	fx := func(v ...int) Shape {
		s := make(Shape, len(v))
		for i, x := range v {
			s[i] = Fixed(int64(x))
		}
		return s
	}
	if d.ThreeD {
		outs[0].shape = fx(d.B, d.QSeq, d.QHeads*d.HeadV)
	} else {
		outs[0].shape = fx(d.B, d.QHeads, d.QSeq, d.HeadV)
	}
	if c.arg(4) == nil || past != nil {
		total := d.Past + d.KVSeq
		outs[1].shape, outs[2].shape = fx(d.B, d.KVHeads, total, d.HeadK), fx(d.B, d.KVHeads, total, d.HeadV)
		outs[3].shape = fx(d.B, d.QHeads, d.QSeq, total)
	}
	return outs, nil
}

// evalAttention follows the opset-23 definition in float64.
func evalAttention(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	q, k, v := in[0], in[1], in[2]
	get := func(i int) *tensor.Tensor {
		if i < len(in) {
			return in[i]
		}
		return nil
	}
	mask, pastK, pastV := get(3), get(4), get(5)
	if (pastK == nil) != (pastV == nil) {
		return nil, errors.New("past_key and past_value must be given together")
	}
	var pastShape []int
	if pastK != nil {
		pastShape = pastK.Shape
	}
	d, err := AttentionShapes(n, q.Shape, k.Shape, v.Shape, pastShape)
	if err != nil {
		return nil, err
	}
	if pastV != nil && (len(pastV.Shape) != 4 || pastV.Shape[0] != d.B || pastV.Shape[1] != d.KVHeads || pastV.Shape[2] != d.Past || pastV.Shape[3] != d.HeadV) {
		return nil, fmt.Errorf("past_value has shape %s, want (%d, %d, %d, %d)", tensor.ShapeString(pastV.Shape), d.B, d.KVHeads, d.Past, d.HeadV)
	}
	total := d.Past + d.KVSeq
	// at4 reads element (b, h, s, e) of a Q/K/V operand in either layout (hs heads, width w).
	at4 := func(t *tensor.Tensor, heads, seq, w, b, h, s, e int) float64 {
		if d.ThreeD {
			return f64(t.F32[(b*seq+s)*heads*w+h*w+e])
		}
		return f64(t.F32[((b*heads+h)*seq+s)*w+e])
	}
	presentK, err := newTensor(tensor.Float32, []int{d.B, d.KVHeads, total, d.HeadK})
	if err != nil {
		return nil, err
	}
	presentV, err := newTensor(tensor.Float32, []int{d.B, d.KVHeads, total, d.HeadV})
	if err != nil {
		return nil, err
	}
	for b := 0; b < d.B; b++ {
		for h := 0; h < d.KVHeads; h++ {
			for s := 0; s < total; s++ {
				for e := 0; e < d.HeadK; e++ {
					o := ((b*d.KVHeads+h)*total+s)*d.HeadK + e
					if s < d.Past {
						presentK.F32[o] = pastK.F32[((b*d.KVHeads+h)*d.Past+s)*d.HeadK+e]
					} else {
						presentK.F32[o] = float32(at4(k, d.KVHeads, d.KVSeq, d.HeadK, b, h, s-d.Past, e))
					}
				}
				for e := 0; e < d.HeadV; e++ {
					o := ((b*d.KVHeads+h)*total+s)*d.HeadV + e
					if s < d.Past {
						presentV.F32[o] = pastV.F32[((b*d.KVHeads+h)*d.Past+s)*d.HeadV+e]
					} else {
						presentV.F32[o] = float32(at4(v, d.KVHeads, d.KVSeq, d.HeadV, b, h, s-d.Past, e))
					}
				}
			}
		}
	}
	bias, err := AttentionBias(mask, d, total)
	if err != nil {
		return nil, err
	}
	scale := 1 / math.Sqrt(float64(d.HeadK))
	if a, ok := n.Attrs["scale"]; ok && a.Kind == AttrFloat {
		scale = f64(a.F)
	}
	softcap := f64(attrFloat(n, "softcap"))
	causal := attrInt(n, "is_causal") != 0
	mode := attrInt(n, "qk_matmul_output_mode")
	if mode < 0 || mode > 3 {
		return nil, fmt.Errorf("qk_matmul_output_mode %d is not 0 to 3", mode)
	}
	yShape := []int{d.B, d.QHeads, d.QSeq, d.HeadV}
	if d.ThreeD {
		yShape = []int{d.B, d.QSeq, d.QHeads * d.HeadV}
	}
	y, err := newTensor(tensor.Float32, yShape)
	if err != nil {
		return nil, err
	}
	qk, err := newTensor(tensor.Float32, []int{d.B, d.QHeads, d.QSeq, total})
	if err != nil {
		return nil, err
	}
	rep := d.QHeads / d.KVHeads
	row := make([]float64, total)
	for b := 0; b < d.B; b++ {
		for h := 0; h < d.QHeads; h++ {
			kh := h / rep
			for i := 0; i < d.QSeq; i++ {
				qkRow := qk.F32[((b*d.QHeads+h)*d.QSeq+i)*total:][:total]
				mx := math.Inf(-1)
				for j := 0; j < total; j++ {
					var dot float64
					for e := 0; e < d.HeadK; e++ {
						dot += at4(q, d.QHeads, d.QSeq, d.HeadK, b, h, i, e) * f64(presentK.F32[((b*d.KVHeads+kh)*total+j)*d.HeadK+e])
					}
					s := dot * scale
					if mode == 0 {
						qkRow[j] = float32(s)
					}
					s += bias(b, h, i, j)
					if causal && j > i+d.Past {
						s = math.Inf(-1)
					}
					if mode == 1 {
						qkRow[j] = float32(s)
					}
					if softcap > 0 {
						s = softcap * math.Tanh(s/softcap)
					}
					if mode == 2 {
						qkRow[j] = float32(s)
					}
					row[j] = s
					mx = math.Max(mx, s)
				}
				var sum float64
				for j := range row {
					row[j] = math.Exp(row[j] - mx)
					sum += row[j]
				}
				for j := range row {
					row[j] /= sum
					if mode == 3 {
						qkRow[j] = float32(row[j])
					}
				}
				for e := 0; e < d.HeadV; e++ {
					var acc float64
					for j := 0; j < total; j++ {
						acc += row[j] * f64(presentV.F32[((b*d.KVHeads+kh)*total+j)*d.HeadV+e])
					}
					if d.ThreeD {
						y.F32[(b*d.QSeq+i)*d.QHeads*d.HeadV+h*d.HeadV+e] = float32(acc)
					} else {
						y.F32[((b*d.QHeads+h)*d.QSeq+i)*d.HeadV+e] = float32(acc)
					}
				}
			}
		}
	}
	return []*tensor.Tensor{y, presentK, presentV, qk}, nil
}

// AttentionBias returns the additive mask at (b, h, i, j): the float mask's value or, for a
// bool mask, 0 where true and -inf where false, broadcast from the right to (B, q_heads,
// q_seq, total) and -inf beyond a last dimension shorter than total. A nil mask gives 0; a
// mask that does not broadcast is an error.
func AttentionBias(mask *tensor.Tensor, d AttentionDims, total int) (func(b, h, i, j int) float64, error) {
	if mask == nil {
		return func(b, h, i, j int) float64 { return 0 }, nil
	}
	r := len(mask.Shape)
	if r == 0 || r > 4 {
		return nil, fmt.Errorf("attn_mask has rank %d, want 1 to 4", r)
	}
	full := []int{d.B, d.QHeads, d.QSeq, total}
	m4 := []int{1, 1, 1, 1}
	copy(m4[4-r:], mask.Shape)
	for a := 0; a < 4; a++ {
		if m4[a] != 1 && m4[a] != full[a] && !(a == 3 && m4[a] < total) {
			return nil, fmt.Errorf("attn_mask has shape %s, which does not broadcast to (%d, %d, %d, %d)", tensor.ShapeString(mask.Shape), full[0], full[1], full[2], full[3])
		}
	}
	st := []int{m4[1] * m4[2] * m4[3], m4[2] * m4[3], m4[3], 1}
	idx := func(x, a int) int {
		if m4[a] == 1 {
			return 0
		}
		return x * st[a]
	}
	last := m4[3]
	return func(b, h, i, j int) float64 {
		if last != 1 && j >= last {
			return math.Inf(-1)
		}
		jj := j
		if last == 1 {
			jj = 0
		}
		o := idx(b, 0) + idx(h, 1) + idx(i, 2) + jj
		if mask.DType == tensor.Bool {
			if mask.Bool[o] {
				return 0
			}
			return math.Inf(-1)
		}
		return f64(mask.F32[o])
	}, nil
}
