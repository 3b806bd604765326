package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Pad widens (or, with negative pads, crops) each axis: ONNX Pad from opset 11, where pads
// became an input (package onnx rewrites opset 2's attribute form), with opset 18's axes input
// and opset 19's wrap mode. PyTorch exports F.pad and the padding of reflect- and
// replicate-padded convolutions (audio front ends) as it.

func init() {
	register(&OpDef{
		Name: "Pad", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc: "pads data by pads = [begin_0, ..., begin_k, end_0, ..., end_k] elements on the axes (all, or the axes input): " +
			"mode constant (constant_value, default 0), reflect (mirrored without the edge), edge (the edge repeated) or wrap (cyclic); negative pads crop",
		Inputs:  ps(req("data"), req("pads"), opt("constant_value"), opt("axes")),
		Outputs: ps(req("output")),
		Attrs:   []AttrDef{{Name: "mode", Kind: AttrString, Default: String("constant")}},
		infer:   (*nodeCtx).pad,
		Eval:    evalPad,
		Cost:    moveCost,
		Grad:    NoGradYet,
	})
}

// padModes are the modes Pad knows.
var padModes = map[string]bool{"constant": true, "reflect": true, "edge": true, "wrap": true}

func (c *nodeCtx) pad() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if x.dt.Size() == 0 {
		return nil, fmt.Errorf("input %q has dtype %v", c.name(0), x.dt)
	}
	if mode := c.n.Str("mode", "constant"); !padModes[mode] {
		return nil, fmt.Errorf("mode %q is not constant, reflect, edge or wrap", mode)
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "pads", false); err != nil {
		return nil, err
	}
	if v := c.arg(2); v != nil {
		if v.dt != x.dt {
			return nil, fmt.Errorf("constant_value %q has dtype %v, want the data's %v", c.name(2), v.dt, x.dt)
		}
		if v.shape != nil && !(len(v.shape) == 0 || (len(v.shape) == 1 && v.shape[0].Size == 1)) {
			return nil, fmt.Errorf("constant_value %q has shape %v, want a scalar", c.name(2), v.shape)
		}
	}
	if c.arg(3) != nil {
		if err := c.checkVec(3, "axes", false); err != nil {
			return nil, err
		}
	}
	if x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	out := make(Shape, len(x.shape))
	for i := range out {
		out[i] = unknownDim
	}
	pads, ok := c.ints(1, "pads")
	var axes []int64
	if ok && c.arg(3) != nil {
		axes, ok = c.ints(3, "axes")
	}
	if !ok {
		return one(mk(x.dt, out)), nil
	}
	full, err := PadAmounts(pads, axes, len(x.shape))
	if err != nil {
		return nil, err
	}
	for i, d := range x.shape {
		if d.Known() {
			n := d.Size + full[i] + full[i+len(x.shape)]
			if n < 0 {
				return nil, fmt.Errorf("pads %v crop axis %d of size %d below zero", pads, i, d.Size)
			}
			out[i] = Fixed(n)
		} else if full[i] == 0 && full[i+len(x.shape)] == 0 {
			out[i] = d
		}
	}
	return one(mk(x.dt, out)), nil
}

// PadAmounts returns Pad's begin and end amounts for every axis of a rank-r input
// ([begin_0..begin_{r-1}, end_0..end_{r-1}]) from its pads input and axes input (nil: all
// axes). It returns an error when pads has not two entries per axis, an axis is out of range
// or repeated.
func PadAmounts(pads, axes []int64, r int) ([]int64, error) {
	if axes == nil {
		axes = make([]int64, r)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, fmt.Errorf("pads has %d entries, want 2 × %d axes", len(pads), len(axes))
	}
	full := make([]int64, 2*r)
	seen := make([]bool, r)
	for k, a := range axes {
		ax, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if seen[ax] {
			return nil, fmt.Errorf("axis %d is given twice", a)
		}
		seen[ax] = true
		full[ax], full[ax+r] = pads[k], pads[k+len(axes)]
	}
	return full, nil
}

// PadSource maps output index o (of an axis of size n padded by begin) to the input index
// Pad reads for mode, or -1 for the constant. It returns an error when reflect cannot fill
// the padding (ONNX requires an axis of at least 2 then) or an edge, reflect or wrap pad has
// nothing to repeat (an empty axis).
func PadSource(mode string, o, begin, n int) (int, error) {
	i := o - begin
	if i >= 0 && i < n {
		return i, nil
	}
	switch mode {
	case "constant":
		return -1, nil
	case "edge":
		if n == 0 {
			return 0, fmt.Errorf("edge padding of an empty axis")
		}
		return min(max(i, 0), n-1), nil
	case "wrap":
		if n == 0 {
			return 0, fmt.Errorf("wrap padding of an empty axis")
		}
		return ((i % n) + n) % n, nil
	}
	// reflect: the mirror image without repeating the edge, period 2(n−1).
	if n < 2 {
		return 0, fmt.Errorf("reflect padding of an axis of size %d (want at least 2)", n)
	}
	p := 2 * (n - 1)
	i = ((i % p) + p) % p
	if i >= n {
		i = p - i
	}
	return i, nil
}

// evalPad builds the output index by index: each axis's source index is PadSource's.
func evalPad(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	var axes []int64
	if a := optIn(in, 3); a != nil {
		axes = a.I64
	}
	full, err := PadAmounts(in[1].I64, axes, r)
	if err != nil {
		return nil, err
	}
	mode := n.Str("mode", "constant")
	shape := make([]int, r)
	for i := range shape {
		shape[i] = x.Shape[i] + int(full[i]) + int(full[i+r])
		if shape[i] < 0 {
			return nil, fmt.Errorf("pads %v crop axis %d of size %d below zero", in[1].I64, i, x.Shape[i])
		}
	}
	out, err := newTensor(x.DType, shape)
	if err != nil {
		return nil, err
	}
	cv := optIn(in, 2)
	// src[ax][o] is the input index along ax for output index o (-1: the constant).
	src := make([][]int, r)
	for ax := range src {
		src[ax] = make([]int, shape[ax])
		for o := range src[ax] {
			if src[ax][o], err = PadSource(mode, o, int(full[ax]), x.Shape[ax]); err != nil {
				return nil, fmt.Errorf("axis %d: %w", ax, err)
			}
		}
	}
	strides := tensor.Strides(x.Shape)
	idx := make([]int, r)
	for e := range out.Len() {
		s := 0
		for ax := r - 1; ax >= 0 && s >= 0; ax-- {
			if si := src[ax][idx[ax]]; si < 0 {
				s = -1
			} else {
				s += si * strides[ax]
			}
		}
		switch {
		case s >= 0 && out.F32 != nil:
			out.F32[e] = x.F32[s]
		case s >= 0 && out.I64 != nil:
			out.I64[e] = x.I64[s]
		case s >= 0:
			out.Bool[e] = x.Bool[s]
		case cv != nil && out.F32 != nil:
			out.F32[e] = cv.F32[0]
		case cv != nil && out.I64 != nil:
			out.I64[e] = cv.I64[0]
		case cv != nil:
			out.Bool[e] = cv.Bool[0]
		}
		for ax := r - 1; ax >= 0; ax-- {
			if idx[ax]++; idx[ax] < shape[ax] {
				break
			}
			idx[ax] = 0
		}
	}
	return []*tensor.Tensor{out}, nil
}
