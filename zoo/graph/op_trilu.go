package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Trilu keeps the upper (j − i ≥ k) or lower (j − i ≤ k) triangle of the last two axes and
// zeroes the rest; PyTorch exports torch.triu and torch.tril (causal masks) as it.

func init() {
	register(&OpDef{
		Name: "Trilu", SinceVersion: 14, ThroughVersion: LatestOpset,
		Doc:     "the upper (upper=1: j − i ≥ k) or lower (j − i ≤ k) triangle of the last two axes, zeros elsewhere",
		Inputs:  ps(req("input"), opt("k")),
		Outputs: ps(req("output")),
		Attrs:   []AttrDef{intAttr("upper", 1)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if x.dt.Size() == 0 {
				return nil, fmt.Errorf("input %q has dtype %v", c.name(0), x.dt)
			}
			if x.shape != nil && len(x.shape) < 2 {
				return nil, fmt.Errorf("input %q has shape %v, want rank ≥ 2", c.name(0), x.shape)
			}
			if k := c.arg(1); k != nil {
				if k.dt != tensor.Int64 || (k.shape != nil && len(k.shape) != 0 && !(len(k.shape) == 1 && k.shape[0].Size == 1)) {
					return nil, fmt.Errorf("k %q must be an int64 scalar, got %v %v", c.name(1), k.dt, k.shape)
				}
			}
			return one(mk(x.dt, cloneShape(x.shape))), nil
		},
		Eval: evalTrilu,
		Cost: moveCost,
		Grad: gradTrilu,
	})
}

func evalTrilu(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	var k int64
	if kt := optIn(in, 1); kt != nil {
		k = kt.I64[0]
	}
	upper := attrInt(n, "upper") != 0
	r, c := x.Shape[len(x.Shape)-2], x.Shape[len(x.Shape)-1]
	out, err := newTensor(x.DType, x.Shape)
	if err != nil {
		return nil, err
	}
	for e := 0; e < x.Len(); e++ {
		i, j := int64(e/c%r), int64(e%c)
		if keep := j-i >= k; keep == upper || (!upper && j-i == k) {
			copyElem(out, e, x, e)
		}
	}
	return []*tensor.Tensor{out}, nil
}

// gradTrilu: Trilu keeps or zeroes each element by its position alone, so dx is the same
// Trilu of dy; the diagonal offset k is an integer and gets no gradient.
func gradTrilu(c *GradCtx) ([]string, error) {
	in := []string{c.OutGrads[0]}
	if len(c.Node.Inputs) > 1 {
		in = append(in, c.Node.Input(1))
	}
	g := make([]string, len(c.Node.Inputs))
	g[0] = c.Op("Trilu", in, Attrs{"upper": Int(attrInt(c.Node, "upper"))})
	return g, nil
}
