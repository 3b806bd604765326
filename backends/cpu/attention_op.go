package cpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// makeAttentionOp implements ONNX's Attention (opset 23) directly: the shapes and the mask are
// graph's (AttentionShapes, AttentionBias); each query row is one task (scores, mask, causal
// cut, softcap, softmax, weighted sum of V), accumulated in float64. The fused attention of
// attention.go serves zoo's own decomposed graphs; routing this op to it is left for later.
func makeAttentionOp(n *graph.Node) (kernel, error) {
	causal := n.Int("is_causal", 0) != 0
	mode := n.Int("qk_matmul_output_mode", 0)
	if mode < 0 || mode > 3 {
		return nil, unsupported("qk_matmul_output_mode %d is not 0 to 3", mode)
	}
	softcap := float64(n.Float("softcap", 0))
	scaleAttr, hasScale := n.Attrs["scale"]
	nout := len(n.Outputs)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 3); err != nil {
			return nil, err
		}
		get := func(i int) *tensor.Tensor {
			if i < len(in) {
				return in[i]
			}
			return nil
		}
		q, k, v, mask, pastK, pastV := in[0], in[1], in[2], get(3), get(4), get(5)
		for _, t := range []*tensor.Tensor{q, k, v, pastK, pastV} {
			if t != nil && t.DType != tensor.Float32 {
				return nil, fmt.Errorf("dtype %v is not supported (float32 is)", t.DType)
			}
		}
		if (pastK == nil) != (pastV == nil) {
			return nil, errors.New("past_key and past_value must be given together")
		}
		var pastShape []int
		if pastK != nil {
			pastShape = pastK.Shape
		}
		d, err := graph.AttentionShapes(n, q.Shape, k.Shape, v.Shape, pastShape)
		if err != nil {
			return nil, err
		}
		if pastV != nil && !tensor.SameShape(pastV.Shape, []int{d.B, d.KVHeads, d.Past, d.HeadV}) {
			return nil, fmt.Errorf("past_value has shape %s, want (%d, %d, %d, %d)", tensor.ShapeString(pastV.Shape), d.B, d.KVHeads, d.Past, d.HeadV)
		}
		total := d.Total()
		bias, err := graph.AttentionBias(mask, d, total)
		if err != nil {
			return nil, err
		}
		scale := 1 / math.Sqrt(float64(d.HeadK))
		if hasScale && scaleAttr.Kind == graph.AttrFloat {
			scale = float64(scaleAttr.F)
		}
		pk, err := presentCache(e, d, total, d.HeadK, pastK, k)
		if err != nil {
			return nil, err
		}
		pv, err := presentCache(e, d, total, d.HeadV, pastV, v)
		if err != nil {
			return nil, err
		}
		yShape := []int{d.B, d.QHeads, d.QSeq, d.HeadV}
		if d.ThreeD {
			yShape = []int{d.B, d.QSeq, d.QHeads * d.HeadV}
		}
		y, err := e.alloc(tensor.Float32, yShape)
		if err != nil {
			return nil, err
		}
		var qk *tensor.Tensor
		if nout > 3 {
			if qk, err = e.alloc(tensor.Float32, []int{d.B, d.QHeads, d.QSeq, total}); err != nil {
				return nil, err
			}
		}
		rep := d.QHeads / d.KVHeads
		rows := d.B * d.QHeads * d.QSeq
		workpool.For(e.threads, rows, max(1, elemGrain/max(1, total*(d.HeadK+d.HeadV))), func(lo, hi int) {
			p := make([]float64, total)
			qrow := make([]float64, d.HeadK)
			acc := make([]float64, d.HeadV)
			for r := lo; r < hi; r++ {
				b, h, i := r/(d.QHeads*d.QSeq), (r/d.QSeq)%d.QHeads, r%d.QSeq
				kh := h / rep
				for c := 0; c < d.HeadK; c++ {
					if d.ThreeD {
						qrow[c] = float64(q.F32[(b*d.QSeq+i)*d.QHeads*d.HeadK+h*d.HeadK+c])
					} else {
						qrow[c] = float64(q.F32[((b*d.QHeads+h)*d.QSeq+i)*d.HeadK+c])
					}
				}
				var qkRow []float32
				if qk != nil {
					qkRow = qk.F32[r*total : (r+1)*total]
				}
				mx := math.Inf(-1)
				kbase := (b*d.KVHeads + kh) * total
				for j := 0; j < total; j++ {
					kr := pk[(kbase+j)*d.HeadK : (kbase+j+1)*d.HeadK]
					var dot float64
					for c, x := range qrow {
						dot += x * float64(kr[c])
					}
					s := dot * scale
					if mode == 0 && qkRow != nil {
						qkRow[j] = float32(s)
					}
					s += bias(b, h, i, j)
					if causal && j > i+d.Past {
						s = math.Inf(-1)
					}
					if mode == 1 && qkRow != nil {
						qkRow[j] = float32(s)
					}
					if softcap > 0 {
						s = softcap * math.Tanh(s/softcap)
					}
					if mode == 2 && qkRow != nil {
						qkRow[j] = float32(s)
					}
					p[j] = s
					mx = math.Max(mx, s)
				}
				var sum float64
				for j := range p {
					p[j] = math.Exp(p[j] - mx)
					sum += p[j]
				}
				for c := range acc {
					acc[c] = 0
				}
				for j := range p {
					p[j] /= sum
					if mode == 3 && qkRow != nil {
						qkRow[j] = float32(p[j])
					}
					vr := pv[(kbase+j)*d.HeadV : (kbase+j+1)*d.HeadV]
					for c := range acc {
						acc[c] += p[j] * float64(vr[c])
					}
				}
				for c, a := range acc {
					if d.ThreeD {
						y.F32[(b*d.QSeq+i)*d.QHeads*d.HeadV+h*d.HeadV+c] = float32(a)
					} else {
						y.F32[r*d.HeadV+c] = float32(a)
					}
				}
			}
		})
		outs := []*tensor.Tensor{y}
		if nout > 1 {
			t, err := tensor.FromFloat32(pk, d.B, d.KVHeads, total, d.HeadK)
			if err != nil {
				return nil, err
			}
			outs = append(outs, t)
		}
		if nout > 2 {
			t, err := tensor.FromFloat32(pv, d.B, d.KVHeads, total, d.HeadV)
			if err != nil {
				return nil, err
			}
			outs = append(outs, t)
		}
		if nout > 3 {
			outs = append(outs, qk)
		}
		return outs, nil
	}, nil
}

// presentCache returns the (B, kv_heads, total, w) cache: the past rows, then the new keys
// (or values) in the 4-D layout.
func presentCache(e *exec, d graph.AttentionDims, total, w int, past, cur *tensor.Tensor) ([]float32, error) {
	out := make([]float32, d.B*d.KVHeads*total*w)
	for b := 0; b < d.B; b++ {
		for h := 0; h < d.KVHeads; h++ {
			dst := out[(b*d.KVHeads+h)*total*w:]
			if past != nil {
				copy(dst, past.F32[(b*d.KVHeads+h)*d.Past*w:(b*d.KVHeads+h+1)*d.Past*w])
			}
			for s := 0; s < d.KVSeq; s++ {
				row := dst[(d.Past+s)*w : (d.Past+s+1)*w]
				if d.ThreeD {
					copy(row, cur.F32[(b*d.KVSeq+s)*d.KVHeads*w+h*w:][:w])
				} else {
					copy(row, cur.F32[((b*d.KVHeads+h)*d.KVSeq+s)*w:][:w])
				}
			}
		}
	}
	return out, nil
}
