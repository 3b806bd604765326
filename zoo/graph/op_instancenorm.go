package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// InstanceNormalization and GlobalMaxPool, as convolutional front ends export them.

func init() {
	register(&OpDef{
		Name: "InstanceNormalization", SinceVersion: 6, ThroughVersion: LatestOpset,
		Doc:    "scale · (x − mean) / sqrt(var + epsilon) + B, with mean and variance over the spatial axes of each (n, c) of input (N, C, spatial...)",
		Inputs: ps(req("input"), req("scale"), req("B")), Outputs: ps(req("output")),
		Attrs: []AttrDef{floatAttr("epsilon", 1e-5)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if err := c.wantFloats(0, 1, 2); err != nil {
				return nil, err
			}
			if x.shape == nil {
				return one(mk(tensor.Float32, nil)), nil
			}
			if len(x.shape) < 3 {
				return nil, fmt.Errorf("input %q has shape %v, want (N, C, spatial...)", c.name(0), x.shape)
			}
			for i := 1; i <= 2; i++ {
				if v := c.arg(i); v != nil && v.shape != nil && (len(v.shape) != 1 || !sameShape(v.shape, x.shape[1:2])) {
					return nil, fmt.Errorf("input %q has shape %v, want (%v) like input's channels", c.name(i), v.shape, x.shape[1])
				}
			}
			return one(mk(tensor.Float32, cloneShape(x.shape))), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x, scale, bias := in[0], in[1], in[2]
			out, err := newTensor(tensor.Float32, x.Shape)
			if err != nil {
				return nil, err
			}
			eps := f64(attrFloat(n, "epsilon"))
			ch, inner := x.Shape[1], NumElements(x.Shape[2:])
			for i := 0; i < x.Shape[0]*ch; i++ {
				row := x.F32[i*inner : (i+1)*inner]
				var mean, v float64
				for _, e := range row {
					mean += f64(e)
				}
				mean /= float64(inner)
				for _, e := range row {
					d := f64(e) - mean
					v += d * d
				}
				inv := 1 / math.Sqrt(v/float64(inner)+eps)
				s, b := f64(scale.F32[i%ch]), f64(bias.F32[i%ch])
				for j, e := range row {
					out.F32[i*inner+j] = float32((f64(e)-mean)*inv*s + b)
				}
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost: perInput(8),
		Grad: NoGradYet,
	})
	register(&OpDef{
		Name: "GlobalMaxPool", SinceVersion: 1, ThroughVersion: LatestOpset,
		Doc:    "the maximum over all spatial axes of X (N, C, spatial...), keeping them as size 1 (NaN wins)",
		Inputs: ps(req("X")), Outputs: ps(req("Y")),
		infer: globalPoolShape,
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x := in[0]
			shape := append([]int{}, x.Shape[:2]...)
			for range x.Shape[2:] {
				shape = append(shape, 1)
			}
			out, err := newTensor(tensor.Float32, shape)
			if err != nil {
				return nil, err
			}
			inner := NumElements(x.Shape[2:])
			for i := range out.F32 {
				m := math.Inf(-1)
				for _, v := range x.F32[i*inner : (i+1)*inner] {
					if f := f64(v); f > m || math.IsNaN(f) {
						m = f
					}
				}
				out.F32[i] = float32(m)
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost: perInput(1),
		Grad: NoGradYet,
	})
}

// globalPoolShape is the inference rule of the global pools: (N, C, 1, ...).
func globalPoolShape(c *nodeCtx) ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.wantFloats(0); err != nil {
		return nil, err
	}
	if x.shape == nil {
		return one(mk(tensor.Float32, nil)), nil
	}
	if len(x.shape) < 3 {
		return nil, fmt.Errorf("input %q has shape %v, want (N, C, spatial...)", c.name(0), x.shape)
	}
	out := Shape{x.shape[0], x.shape[1]}
	for range x.shape[2:] {
		out = append(out, Fixed(1))
	}
	return one(mk(tensor.Float32, out)), nil
}
