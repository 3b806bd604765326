package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Clip (opset 13's form: min and max as optional scalar inputs) and HardSigmoid, the
// activations of mobile convolutional front ends (ReLU6, hard-swish).

func init() {
	register(&OpDef{
		Name: "Clip", SinceVersion: 13, ThroughVersion: LatestOpset,
		Doc:     "min(max(x, min), max) with optional scalar min and max inputs",
		Inputs:  ps(req("input"), opt("min"), opt("max")),
		Outputs: ps(req("output")),
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if !isNumeric(x.dt) {
				return nil, fmt.Errorf("input %q has dtype %v, want a number type", c.name(0), x.dt)
			}
			for _, i := range []int{1, 2} {
				if v := c.arg(i); v != nil {
					if v.dt != x.dt {
						return nil, fmt.Errorf("%q has dtype %v, input has %v", c.name(i), v.dt, x.dt)
					}
					if v.shape != nil && len(v.shape) != 0 && !(len(v.shape) == 1 && v.shape[0].Size == 1) {
						return nil, fmt.Errorf("%q has shape %v, want a scalar", c.name(i), v.shape)
					}
				}
			}
			return one(mk(x.dt, cloneShape(x.shape))), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x, lo, hi := in[0], optIn(in, 1), optIn(in, 2)
			out := x.Clone()
			if x.DType.IsFloat() {
				l, h := float32(math.Inf(-1)), float32(math.Inf(1))
				if lo != nil {
					l = lo.F32[0]
				}
				if hi != nil {
					h = hi.F32[0]
				}
				for i, v := range out.F32 {
					out.F32[i] = min(max(v, l), h) // NaN stays NaN (Go's min and max propagate it)
				}
				return []*tensor.Tensor{out}, nil
			}
			l, h := int64(math.MinInt64), int64(math.MaxInt64)
			if lo != nil {
				l = lo.I64[0]
			}
			if hi != nil {
				h = hi.I64[0]
			}
			for i, v := range out.I64 {
				out.I64[i] = min(max(v, l), h)
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost: perOutput(2),
		Grad: NoGradYet,
	})
	register(&OpDef{
		Name: "HardSigmoid", SinceVersion: 6, ThroughVersion: LatestOpset,
		Doc:    "max(0, min(1, alpha · x + beta))",
		Inputs: ps(req("X")), Outputs: ps(req("Y")),
		Attrs: []AttrDef{floatAttr("alpha", 0.2), floatAttr("beta", 0.5)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if err := c.wantFloats(0); err != nil {
				return nil, err
			}
			return one(mk(tensor.Float32, cloneShape(x.shape))), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a, b := attrFloat(n, "alpha"), attrFloat(n, "beta")
			out := in[0].Clone()
			for i, v := range out.F32 {
				out.F32[i] = max(0, min(1, a*v+b))
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost: perOutput(3),
		Grad: NoGradYet,
	})
}
