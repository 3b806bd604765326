package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// ConvInteger: Conv of (x − x_zero_point) with (w − w_zero_point) in int32, the convolution
// ONNX Runtime's dynamic quantization writes (with DynamicQuantizeLinear before it).

func init() {
	register(&OpDef{
		Name: "ConvInteger", SinceVersion: 10, ThroughVersion: LatestOpset,
		Doc:     "int32 Conv of (x − x_zero_point) and (w − w_zero_point), int8/uint8, with Conv's strides, dilations, pads, auto_pad and groups",
		Inputs:  ps(req("x"), req("w"), opt("x_zero_point"), opt("w_zero_point")),
		Outputs: ps(req("y")),
		Attrs: []AttrDef{{Name: "auto_pad", Kind: AttrString, Default: String("NOTSET")}, intsAttr("dilations"),
			intAttr("group", 1), intsAttr("kernel_shape"), intsAttr("pads"), intsAttr("strides")},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			for i := 0; i < 4; i++ {
				if v := c.arg(i); v != nil && v.dt != tensor.Int8 && v.dt != tensor.Uint8 {
					return nil, fmt.Errorf("input %q has dtype %v, want int8 or uint8", c.name(i), v.dt)
				}
			}
			if z := c.arg(2); z != nil && (z.dt != c.arg(0).dt || (z.shape != nil && len(z.shape) > 1)) {
				return nil, fmt.Errorf("x_zero_point %q must be a scalar of x's dtype", c.name(2))
			}
			if z := c.arg(3); z != nil && (z.dt != c.arg(1).dt || (z.shape != nil && len(z.shape) > 1)) {
				return nil, fmt.Errorf("w_zero_point %q must be a scalar or (M) vector of w's dtype", c.name(3))
			}
			// The shapes follow Conv's rules; check them there with float stand-ins.
			f := &nodeCtx{concrete: c.concrete, n: c.n, def: c.def, names: c.names,
				in: []*absVal{mk(tensor.Float32, c.arg(0).shape), mk(tensor.Float32, c.arg(1).shape)}}
			out, err := f.conv()
			if err != nil {
				return nil, err
			}
			out[0].dt = tensor.Int32
			return out, nil
		},
		Eval: evalConvInteger,
		Cost: convCost,
		Grad: NoGrad,
	})
}

func evalConvInteger(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, w, xz, wz := in[0], in[1], optIn(in, 2), optIn(in, 3)
	m := w.Shape[0]
	if xz != nil && xz.Len() != 1 {
		return nil, fmt.Errorf("x_zero_point has %d entries, want 1", xz.Len())
	}
	if wz != nil && wz.Len() != 1 && wz.Len() != m {
		return nil, fmt.Errorf("w_zero_point has %d entries for %d output channels", wz.Len(), m)
	}
	per := w.Len() / m
	xv := func(i int) float64 {
		if xz != nil {
			return float64(x.I64[i] - xz.I64[0])
		}
		return float64(x.I64[i])
	}
	wv := func(i int) float64 {
		if wz != nil {
			return float64(w.I64[i] - wz.I64[(i/per)%wz.Len()])
		}
		return float64(w.I64[i])
	}
	// float64 sums of products of integers below 2^8 are exact far beyond any real kernel.
	shape, sums, err := convSums(n, x.Shape, w.Shape, xv, wv)
	if err != nil {
		return nil, err
	}
	y, err := newTensor(tensor.Int32, shape)
	if err != nil {
		return nil, err
	}
	for i, s := range sums {
		y.I64[i] = int64(int32(int64(s)))
	}
	return []*tensor.Tensor{y}, nil
}
