package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Resize scales a tensor's axes by nearest-neighbour or (multi)linear interpolation: ONNX
// Resize from opset 11 (roi, scales, sizes inputs), with opset 18's axes attribute. Package
// onnx rewrites Resize-10 and the deprecated Upsample-7/9 into this form (asymmetric
// coordinates, nearest rounding down). Image encoders export their up-sampling necks as it.

func init() {
	register(&OpDef{
		Name: "Resize", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc: "resizes X to sizes, or by scales (output size floor(in·scale)), on every axis or the axes attribute: mode nearest (nearest_mode) or linear, " +
			"coordinate_transformation_mode half_pixel, pytorch_half_pixel, align_corners or asymmetric",
		Inputs:  ps(req("X"), opt("roi"), opt("scales"), opt("sizes")),
		Outputs: ps(req("Y")),
		Attrs: []AttrDef{{Name: "mode", Kind: AttrString, Default: String("nearest")},
			{Name: "coordinate_transformation_mode", Kind: AttrString, Default: String("half_pixel")},
			{Name: "nearest_mode", Kind: AttrString, Default: String("round_prefer_floor")},
			floatAttr("cubic_coeff_a", -0.75), intAttr("exclude_outside", 0), floatAttr("extrapolation_value", 0),
			intAttr("antialias", 0), intsAttr("axes"), {Name: "keep_aspect_ratio_policy", Kind: AttrString, Default: String("stretch")}},
		infer: (*nodeCtx).resize,
		Eval:  evalResize,
		Cost:  perOutput(4),
		Grad:  NoGradYet,
	})
}

var (
	resizeCoords  = map[string]bool{"half_pixel": true, "pytorch_half_pixel": true, "align_corners": true, "asymmetric": true}
	resizeNearest = map[string]bool{"round_prefer_floor": true, "round_prefer_ceil": true, "floor": true, "ceil": true}
)

// checkResizeAttrs refuses what zoo does not compute (cubic, antialias, tf_crop_and_resize,
// half_pixel_symmetric, aspect-ratio policies) by name.
func checkResizeAttrs(n *Node) error {
	if m := n.Str("mode", "nearest"); m != "nearest" && m != "linear" {
		return fmt.Errorf("mode %q is not supported (nearest, linear are)", m)
	}
	if m := n.Str("coordinate_transformation_mode", "half_pixel"); !resizeCoords[m] {
		return fmt.Errorf("coordinate_transformation_mode %q is not supported (half_pixel, pytorch_half_pixel, align_corners, asymmetric are)", m)
	}
	if m := n.Str("nearest_mode", "round_prefer_floor"); !resizeNearest[m] {
		return fmt.Errorf("nearest_mode %q is not round_prefer_floor, round_prefer_ceil, floor or ceil", m)
	}
	if n.Int("antialias", 0) != 0 {
		return fmt.Errorf("antialias is not supported")
	}
	if p := n.Str("keep_aspect_ratio_policy", "stretch"); p != "stretch" {
		return fmt.Errorf("keep_aspect_ratio_policy %q is not supported (stretch is)", p)
	}
	return nil
}

// resizeAxes returns the axes a Resize node scales, normalised, for an input of rank r.
func resizeAxes(n *Node, r int) ([]int, error) {
	raw, ok := n.IntList("axes")
	if !ok {
		axes := make([]int, r)
		for i := range axes {
			axes[i] = i
		}
		return axes, nil
	}
	seen := map[int]bool{}
	axes := make([]int, len(raw))
	for i, a := range raw {
		ax, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if seen[ax] {
			return nil, fmt.Errorf("axis %d is given twice", a)
		}
		seen[ax] = true
		axes[i] = ax
	}
	return axes, nil
}

// ResizeShape returns a Resize node's output shape and per-axis scales for input shape in,
// from its scales (floats) or sizes (ints): exactly one must be given, with one entry per
// resized axis, positive.
func ResizeShape(n *Node, in []int, scales []float32, sizes []int64) ([]int, []float64, error) {
	axes, err := resizeAxes(n, len(in))
	if err != nil {
		return nil, nil, err
	}
	if (scales == nil) == (sizes == nil) {
		return nil, nil, fmt.Errorf("give exactly one of scales and sizes")
	}
	if k := max(len(scales), len(sizes)); k != len(axes) {
		return nil, nil, fmt.Errorf("scales or sizes has %d entries for %d axes", k, len(axes))
	}
	out := append([]int{}, in...)
	sc := make([]float64, len(in))
	for i := range sc {
		sc[i] = 1
	}
	for k, ax := range axes {
		if scales != nil {
			s := float64(scales[k])
			if !(s > 0) || math.IsInf(s, 0) {
				return nil, nil, fmt.Errorf("scale %g is not positive and finite", s)
			}
			out[ax], sc[ax] = int(math.Floor(float64(in[ax])*s)), s
			continue
		}
		if sizes[k] < 0 || sizes[k] > 1<<31 {
			return nil, nil, fmt.Errorf("size %d is out of range", sizes[k])
		}
		out[ax] = int(sizes[k])
		if in[ax] > 0 {
			sc[ax] = float64(out[ax]) / float64(in[ax])
		}
	}
	return out, sc, nil
}

func (c *nodeCtx) resize() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if !x.dt.IsFloat() {
		return nil, fmt.Errorf("input %q has dtype %v, want a float type", c.name(0), x.dt)
	}
	if err := checkResizeAttrs(c.n); err != nil {
		return nil, err
	}
	if s := c.arg(2); s != nil && s.dt != tensor.Float32 {
		return nil, fmt.Errorf("scales %q has dtype %v, want float32", c.name(2), s.dt)
	}
	if err := c.checkVec(3, "sizes", false); err != nil {
		return nil, err
	}
	if x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	out := make(Shape, len(x.shape))
	for i := range out {
		out[i] = unknownDim
	}
	in := make([]int, len(x.shape))
	for i, d := range x.shape {
		in[i] = int(d.Size)
		if !d.Known() {
			return one(mk(x.dt, out)), nil
		}
	}
	var scales []float32
	var sizes []int64
	if s := c.arg(2); s != nil && s.floats != nil && len(s.floats) > 0 {
		scales = s.floats
	}
	if c.arg(3) != nil {
		v, ok := c.ints(3, "sizes")
		if !ok {
			return one(mk(x.dt, out)), nil
		}
		sizes = v
	}
	if scales == nil && sizes == nil {
		return one(mk(x.dt, out)), nil
	}
	shape, _, err := ResizeShape(c.n, in, scales, sizes)
	if err != nil {
		return nil, err
	}
	for i, d := range shape {
		out[i] = Fixed(int64(d))
	}
	return one(mk(x.dt, out)), nil
}

// resizeCoord maps output coordinate o of an axis of in → out elements at scale s to the
// input coordinate, by the coordinate transformation mode.
func resizeCoord(mode string, o, in, out int, s float64) float64 {
	x := float64(o)
	switch mode {
	case "asymmetric":
		return x / s
	case "align_corners":
		if out == 1 {
			return 0
		}
		return x * float64(in-1) / float64(out-1)
	case "pytorch_half_pixel":
		if out == 1 {
			return 0
		}
	}
	return (x+0.5)/s - 0.5
}

// nearestIndex rounds an input coordinate by the nearest mode, clamped into [0, in).
func nearestIndex(mode string, x float64, in int) int {
	var i float64
	switch mode {
	case "floor":
		i = math.Floor(x)
	case "ceil":
		i = math.Ceil(x)
	case "round_prefer_ceil":
		i = math.Floor(x + 0.5)
	default: // round_prefer_floor: halves go down
		i = math.Ceil(x - 0.5)
	}
	return min(max(int(i), 0), in-1)
}

// evalResize computes each axis's taps (nearest: one index; linear: two indices with weights)
// and sums the products of the taps of every axis in float64.
func evalResize(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	if err := checkResizeAttrs(n); err != nil {
		return nil, err
	}
	var scales []float32
	var sizes []int64
	if s := optIn(in, 2); s != nil && s.Len() > 0 {
		scales = s.F32
	}
	if s := optIn(in, 3); s != nil && s.Len() > 0 {
		sizes = s.I64
	}
	shape, sc, err := ResizeShape(n, x.Shape, scales, sizes)
	if err != nil {
		return nil, err
	}
	out, err := newTensor(x.DType, shape)
	if err != nil {
		return nil, err
	}
	if out.Len() == 0 {
		return []*tensor.Tensor{out}, nil
	}
	linear := n.Str("mode", "nearest") == "linear"
	coord, nearest := n.Str("coordinate_transformation_mode", "half_pixel"), n.Str("nearest_mode", "round_prefer_floor")
	type tap struct {
		i int
		w float64
	}
	r := len(x.Shape)
	taps := make([][][]tap, r) // taps[axis][output index]
	for ax := range taps {
		taps[ax] = make([][]tap, shape[ax])
		for o := range taps[ax] {
			if x.Shape[ax] == 0 {
				return nil, fmt.Errorf("axis %d is empty and cannot be resized to %d", ax, shape[ax])
			}
			c := resizeCoord(coord, o, x.Shape[ax], shape[ax], sc[ax])
			if !linear {
				taps[ax][o] = []tap{{nearestIndex(nearest, c, x.Shape[ax]), 1}}
				continue
			}
			c = min(max(c, 0), float64(x.Shape[ax]-1))
			f := math.Floor(c)
			w := c - f
			i0 := int(f)
			i1 := min(i0+1, x.Shape[ax]-1)
			taps[ax][o] = []tap{{i0, 1 - w}, {i1, w}}
		}
	}
	strides := tensor.Strides(x.Shape)
	idx := make([]int, r)
	var sum func(ax, off int, w float64) float64
	sum = func(ax, off int, w float64) float64 {
		if ax == r {
			return w * float64(x.F32[off])
		}
		var s float64
		for _, t := range taps[ax][idx[ax]] {
			if t.w != 0 || len(taps[ax][idx[ax]]) == 1 {
				s += sum(ax+1, off+t.i*strides[ax], w*t.w)
			}
		}
		return s
	}
	for e := range out.Len() {
		out.F32[e] = tensor.RoundTo(x.DType, float32(sum(0, 0, 1)))
		for ax := r - 1; ax >= 0; ax-- {
			if idx[ax]++; idx[ax] < shape[ax] {
				break
			}
			idx[ax] = 0
		}
	}
	return []*tensor.Tensor{out}, nil
}
