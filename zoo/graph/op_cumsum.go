package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// CumSum: the running sum along one axis (ONNX CumSum, opset 11 on; 14 only widened its
// types). Causal linear attention builds its prefix sums Σ_{j≤i} φ(k_j)v_jᵀ with it.

func init() {
	register(&OpDef{
		Name: "CumSum", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "the running sum of x along axis (a 0-D or 1-element int tensor); exclusive leaves each element out of its own sum, reverse sums from the end",
		Inputs: ps(req("x"), req("axis")), Outputs: ps(req("y")),
		Attrs:   []AttrDef{intAttr("exclusive", 0), intAttr("reverse", 0)},
		infer:   (*nodeCtx).cumSum,
		Eval:    evalCumSum,
		Cost:    perOutput(1),
		Grad:    gradCumSum,
		Float64: true,
	})
}

// gradCumSum: each x_j enters the sums y_i with i ≥ j (i > j when exclusive), so dx is the
// same running sum of dy taken from the other end: CumSum with reverse flipped. The axis
// input is an integer and gets no gradient.
func gradCumSum(c *GradCtx) ([]string, error) {
	attrs := Attrs{"exclusive": Int(attrInt(c.Node, "exclusive")), "reverse": Int(1 - attrInt(c.Node, "reverse"))}
	return []string{c.Op("CumSum", []string{c.OutGrads[0], c.Node.Input(1)}, attrs), ""}, nil
}

func (c *nodeCtx) cumSum() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if !isNumeric(x.dt) {
		return nil, fmt.Errorf("input %q has dtype %v, want a number type", c.name(0), x.dt)
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "axis", true); err != nil {
		return nil, err
	}
	if a := c.arg(1); a.shape != nil && len(a.shape) == 1 && a.shape[0].Known() && a.shape[0].Size != 1 {
		return nil, fmt.Errorf("axis input %q has %d elements, want one", c.name(1), a.shape[0].Size)
	}
	if x.shape != nil {
		if e := c.arg(1).vals; len(e) == 1 && e[0].known {
			if _, err := NormAxis(e[0].v, len(x.shape)); err != nil {
				return nil, err
			}
		}
	}
	return one(mk(x.dt, cloneShape(x.shape))), nil
}

// CumSumAxis returns the axis of a CumSum node's axis input for an x of rank r, checked: a
// 0-D or 1-element int tensor within [−r, r).
func CumSumAxis(axis *tensor.Tensor, r int) (int, error) {
	if axis == nil || (axis.DType != tensor.Int64 && axis.DType != tensor.Int32) || len(axis.I64) != 1 || len(axis.Shape) > 1 {
		return 0, fmt.Errorf("axis must be a 0-D or 1-element int64 tensor")
	}
	return NormAxis(axis.I64[0], r)
}

// evalCumSum sums float32 in float64 (each output rounded once) and integers in int64,
// wrapped to int32 for Int32.
func evalCumSum(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	if !isFloatVal(x.DType) && !isInt(x.DType) {
		return nil, fmt.Errorf("dtype %v is not supported (float32, float64 and the integer types are)", x.DType)
	}
	axis, err := CumSumAxis(in[1], len(x.Shape))
	if err != nil {
		return nil, err
	}
	out, err := newTensor(x.DType, x.Shape)
	if err != nil {
		return nil, err
	}
	exclusive, reverse := attrInt(n, "exclusive") != 0, attrInt(n, "reverse") != 0
	outer, dim, inner := NumElements(x.Shape[:axis]), x.Shape[axis], NumElements(x.Shape[axis+1:])
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			var fs float64
			var is int64
			for s := 0; s < dim; s++ {
				k := s
				if reverse {
					k = dim - 1 - s
				}
				at := (o*dim+k)*inner + i
				if isFloatVal(x.DType) {
					if !exclusive {
						fs += numAt(x, at)
					}
					setNum(out, at, fs)
					if exclusive {
						fs += numAt(x, at)
					}
					continue
				}
				if !exclusive {
					is += x.I64[at]
				}
				is = wrapInt(x.DType, is)
				out.I64[at] = is
				if exclusive {
					is += x.I64[at]
				}
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}
