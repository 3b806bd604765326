package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The attention core that com.microsoft Attention and MultiHeadAttention share, with ONNX
// Runtime's CPU masking rules (attention_helper.h, PrepareMask): a masked key adds
// mask_filter_value (default −10000, not −Inf) to the score; unidirectional masking adds the
// lowest float32 to the scores of later keys.

// AttentionMask builds the additive mask (B, S, T) of com.microsoft Attention and
// MultiHeadAttention from mask_index (int32, nil: none): 1-D (B) key lengths (keys at or
// after the length get filter), 1-D (2B) end and start positions, 2-D (B, T) and 3-D
// (B, S, T) masks with 1 = keep; causal adds the lowest float32 to later keys. It returns
// nil for no mask at all, and an error for a mask of another shape. Backends build their
// masks with it, so ONNX Runtime's rules live here only.
func AttentionMask(mask *tensor.Tensor, batch, s, t int, filter float32, causal bool) ([]float32, error) {
	if mask == nil && !causal {
		return nil, nil
	}
	m := make([]float32, batch*s*t)
	if mask != nil {
		switch {
		case len(mask.Shape) == 1 && (mask.Shape[0] == batch || mask.Shape[0] == 2*batch):
			for b := 0; b < batch; b++ {
				end := int(mask.I64[b])
				start := 0
				if mask.Shape[0] == 2*batch {
					start = min(int(mask.I64[batch+b]), t)
				}
				for q := 0; q < s; q++ {
					row := m[(b*s+q)*t:][:t]
					for j := range row {
						if j >= end || j < start {
							row[j] = filter
						}
					}
				}
			}
		case len(mask.Shape) == 2 && mask.Shape[0] == batch && mask.Shape[1] == t:
			for b := 0; b < batch; b++ {
				for q := 0; q < s; q++ {
					for j := 0; j < t; j++ {
						if mask.I64[b*t+j] <= 0 {
							m[(b*s+q)*t+j] = filter
						}
					}
				}
			}
		case len(mask.Shape) == 3 && mask.Shape[0] == batch && mask.Shape[1] == s && mask.Shape[2] == t:
			for i, v := range mask.I64 {
				if v <= 0 {
					m[i] = filter
				}
			}
		default:
			return nil, fmt.Errorf("mask of shape %s is not (B), (2B), (B, T) or (B, S, T) for B %d, S %d, T %d", tensor.ShapeString(mask.Shape), batch, s, t)
		}
	}
	if causal {
		for b := 0; b < batch; b++ {
			for q := 0; q < s; q++ {
				for j := t - s + q + 1; j < t; j++ {
					m[(b*s+q)*t+j] = -math.MaxFloat32
				}
			}
		}
	}
	return m, nil
}

// attend computes softmax(scale · q·kᵀ + mask + bias)·v per head. q is (B, S, N·H) with head
// n at columns n·H (qStride between rows), k and v likewise with T rows; the result is
// (B, S, N·Hv). bias is (B or 1, N, S, T) or nil.
func attend(q, k, v []float32, qStride, kStride, vStride int, batch, heads, s, t, hq, hv int, scale float32, mask []float32, bias *tensor.Tensor) []float32 {
	out := make([]float32, batch*s*heads*hv)
	scores := make([]float64, t)
	for b := 0; b < batch; b++ {
		for n := 0; n < heads; n++ {
			for i := 0; i < s; i++ {
				qr := q[(b*s+i)*qStride+n*hq:][:hq]
				mx := math.Inf(-1)
				for j := 0; j < t; j++ {
					kr := k[(b*t+j)*kStride+n*hq:][:hq]
					var dot float64
					for c := range qr {
						dot += float64(qr[c]) * float64(kr[c])
					}
					x := float64(float32(dot) * scale)
					if mask != nil {
						x += float64(mask[(b*s+i)*t+j])
					}
					if bias != nil {
						bb := b
						if bias.Shape[0] == 1 {
							bb = 0
						}
						x += float64(bias.F32[((bb*heads+n)*s+i)*t+j])
					}
					scores[j] = x
					mx = math.Max(mx, x)
				}
				var sum float64
				for j := range scores[:t] {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				o := out[(b*s+i)*heads*hv+n*hv:][:hv]
				for c := 0; c < hv; c++ {
					var acc float64
					for j := 0; j < t; j++ {
						acc += scores[j] / sum * float64(v[(b*t+j)*vStride+n*hv+c])
					}
					o[c] = float32(acc)
				}
			}
		}
	}
	return out
}

// attnScale is the scale attribute, or 1/√head_size when it is 0 (absent).
func attnScale(n *Node, headSize int) float32 {
	if s := attrFloat(n, "scale"); s != 0 {
		return s
	}
	return float32(1 / math.Sqrt(float64(headSize)))
}

// checkMaskIndex checks mask_index's dtype (int32) and rank.
func (c *nodeCtx) checkMaskIndex(i int) error {
	m := c.arg(i)
	if m == nil {
		return nil
	}
	if m.dt != tensor.Int32 {
		return fmt.Errorf("mask %q has dtype %v, want int32", c.name(i), m.dt)
	}
	if m.shape != nil && (len(m.shape) < 1 || len(m.shape) > 3) {
		return fmt.Errorf("mask %q has shape %v; zoo reads masks of shape (B), (2B), (B, T) and (B, S, T)", c.name(i), m.shape)
	}
	return nil
}

// noPastPresent refuses the key/value cache inputs and outputs (zoo runs encoders).
func (c *nodeCtx) noPastPresent(inputs []int, firstPresent int) error {
	for _, i := range inputs {
		if c.arg(i) != nil {
			return fmt.Errorf("input %q (past state) is not supported: zoo runs encoders without a key/value cache", c.name(i))
		}
	}
	for i := firstPresent; i < len(c.n.Outputs); i++ {
		if c.n.Outputs[i] != "" {
			return fmt.Errorf("output %q (present state) is not supported: zoo runs encoders without a key/value cache", c.n.Outputs[i])
		}
	}
	return nil
}

// attentionCost is 4·B·S·T·D for the two products plus the input projection when weights
// are given (com.microsoft Attention).
func attentionCost(n *Node, in, out []TensorType) (OpCost, error) {
	if len(in) < 1 || len(out) < 1 || len(in[0].Shape) != 3 {
		return OpCost{}, fmt.Errorf("attention cost needs a (B, S, D) input")
	}
	b, s, d := int64(in[0].Shape[0]), int64(in[0].Shape[1]), int64(in[0].Shape[2])
	t := s
	if n.Op == "MultiHeadAttention" && len(in) > 1 && len(in[1].Shape) == 3 {
		t = int64(in[1].Shape[1])
	}
	f, err := mulChecked(4, b, s, t, int64(out[0].Shape[2]))
	if err != nil {
		return OpCost{}, err
	}
	if n.Op == "Attention" && len(in) > 1 && len(in[1].Shape) == 2 {
		p, err := mulChecked(2, b, s, d, int64(in[1].Shape[1]))
		if err != nil {
			return OpCost{}, err
		}
		f += p
	}
	return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, nil
}
