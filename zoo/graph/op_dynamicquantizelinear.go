package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// DynamicQuantizeLinear quantizes a float32 tensor to uint8 with a scale and zero point
// computed from its own range (which always includes 0), as ONNX defines it.

func init() {
	register(&OpDef{
		Name: "DynamicQuantizeLinear", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:     "uint8 quantization of x with y_scale = (max(0, max x) − min(0, min x)) / 255 and the zero point that maps 0 exactly",
		Inputs:  ps(req("x")),
		Outputs: ps(req("y"), req("y_scale"), req("y_zero_point")),
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if x.dt != tensor.Float32 {
				return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(0), x.dt)
			}
			return []*absVal{mk(tensor.Uint8, cloneShape(x.shape)), mk(tensor.Float32, Shape{}), mk(tensor.Uint8, Shape{})}, nil
		},
		Eval: evalDynamicQuantizeLinear,
		Cost: perInput(5),
		Grad: NoGrad,
	})
}

func evalDynamicQuantizeLinear(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	var lo, hi float32
	for _, v := range x.F32 {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	// float32 arithmetic throughout, as the ONNX definition and ONNX Runtime compute it.
	scale := (hi - lo) / 255
	var zp int64
	if scale != 0 {
		zp = int64(math.RoundToEven(float64(max(0, min(255, 0-lo/scale)))))
	}
	y, err := newTensor(tensor.Uint8, x.Shape)
	if err != nil {
		return nil, err
	}
	for i, v := range x.F32 {
		if scale != 0 {
			y.I64[i] = quantize(float64(v/scale), zp, 0, 255)
		}
	}
	zt := &tensor.Tensor{DType: tensor.Uint8, Shape: []int{}, I64: []int64{zp}}
	return []*tensor.Tensor{y, tensor.ScalarF(scale), zt}, nil
}
