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
	lo, hi := MinMax0(x.F32)
	scale, zp := DynamicQuantParams(lo, hi)
	y, err := newTensor(tensor.Uint8, x.Shape)
	if err != nil {
		return nil, err
	}
	for i, v := range x.F32 {
		y.I64[i] = int64(DynamicQuantize(v, scale, zp))
	}
	zt := &tensor.Tensor{DType: tensor.Uint8, Shape: []int{}, I64: []int64{int64(zp)}}
	return []*tensor.Tensor{y, tensor.ScalarF(scale), zt}, nil
}

// MinMax0 returns the range DynamicQuantizeLinear quantizes x over: min(0, min x) and
// max(0, max x) (a NaN compares false and is passed over).
func MinMax0(x []float32) (lo, hi float32) {
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// DynamicQuantParams returns DynamicQuantizeLinear's y_scale and y_zero_point for the range
// [lo, hi] (MinMax0 of x): scale = (hi − lo) / 255 and zero point round_half_to_even(−lo /
// scale) clamped to 0..255, in float32 arithmetic as the ONNX definition and ONNX Runtime
// compute them; scale 0 (x all zeros) gives zero point 0. Kernels that fuse the op call it so
// that their answer is the op's.
func DynamicQuantParams(lo, hi float32) (scale float32, zp uint8) {
	scale = (hi - lo) / 255
	if scale != 0 {
		zp = uint8(math.RoundToEven(float64(max(0, min(255, 0-lo/scale)))))
	}
	return scale, zp
}

// DynamicQuantize is DynamicQuantizeLinear's y for one element v: saturate(round half to
// even(v / scale) + zp) into 0..255 (the division in float32), 0 when scale is 0.
func DynamicQuantize(v, scale float32, zp uint8) uint8 {
	if scale == 0 {
		return 0
	}
	return QuantizeU8(v/scale, int32(zp), 0, 255)
}

// QuantizeU8 is saturate(round_half_to_even(q) + zp) into [lo, hi] (bounds within int8 or
// uint8 range, zp within ±255), and 0 for a NaN q: quantize's answer for a float32 q, fast
// (kernels quantize every activation with it; TestQuantizeU8 checks it against quantize).
// Below 2²² in magnitude, adding and subtracting 1.5·2²³ rounds a float32 half to even;
// beyond ±512 the result saturates whatever the rounding.
func QuantizeU8(q float32, zp, lo, hi int32) uint8 {
	const magic = 1 << 23 * 1.5
	switch {
	case q != q:
		return 0
	case q >= 512:
		return uint8(hi)
	case q <= -512:
		return uint8(lo)
	}
	r := int32(float32(float32(q+magic)-magic)) + zp
	return uint8(max(lo, min(hi, r)))
}
