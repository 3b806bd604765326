package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// com.microsoft EmbedLayerNormalization: BERT's embeddings (word + position + segment) and
// their layer norm in one op, with the mask turned into per-sequence key counts.

func init() {
	register(&OpDef{
		Name: "EmbedLayerNormalization", Domain: MicrosoftDomain, SinceVersion: 1, ThroughVersion: 1,
		Doc: "LayerNorm(word[input_ids] + position[position_ids or s] + segment[segment_ids]) · gamma + beta; mask_index = the count of 1s in each row of mask",
		Inputs: ps(req("input_ids"), opt("segment_ids"), req("word_embedding"), req("position_embedding"), opt("segment_embedding"),
			req("gamma"), req("beta"), opt("mask"), opt("position_ids")),
		Outputs: ps(req("output"), opt("mask_index"), opt("embedding_sum")),
		Attrs:   []AttrDef{floatAttr("epsilon", 1e-12), intAttr("mask_index_type", 1)},
		infer:   (*nodeCtx).embedLayerNorm,
		Eval:    evalEmbedLayerNorm,
		Cost:    perOutput(10),
		Grad:    NoGradYet,
	})
}

func (c *nodeCtx) embedLayerNorm() ([]*absVal, error) {
	ids, err := c.req(0)
	if err != nil {
		return nil, err
	}
	for _, i := range []int{0, 1, 7, 8} {
		if v := c.arg(i); v != nil && v.dt != tensor.Int32 {
			return nil, fmt.Errorf("input %q has dtype %v, want int32", c.name(i), v.dt)
		}
	}
	if err := c.wantFloats(2, 3, 4, 5, 6); err != nil {
		return nil, err
	}
	if (c.arg(1) == nil) != (c.arg(4) == nil) {
		return nil, fmt.Errorf("segment_ids and segment_embedding must be given together")
	}
	if err := c.wantRank(0, "input_ids", 2); err != nil {
		return nil, err
	}
	for _, i := range []int{2, 3, 4} {
		if err := c.wantRank(i, "embedding", 2); err != nil {
			return nil, err
		}
	}
	h := dimOf(c.arg(2), 1)
	for _, i := range []int{3, 4} {
		if v := c.arg(i); v != nil {
			if err := sameDim(dimOf(v, 1), h, "embedding widths differ"); err != nil {
				return nil, err
			}
		}
	}
	for _, i := range []int{5, 6} {
		if err := c.wantRank(i, "gamma and beta", 1); err != nil {
			return nil, err
		}
		if err := sameDim(dimOf(c.arg(i), 0), h, "gamma or beta length and the embedding width differ"); err != nil {
			return nil, err
		}
	}
	var out, stat Shape
	if ids.shape != nil {
		out, stat = Shape{ids.shape[0], ids.shape[1], h}, Shape{ids.shape[0]}
	}
	return []*absVal{mk(tensor.Float32, out), mk(tensor.Int32, stat), mk(tensor.Float32, cloneShape(out))}, nil
}

func evalEmbedLayerNorm(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	ids, seg, word, pos, segEmb := in[0], optIn(in, 1), in[2], in[3], optIn(in, 4)
	gamma, beta, mask, posIDs := in[5], in[6], optIn(in, 7), optIn(in, 8)
	batch, s, h := ids.Shape[0], ids.Shape[1], word.Shape[1]
	out, _ := newTensor(tensor.Float32, []int{batch, s, h})
	sum, _ := newTensor(tensor.Float32, []int{batch, s, h})
	row := func(t *tensor.Tensor, id int64, what string) ([]float32, error) {
		if id < 0 || int(id) >= t.Shape[0] {
			return nil, fmt.Errorf("%s id %d is out of range [0, %d)", what, id, t.Shape[0])
		}
		return t.F32[int(id)*h:][:h], nil
	}
	if posIDs != nil && posIDs.Len() != batch*s && posIDs.Len() != s {
		return nil, fmt.Errorf("position_ids of shape %s is not (B, S) or (1, S)", tensor.ShapeString(posIDs.Shape))
	}
	for b := 0; b < batch; b++ {
		for i := 0; i < s; i++ {
			r := b*s + i
			w, err := row(word, ids.I64[r], "word")
			if err != nil {
				return nil, err
			}
			p := int64(i)
			if posIDs != nil {
				p = posIDs.I64[r%posIDs.Len()]
			}
			pe, err := row(pos, p, "position")
			if err != nil {
				return nil, err
			}
			var se []float32
			if seg != nil {
				if se, err = row(segEmb, seg.I64[r], "segment"); err != nil {
					return nil, err
				}
			}
			acc := sum.F32[r*h:][:h]
			for j := range acc {
				v := w[j] + pe[j]
				if se != nil {
					v += se[j]
				}
				acc[j] = v
			}
			layerNormRow(out.F32[r*h:][:h], acc, gamma.F32, beta.F32, f64(attrFloat(n, "epsilon")))
		}
	}
	mi := &tensor.Tensor{DType: tensor.Int32, Shape: []int{batch}, I64: make([]int64, batch)}
	if mask != nil {
		for b := 0; b < batch; b++ {
			for i := 0; i < s; i++ {
				if mask.I64[b*s+i] == 1 {
					mi.I64[b]++
				}
			}
		}
	}
	return []*tensor.Tensor{out, mi, sum}, nil
}
