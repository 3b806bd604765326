package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// QuantizeLinear and DequantizeLinear, per tensor and per axis, int8 and uint8 (and int32
// for dequantization), exactly as ONNX defines them: y = saturate(round_half_to_even(x /
// y_scale) + y_zero_point) and y = (x − x_zero_point) · x_scale.

func init() {
	register(&OpDef{
		Name: "QuantizeLinear", SinceVersion: 13, ThroughVersion: LatestOpset,
		Doc:     "saturate(round_half_to_even(x / y_scale) + y_zero_point) into int8 or uint8, per tensor or along axis",
		Inputs:  ps(req("x"), req("y_scale"), opt("y_zero_point")),
		Outputs: ps(req("y")),
		Attrs:   []AttrDef{intAttr("axis", 1), intAttr("saturate", 1), intAttr("block_size", 0), intAttr("output_dtype", 0)},
		infer:   (*nodeCtx).quantizeLinear,
		Eval:    evalQuantizeLinear,
		Cost:    perInput(3),
		Grad:    NoGrad,
	})
	register(&OpDef{
		Name: "DequantizeLinear", SinceVersion: 13, ThroughVersion: LatestOpset,
		Doc:     "(x − x_zero_point) · x_scale from int8, uint8 or int32 to float32, per tensor or along axis",
		Inputs:  ps(req("x"), req("x_scale"), opt("x_zero_point")),
		Outputs: ps(req("y")),
		Attrs:   []AttrDef{intAttr("axis", 1), intAttr("block_size", 0)},
		infer:   (*nodeCtx).dequantizeLinear,
		Eval:    evalDequantizeLinear,
		Cost:    perInput(2),
		Grad:    NoGradYet,
	})
}

// quantParams checks the scale (input si) and zero point (input si+1) of a (de)quantization
// of x: both scalars (or one-element vectors), or vectors of x's length along axis.
func (c *nodeCtx) quantParams(x *absVal, si int) error {
	if attrInt(c.n, "block_size") != 0 {
		return errors.New("blocked quantization (block_size > 0) is not supported")
	}
	scale := c.arg(si)
	if scale.dt != tensor.Float32 {
		return fmt.Errorf("scale %q has dtype %v, want float32", c.name(si), scale.dt)
	}
	for _, i := range []int{si, si + 1} {
		v := c.arg(i)
		if v == nil || v.shape == nil {
			continue
		}
		if len(v.shape) > 1 {
			return fmt.Errorf("%q has shape %v: scales and zero points are scalars or vectors", c.name(i), v.shape)
		}
		if d := v.shape; len(d) == 1 && x.shape != nil && !(d[0].Known() && d[0].Size == 1) {
			axis, err := NormAxis(attrInt(c.n, "axis"), len(x.shape))
			if err != nil {
				return err
			}
			if d := v.shape[0]; d.Known() {
				if err := sameDim(d, x.shape[axis], fmt.Sprintf("%q has %d entries, x has axis %d of size %v", c.name(i), d.Size, axis, x.shape[axis])); err != nil {
					return err
				}
			}
		}
	}
	if s, z := c.arg(si), c.arg(si+1); z != nil && s.shape != nil && z.shape != nil && len(s.shape) == 1 && len(z.shape) == 1 {
		if err := sameDim(s.shape[0], z.shape[0], "scale and zero point lengths differ"); err != nil {
			return err
		}
	}
	return nil
}

func (c *nodeCtx) quantizeLinear() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if x.dt != tensor.Float32 {
		return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(0), x.dt)
	}
	if err := c.quantParams(x, 1); err != nil {
		return nil, err
	}
	out := tensor.Uint8
	if zp := c.arg(2); zp != nil {
		out = zp.dt
	} else if od := tensor.DType(attrInt(c.n, "output_dtype")); od != tensor.Invalid {
		out = od
	}
	if od := tensor.DType(attrInt(c.n, "output_dtype")); od != tensor.Invalid && od != out {
		return nil, fmt.Errorf("output_dtype %v differs from the zero point's %v", od, out)
	}
	if out != tensor.Uint8 && out != tensor.Int8 {
		return nil, fmt.Errorf("quantizing to %v is not supported (zoo quantizes to int8 and uint8)", out)
	}
	return one(mk(out, cloneShape(x.shape))), nil
}

func (c *nodeCtx) dequantizeLinear() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if _, _, ok := quantRange(x.dt); !ok {
		return nil, fmt.Errorf("input %q has dtype %v, want int8, uint8 or int32", c.name(0), x.dt)
	}
	if zp := c.arg(2); zp != nil && zp.dt != x.dt {
		return nil, fmt.Errorf("zero point %q has dtype %v, x has %v", c.name(2), zp.dt, x.dt)
	}
	if err := c.quantParams(x, 1); err != nil {
		return nil, err
	}
	return one(mk(tensor.Float32, cloneShape(x.shape))), nil
}

// quantIndex returns, for element i of a tensor of shape, the index into a per-axis scale
// or zero point of length n (0 for a per-tensor one).
func quantIndex(shape []int, axis, n int) func(i int) int {
	if n <= 1 {
		return func(int) int { return 0 }
	}
	inner := NumElements(shape[axis+1:])
	return func(i int) int { return (i / inner) % shape[axis] }
}

// quantAxis returns the normalized axis of a per-axis (de)quantization (0 for a per-tensor
// one, whose axis attribute ONNX ignores).
func quantAxis(n *Node, x, scale *tensor.Tensor) (int, error) {
	if len(x.Shape) == 0 || scale.Len() <= 1 {
		return 0, nil
	}
	return NormAxis(attrInt(n, "axis"), len(x.Shape))
}

func evalQuantizeLinear(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, scale, zp := in[0], in[1], optIn(in, 2)
	dt := tensor.Uint8
	if zp != nil {
		dt = zp.DType
	} else if od := tensor.DType(attrInt(n, "output_dtype")); od != tensor.Invalid {
		dt = od
	}
	lo, hi, _ := quantRange(dt)
	axis, err := quantAxis(n, x, scale)
	if err != nil {
		return nil, err
	}
	out, err := newTensor(dt, x.Shape)
	if err != nil {
		return nil, err
	}
	at := quantIndex(x.Shape, axis, scale.Len())
	for i, v := range x.F32 {
		k := at(i)
		var z int64
		if zp != nil {
			z = zp.I64[k]
		}
		out.I64[i] = Quantize(v, scale.F32[k], z, lo, hi)
	}
	return []*tensor.Tensor{out}, nil
}

// Quantize is QuantizeLinear's y for one element v with scale and zero point zp into the
// range [lo, hi] of its type (QuantRange): saturate(round_half_to_even(v / scale) + zp), the
// division in float32 as ONNX Runtime's and the reference's kernels do it. Kernels that fuse
// the op call it so that their answer is the op's.
func Quantize(v, scale float32, zp int64, lo, hi float64) int64 {
	return quantize(float64(v/scale), zp, lo, hi)
}

// QuantRange returns the range of values of an int8, uint8 or int32 tensor (ok false for
// other types).
func QuantRange(dt tensor.DType) (lo, hi float64, ok bool) { return quantRange(dt) }

// Dequantize is DequantizeLinear's y for one element x: float32(x − zp) · scale.
func Dequantize(x, zp int64, scale float32) float32 { return float32(x-zp) * scale }

func evalDequantizeLinear(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, scale, zp := in[0], in[1], optIn(in, 2)
	axis, err := quantAxis(n, x, scale)
	if err != nil {
		return nil, err
	}
	out, err := newTensor(tensor.Float32, x.Shape)
	if err != nil {
		return nil, err
	}
	at := quantIndex(x.Shape, axis, scale.Len())
	for i, v := range x.I64 {
		k := at(i)
		var z int64
		if zp != nil {
			z = zp.I64[k]
		}
		out.F32[i] = Dequantize(v, z, scale.F32[k])
	}
	return []*tensor.Tensor{out}, nil
}
