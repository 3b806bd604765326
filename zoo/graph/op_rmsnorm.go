package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// RMSNormalization (ai.onnx opset 23): x / sqrt(mean(x²) + epsilon) · scale over the axes from
// axis on, computed at stash_type precision (zoo computes in float64 and rounds once).

func init() {
	register(&OpDef{
		Name: "RMSNormalization", SinceVersion: 23, ThroughVersion: LatestOpset,
		Doc:     "x / sqrt(mean(x²) + epsilon) · scale over the axes from axis on",
		Inputs:  ps(req("X"), req("scale")),
		Outputs: ps(req("Y")),
		Attrs:   []AttrDef{intAttr("axis", -1), floatAttr("epsilon", 1e-5), intAttr("stash_type", 1)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			outs, err := c.layerNorm()
			if err != nil {
				return nil, err
			}
			return outs[:1], nil
		},
		Eval: evalRMSNorm,
		Cost: perInput(4),
		Grad: NoGradYet,
	})
}

// evalRMSNorm normalises x's rows (the axes from axis on) by their root mean square.
func evalRMSNorm(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, scale := in[0], in[1]
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	norm := x.Shape[axis:]
	rows, width := NumElements(x.Shape[:axis]), NumElements(norm)
	so, err := normOffsets(norm, scale, "scale")
	if err != nil {
		return nil, err
	}
	eps := f64(attrFloat(n, "epsilon"))
	out, err := newTensor(tensor.Float32, x.Shape)
	if err != nil {
		return nil, err
	}
	for r := 0; r < rows; r++ {
		row := x.F32[r*width : (r+1)*width]
		var ss float64
		for _, v := range row {
			ss += f64(v) * f64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(width)+eps)
		for j, v := range row {
			out.F32[r*width+j] = float32(f64(v) * inv * f64(scale.F32[so[j]]))
		}
	}
	return []*tensor.Tensor{out}, nil
}

// normOffsets returns, for each element of the normalized shape, the offset of t's element
// that broadcasts to it (t must broadcast to norm without growing it).
func normOffsets(norm []int, t *tensor.Tensor, what string) ([]int, error) {
	if s, err := BroadcastShapes(norm, t.Shape); err != nil || !tensor.SameShape(s, norm) {
		return nil, fmt.Errorf("%s has shape %s, which does not broadcast to the normalized shape %s", what, tensor.ShapeString(t.Shape), tensor.ShapeString(norm))
	}
	offs := make([]int, NumElements(norm))
	err := broadcastEach(norm, []*tensor.Tensor{t}, func(o int, off []int) error {
		offs[o] = off[0]
		return nil
	})
	return offs, err
}
