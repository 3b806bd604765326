package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// com.microsoft MultiHeadAttention with projected query (B, S, D), key (B, L, D) and value
// (B, L, Dv), an optional bias added to each, a key padding mask and attention_bias; the
// packed and BNSH layouts and the key/value cache are refused.

func init() {
	register(&OpDef{
		Name: "MultiHeadAttention", Domain: MicrosoftDomain, SinceVersion: 1, ThroughVersion: 1,
		Doc:     "attention of query (B, S, D) over key (B, L, D) and value (B, L, Dv), with bias, key_padding_mask, attention_bias and unidirectional",
		Inputs:  ps(req("query"), opt("key"), opt("value"), opt("bias"), opt("key_padding_mask"), opt("attention_bias"), opt("past_key"), opt("past_value")),
		Outputs: ps(req("output"), opt("present_key"), opt("present_value")),
		Attrs:   []AttrDef{reqIntAttr("num_heads"), floatAttr("mask_filter_value", -10000), floatAttr("scale", 0), intAttr("unidirectional", 0)},
		infer:   (*nodeCtx).msMultiHeadAttention,
		Eval:    evalMSMultiHeadAttention,
		Cost:    attentionCost,
		Grad:    NoGradYet,
	})
}

func (c *nodeCtx) msMultiHeadAttention() ([]*absVal, error) {
	q, err := c.req(0)
	if err != nil {
		return nil, err
	}
	k, v := c.arg(1), c.arg(2)
	if k == nil || v == nil {
		return nil, errors.New("packed QKV or KV (no separate key and value) is not supported: give query, key and value of shape (B, S or L, D)")
	}
	if err := c.wantFloats(0, 1, 2, 3, 5); err != nil {
		return nil, err
	}
	if err := c.noPastPresent([]int{6, 7}, 1); err != nil {
		return nil, err
	}
	if err := c.checkMaskIndex(4); err != nil {
		return nil, err
	}
	for i, what := range []string{"query", "key", "value"} {
		if err := c.wantRank(i, what, 3); err != nil {
			return nil, err
		}
	}
	heads := attrInt(c.n, "num_heads")
	if heads < 1 {
		return nil, fmt.Errorf("num_heads %d must be positive", heads)
	}
	if err := sameDim(dimOf(q, 2), dimOf(k, 2), "query and key widths differ"); err != nil {
		return nil, err
	}
	if err := sameDim(dimOf(k, 1), dimOf(v, 1), "key and value lengths differ"); err != nil {
		return nil, err
	}
	for _, d := range []Dim{dimOf(q, 2), dimOf(v, 2)} {
		if d.Known() && d.Size%heads != 0 {
			return nil, fmt.Errorf("width %d is not a multiple of num_heads %d", d.Size, heads)
		}
	}
	if q.shape == nil {
		return one(mk(tensor.Float32, nil)), nil
	}
	return one(mk(tensor.Float32, Shape{q.shape[0], q.shape[1], dimOf(v, 2)})), nil
}

func evalMSMultiHeadAttention(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	q, k, v, bias, mask, ab := in[0], in[1], in[2], optIn(in, 3), optIn(in, 4), optIn(in, 5)
	batch, s, d := q.Shape[0], q.Shape[1], q.Shape[2]
	t, dv := k.Shape[1], v.Shape[2]
	heads := int(attrInt(n, "num_heads"))
	qd, kd, vd := q.F32, k.F32, v.F32
	if bias != nil {
		if bias.Len() != 2*d+dv {
			return nil, fmt.Errorf("bias has %d entries, want %d", bias.Len(), 2*d+dv)
		}
		add := func(x []float32, b []float32) []float32 {
			y := make([]float32, len(x))
			for i := range x {
				y[i] = x[i] + b[i%len(b)]
			}
			return y
		}
		qd, kd, vd = add(qd, bias.F32[:d]), add(kd, bias.F32[d:2*d]), add(vd, bias.F32[2*d:])
	}
	m, err := AttentionMask(mask, batch, s, t, attrFloat(n, "mask_filter_value"), attrInt(n, "unidirectional") != 0)
	if err != nil {
		return nil, err
	}
	if ab != nil && (len(ab.Shape) != 4 || (ab.Shape[0] != batch && ab.Shape[0] != 1) || ab.Shape[1] != heads || ab.Shape[2] != s || ab.Shape[3] != t) {
		return nil, fmt.Errorf("attention_bias of shape %s is not (B or 1, %d, %d, %d)", tensor.ShapeString(ab.Shape), heads, s, t)
	}
	o := attend(qd, kd, vd, d, d, dv, batch, heads, s, t, d/heads, dv/heads, attnScale(n, d/heads), m, ab)
	out, err := tensor.FromFloat32(o, batch, s, dv)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}
