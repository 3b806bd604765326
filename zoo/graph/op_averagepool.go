package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// AveragePool (1-D to 3-D windows with strides, pads or auto_pad, ceil_mode and
// count_include_pad) and GlobalAveragePool, as convolutional front ends export them.

func init() {
	register(&OpDef{
		Name: "AveragePool", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "the mean over kernel_shape windows of X (N, C, spatial...), with strides, pads or auto_pad, ceil_mode and count_include_pad",
		Inputs: ps(req("X")), Outputs: ps(req("Y")),
		Attrs: []AttrDef{{Name: "auto_pad", Kind: AttrString, Default: String("NOTSET")}, intAttr("ceil_mode", 0),
			intAttr("count_include_pad", 0), intsAttr("dilations"), {Name: "kernel_shape", Kind: AttrInts, Required: true}, intsAttr("pads"), intsAttr("strides")},
		infer: (*nodeCtx).averagePool,
		Eval:  evalAveragePool,
		Cost:  perOutput(9),
		Grad:  NoGradYet,
	})
	register(&OpDef{
		Name: "GlobalAveragePool", SinceVersion: 1, ThroughVersion: LatestOpset,
		Doc:    "the mean over all spatial axes of X (N, C, spatial...), keeping them as size 1",
		Inputs: ps(req("X")), Outputs: ps(req("Y")),
		infer: func(c *nodeCtx) ([]*absVal, error) {
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
		},
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
				var s float64
				for _, v := range x.F32[i*inner : (i+1)*inner] {
					s += float64(v)
				}
				out.F32[i] = float32(s / float64(inner))
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost: perInput(1),
		Grad: NoGradYet,
	})
}

// poolGeometry is Conv's geometry for the kernel_shape window, with ceil_mode's rounding up
// (a window that would start in the end padding is dropped, as ONNX Runtime does).
func poolGeometry(n *Node, spatial []int) (convGeom, error) {
	ks := n.Attrs["kernel_shape"].Ints
	if len(ks) != len(spatial) {
		return convGeom{}, fmt.Errorf("kernel_shape %v has %d entries for %d spatial axes", ks, len(ks), len(spatial))
	}
	kernel := make([]int, len(ks))
	for i, k := range ks {
		if k < 1 {
			return convGeom{}, fmt.Errorf("kernel_shape %v must be positive", ks)
		}
		kernel[i] = int(k)
	}
	g, err := convGeometry(n, spatial, kernel)
	if err != nil || attrInt(n, "ceil_mode") == 0 {
		return g, err
	}
	if a, ok := n.Attrs["auto_pad"]; ok && a.S != "NOTSET" {
		return g, nil
	}
	pads := make([]int, 2*len(spatial))
	if p, ok := n.Attrs["pads"]; ok {
		for i, v := range p.Ints {
			pads[i] = int(v)
		}
	}
	for i, in := range spatial {
		if in < 0 {
			continue
		}
		ext := (kernel[i]-1)*g.dilations[i] + 1
		span := in + pads[i] + pads[len(spatial)+i] - ext
		o := (span+g.strides[i]-1)/g.strides[i] + 1
		if (o-1)*g.strides[i] >= in+pads[i] {
			o--
		}
		g.out[i] = o
	}
	return g, nil
}

func (c *nodeCtx) averagePool() ([]*absVal, error) {
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
	if len(x.shape) < 3 || len(x.shape) > 5 {
		return nil, fmt.Errorf("input %q has shape %v, want (N, C, spatial...) with 1 to 3 spatial axes", c.name(0), x.shape)
	}
	spatial := make([]int, len(x.shape)-2)
	for i := range spatial {
		spatial[i] = int(x.shape[2+i].Size)
	}
	g, err := poolGeometry(c.n, spatial)
	if err != nil {
		return nil, err
	}
	out := Shape{x.shape[0], x.shape[1]}
	for _, o := range g.out {
		switch {
		case o < 0:
			out = append(out, unknownDim)
		case o == 0:
			return nil, errors.New("the pooling window does not fit the input")
		default:
			out = append(out, Fixed(int64(o)))
		}
	}
	return one(mk(tensor.Float32, out)), nil
}

func evalAveragePool(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	r := len(x.Shape) - 2
	g, err := poolGeometry(n, x.Shape[2:])
	if err != nil {
		return nil, err
	}
	pads := make([]int, 2*r)
	if p, ok := n.Attrs["pads"]; ok && len(p.Ints) == 2*r {
		for i, v := range p.Ints {
			pads[i] = int(v)
		}
	}
	includePad := attrInt(n, "count_include_pad") != 0
	out, err := newTensor(tensor.Float32, append(append([]int{}, x.Shape[:2]...), g.out...))
	if err != nil {
		return nil, err
	}
	inSp, outSp, kSp := NumElements(x.Shape[2:]), NumElements(g.out), NumElements(g.kernel)
	inSt := tensor.Strides(x.Shape[2:])
	oIdx, kIdx := make([]int, r), make([]int, r)
	for nc := 0; nc < x.Shape[0]*x.Shape[1]; nc++ {
		for o := 0; o < outSp; o++ {
			for d, rem := r-1, o; d >= 0; d-- {
				oIdx[d], rem = rem%g.out[d], rem/g.out[d]
			}
			var s float64
			count := 0
			for k := 0; k < kSp; k++ {
				for d, rem := r-1, k; d >= 0; d-- {
					kIdx[d], rem = rem%g.kernel[d], rem/g.kernel[d]
				}
				off, inside, inPadded := 0, true, true
				for d := 0; d < r; d++ {
					p := oIdx[d]*g.strides[d] + kIdx[d]*g.dilations[d] - g.padBegin[d]
					if p < -pads[d] || p >= x.Shape[2+d]+pads[r+d] {
						inPadded = false // beyond the explicit pads (ceil_mode's extra window)
					}
					if p < 0 || p >= x.Shape[2+d] {
						inside = false
						continue
					}
					off += p * inSt[d]
				}
				if inside {
					s += float64(x.F32[nc*inSp+off])
					count++
				} else if includePad && inPadded {
					count++
				}
			}
			if count > 0 {
				out.F32[nc*outSp+o] = float32(s / float64(count))
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}
