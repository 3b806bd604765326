package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// com.microsoft SkipLayerNormalization: LayerNorm(input + skip + bias) · gamma + beta over the
// last axis, with the sum before normalization as an optional fourth output.

func init() {
	register(&OpDef{
		Name: "SkipLayerNormalization", Domain: MicrosoftDomain, SinceVersion: 1, ThroughVersion: 1,
		Doc:     "LayerNorm(input + skip + bias) · gamma + beta over the last axis; skip is (B, S, H), (1, S, H) or (S, H)",
		Inputs:  ps(req("input"), req("skip"), req("gamma"), opt("beta"), opt("bias")),
		Outputs: ps(req("output"), opt("mean"), opt("inv_std_var"), opt("input_skip_bias_sum")),
		Attrs:   []AttrDef{floatAttr("epsilon", 1e-12)},
		infer:   (*nodeCtx).skipLayerNorm,
		Eval:    evalSkipLayerNorm,
		Cost:    perInput(10),
		Grad:    NoGradYet,
	})
}

func (c *nodeCtx) skipLayerNorm() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.wantFloats(0, 1, 2, 3, 4); err != nil {
		return nil, err
	}
	if err := c.wantRank(0, "input", 3); err != nil {
		return nil, err
	}
	h := dimOf(x, 2)
	if s := c.arg(1); s != nil && s.shape != nil && x.shape != nil {
		if len(s.shape) < 2 || len(s.shape) > 3 {
			return nil, fmt.Errorf("skip %q has shape %v, want (B, S, H), (1, S, H) or (S, H)", c.name(1), s.shape)
		}
		off := 3 - len(s.shape)
		for i, d := range s.shape {
			if i+off == 0 && d.Known() && d.Size == 1 {
				continue
			}
			if err := sameDim(d, x.shape[i+off], fmt.Sprintf("skip %q has shape %v, input %v", c.name(1), s.shape, x.shape)); err != nil {
				return nil, err
			}
		}
	}
	for _, i := range []int{2, 3, 4} {
		if v := c.arg(i); v != nil && v.shape != nil {
			if len(v.shape) != 1 {
				return nil, fmt.Errorf("%q has shape %v, want (H)", c.name(i), v.shape)
			}
			if err := sameDim(v.shape[0], h, fmt.Sprintf("%q has length %v, hidden size is %v", c.name(i), v.shape[0], h)); err != nil {
				return nil, err
			}
		}
	}
	stat := Shape(nil)
	if x.shape != nil {
		stat = Shape{x.shape[0], x.shape[1], Fixed(1)}
	}
	return []*absVal{mk(tensor.Float32, cloneShape(x.shape)), mk(tensor.Float32, stat), mk(tensor.Float32, cloneShape(stat)), mk(tensor.Float32, cloneShape(x.shape))}, nil
}

func evalSkipLayerNorm(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, skip, gamma, beta, bias := in[0], in[1], in[2], optIn(in, 3), optIn(in, 4)
	h := x.Shape[2]
	rows := x.Len() / h
	skipRows := skip.Len() / h
	var b []float32
	if beta != nil {
		b = beta.F32
	}
	out, _ := newTensor(tensor.Float32, x.Shape)
	sum, _ := newTensor(tensor.Float32, x.Shape)
	mean, _ := newTensor(tensor.Float32, []int{x.Shape[0], x.Shape[1], 1})
	inv, _ := newTensor(tensor.Float32, []int{x.Shape[0], x.Shape[1], 1})
	for r := 0; r < rows; r++ {
		s := sum.F32[r*h : (r+1)*h]
		sk := skip.F32[(r%skipRows)*h:]
		for i := range s {
			// Summed in float32 in this order, as ONNX Runtime does.
			v := x.F32[r*h+i] + sk[i]
			if bias != nil {
				v += bias.F32[i]
			}
			s[i] = v
		}
		m, iv := layerNormRow(out.F32[r*h:(r+1)*h], s, gamma.F32, b, f64(attrFloat(n, "epsilon")))
		mean.F32[r], inv.F32[r] = float32(m), float32(iv)
	}
	return []*tensor.Tensor{out, mean, inv, sum}, nil
}
