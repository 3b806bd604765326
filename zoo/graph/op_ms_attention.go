package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// com.microsoft Attention: multi-head self-attention with the Q, K and V projections fused,
// as ONNX Runtime's transformer optimizer writes it for BERT-style encoders.

func init() {
	register(&OpDef{
		Name: "Attention", Domain: MicrosoftDomain, SinceVersion: 1, ThroughVersion: 1,
		Doc:     "self-attention of input (B, S, D) with packed weights (D, Dq+Dk+Dv) and bias, mask_index, unidirectional and attention_bias; no past state",
		Inputs:  ps(req("input"), req("weights"), opt("bias"), opt("mask_index"), opt("past"), opt("attention_bias"), opt("past_sequence_length")),
		Outputs: ps(req("output"), opt("present")),
		Attrs: []AttrDef{reqIntAttr("num_heads"), intsAttr("qkv_hidden_sizes"), intAttr("unidirectional", 0),
			floatAttr("mask_filter_value", -10000), floatAttr("scale", 0), intAttr("do_rotary", 0),
			intAttr("past_present_share_buffer", 0), intAttr("rotary_embedding_dim", 0)},
		infer: (*nodeCtx).msAttention,
		Eval:  evalMSAttention,
		Cost:  attentionCost,
		Grad:  NoGradYet,
	})
}

// AttentionQKVSizes returns com.microsoft Attention's Q, K and V hidden sizes for weights of
// the given width (qkv_hidden_sizes, or three equal parts), or an error.
func AttentionQKVSizes(n *Node, width int) (q, k, v int, err error) {
	a, b, c, err := qkvSizes(n, int64(width))
	return int(a), int(b), int(c), err
}

// qkvSizes returns the Q, K and V hidden sizes from qkv_hidden_sizes or the weights' width
// (three equal parts), checking that the heads divide them.
func qkvSizes(n *Node, width int64) (q, k, v int64, err error) {
	heads := attrInt(n, "num_heads")
	if heads < 1 {
		return 0, 0, 0, fmt.Errorf("num_heads %d must be positive", heads)
	}
	if a, ok := n.Attrs["qkv_hidden_sizes"]; ok {
		if len(a.Ints) != 3 {
			return 0, 0, 0, fmt.Errorf("qkv_hidden_sizes %v must have 3 entries", a.Ints)
		}
		q, k, v = a.Ints[0], a.Ints[1], a.Ints[2]
	} else {
		if width < 0 {
			return -1, -1, -1, nil
		}
		if width%3 != 0 {
			return 0, 0, 0, fmt.Errorf("weights have %d columns, not three equal parts (give qkv_hidden_sizes)", width)
		}
		q, k, v = width/3, width/3, width/3
	}
	if q != k {
		return 0, 0, 0, fmt.Errorf("qkv_hidden_sizes %d, %d, %d: Q and K sizes differ", q, k, v)
	}
	if q%heads != 0 || v%heads != 0 || q <= 0 || v <= 0 {
		return 0, 0, 0, fmt.Errorf("qkv_hidden_sizes %d, %d, %d are not positive multiples of num_heads %d", q, k, v, heads)
	}
	if width >= 0 && q+k+v != width {
		return 0, 0, 0, fmt.Errorf("qkv_hidden_sizes %d+%d+%d do not add up to the weights' %d columns", q, k, v, width)
	}
	return q, k, v, nil
}

func (c *nodeCtx) msAttention() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	w, err := c.req(1)
	if err != nil {
		return nil, err
	}
	if err := c.wantFloats(0, 1, 2, 5); err != nil {
		return nil, err
	}
	if attrInt(c.n, "do_rotary") != 0 {
		return nil, errors.New("do_rotary is not supported")
	}
	if err := c.noPastPresent([]int{4, 6}, 1); err != nil {
		return nil, err
	}
	if err := c.checkMaskIndex(3); err != nil {
		return nil, err
	}
	if err := c.wantRank(0, "input", 3); err != nil {
		return nil, err
	}
	if err := c.wantRank(1, "weights", 2); err != nil {
		return nil, err
	}
	if err := sameDim(dimOf(x, 2), dimOf(w, 0), "input width and weight rows differ"); err != nil {
		return nil, err
	}
	width := int64(-1)
	if d := dimOf(w, 1); d.Known() {
		width = d.Size
	}
	_, _, hv, err := qkvSizes(c.n, width)
	if err != nil {
		return nil, err
	}
	if b := c.arg(2); b != nil && b.shape != nil {
		if len(b.shape) != 1 {
			return nil, fmt.Errorf("bias %q has shape %v, want 1-D", c.name(2), b.shape)
		}
		if err := sameDim(b.shape[0], dimOf(w, 1), "bias length and weight columns differ"); err != nil {
			return nil, err
		}
	}
	if x.shape == nil {
		return one(mk(tensor.Float32, nil)), nil
	}
	od := unknownDim
	if hv > 0 {
		od = Fixed(hv)
	}
	return one(mk(tensor.Float32, Shape{x.shape[0], x.shape[1], od})), nil
}

func evalMSAttention(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, w, bias, mask, ab := in[0], in[1], optIn(in, 2), optIn(in, 3), optIn(in, 5)
	batch, s, d := x.Shape[0], x.Shape[1], x.Shape[2]
	width := w.Shape[1]
	hq, _, hv, err := qkvSizes(n, int64(width))
	if err != nil {
		return nil, err
	}
	heads := int(attrInt(n, "num_heads"))
	// The packed projection, in float64 accumulation: (B·S, D) × (D, width) + bias.
	proj := make([]float32, batch*s*width)
	for r := 0; r < batch*s; r++ {
		for col := 0; col < width; col++ {
			var acc float64
			for i := 0; i < d; i++ {
				acc += float64(x.F32[r*d+i]) * float64(w.F32[i*width+col])
			}
			if bias != nil {
				acc += float64(bias.F32[col])
			}
			proj[r*width+col] = float32(acc)
		}
	}
	m, err := AttentionMask(mask, batch, s, s, attrFloat(n, "mask_filter_value"), attrInt(n, "unidirectional") != 0)
	if err != nil {
		return nil, err
	}
	if ab != nil && (len(ab.Shape) != 4 || (ab.Shape[0] != batch && ab.Shape[0] != 1) || ab.Shape[1] != heads || ab.Shape[2] != s || ab.Shape[3] != s) {
		return nil, fmt.Errorf("attention_bias of shape %s is not (B or 1, %d, %d, %d)", tensor.ShapeString(ab.Shape), heads, s, s)
	}
	sq := int(hq)
	o := attend(proj, proj[sq:], proj[2*sq:], width, width, width, batch, heads, s, s, sq/heads, int(hv)/heads, attnScale(n, sq/heads), m, ab)
	out, err := tensor.FromFloat32(o, batch, s, int(hv))
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}
