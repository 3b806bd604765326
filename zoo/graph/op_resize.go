package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Resize scales a tensor's axes by nearest-neighbour, (multi)linear or cubic interpolation:
// ONNX Resize from opset 11 (roi, scales, sizes inputs), with opset 18's axes attribute. Package
// onnx rewrites Resize-10 and the deprecated Upsample-7/9 into this form (asymmetric
// coordinates, nearest rounding down). Image encoders export their up-sampling necks as it.

func init() {
	register(&OpDef{
		Name: "Resize", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc: "resizes X to sizes, or by scales (output size floor(in·scale)), on every axis or the axes attribute: mode nearest (nearest_mode), linear or cubic " +
			"(cubic_coeff_a, exclude_outside), coordinate_transformation_mode half_pixel, pytorch_half_pixel, align_corners, asymmetric or tf_crop_and_resize " +
			"(roi, extrapolation_value)",
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
	resizeCoords  = map[string]bool{"half_pixel": true, "pytorch_half_pixel": true, "align_corners": true, "asymmetric": true, "tf_crop_and_resize": true}
	resizeNearest = map[string]bool{"round_prefer_floor": true, "round_prefer_ceil": true, "floor": true, "ceil": true}
)

// checkResizeAttrs refuses what zoo does not compute (antialias, half_pixel_symmetric,
// aspect-ratio policies) by name.
func checkResizeAttrs(n *Node) error {
	if m := n.Str("mode", "nearest"); m != "nearest" && m != "linear" && m != "cubic" {
		return fmt.Errorf("mode %q is not supported (nearest, linear, cubic are)", m)
	}
	if m := n.Str("coordinate_transformation_mode", "half_pixel"); !resizeCoords[m] {
		return fmt.Errorf("coordinate_transformation_mode %q is not supported (half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize are)", m)
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
// input coordinate, by the coordinate transformation mode (tf_crop_and_resize: within the
// region of interest [start, end], a fraction of the axis).
func resizeCoord(mode string, o, in, out int, s, start, end float64) float64 {
	x := float64(o)
	switch mode {
	case "tf_crop_and_resize":
		if out == 1 {
			return 0.5 * (start + end) * float64(in-1)
		}
		return start*float64(in-1) + x*(end-start)*float64(in-1)/float64(out-1)
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

// cubicWeights are the weights of the four neighbours from floor(c) − 1 of a coordinate at
// fraction t past floor(c), by the cubic convolution kernel with coefficient a (Keys; ONNX's
// cubic_coeff_a: −0.75 by default as PyTorch, −0.5 as TensorFlow).
func cubicWeights(t, a float64) [4]float64 {
	k := func(x float64) float64 {
		x = math.Abs(x)
		switch {
		case x <= 1:
			return ((a+2)*x-(a+3))*x*x + 1
		case x < 2:
			return ((a*x-5*a)*x+8*a)*x - 4*a
		}
		return 0
	}
	return [4]float64{k(t + 1), k(t), k(1 - t), k(2 - t)}
}

// resizeROI returns tf_crop_and_resize's region of interest per axis as fractions (start,
// end), from roi (starts then ends, for every axis or the axes attribute's); [0, 1] on every
// axis for the other modes.
func resizeROI(n *Node, roi *tensor.Tensor, r int, coord string) (starts, ends []float64, err error) {
	starts, ends = make([]float64, r), make([]float64, r)
	for i := range ends {
		ends[i] = 1
	}
	if coord != "tf_crop_and_resize" {
		return starts, ends, nil
	}
	axes, err := resizeAxes(n, r)
	if err != nil {
		return nil, nil, err
	}
	if roi == nil || roi.Len() != 2*len(axes) || !roi.DType.IsFloat() {
		return nil, nil, fmt.Errorf("tf_crop_and_resize needs roi: %d floats (starts, then ends)", 2*len(axes))
	}
	for k, ax := range axes {
		starts[ax], ends[ax] = f64(roi.F32[k]), f64(roi.F32[len(axes)+k])
	}
	return starts, ends, nil
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
	if scales != nil && n.Str("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize" {
		return nil, fmt.Errorf("tf_crop_and_resize with scales is not supported (give sizes)")
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
	mode := n.Str("mode", "nearest")
	coord, nearest := n.Str("coordinate_transformation_mode", "half_pixel"), n.Str("nearest_mode", "round_prefer_floor")
	a, excludeOutside := f64(attrFloat(n, "cubic_coeff_a")), attrInt(n, "exclude_outside") != 0
	type tap struct {
		i int
		w float64
	}
	r := len(x.Shape)
	starts, ends, err := resizeROI(n, optIn(in, 1), r, coord)
	if err != nil {
		return nil, err
	}
	taps := make([][][]tap, r) // taps[axis][output index]; nil: outside the region (tf_crop_and_resize)
	for ax := range taps {
		taps[ax] = make([][]tap, shape[ax])
		size := x.Shape[ax]
		for o := range taps[ax] {
			if size == 0 {
				return nil, fmt.Errorf("axis %d is empty and cannot be resized to %d", ax, shape[ax])
			}
			c := resizeCoord(coord, o, size, shape[ax], sc[ax], starts[ax], ends[ax])
			if coord == "tf_crop_and_resize" && (c < 0 || c > float64(size-1)) {
				continue // extrapolation_value
			}
			switch mode {
			case "nearest":
				taps[ax][o] = []tap{{nearestIndex(nearest, c, size), 1}}
			case "linear":
				c = min(max(c, 0), float64(size-1))
				f := math.Floor(c)
				w := c - f
				i0 := int(f)
				i1 := min(i0+1, size-1)
				taps[ax][o] = []tap{{i0, 1 - w}, {i1, w}}
			default: // cubic: four neighbours from floor(c) − 1, edge values beyond the axis
				f := math.Floor(c)
				t := c - f
				ws := cubicWeights(t, a)
				var sum float64
				ts := make([]tap, 4)
				for k := range ts {
					i := int(f) - 1 + k
					w := ws[k]
					if excludeOutside && (i < 0 || i >= size) {
						w = 0
					}
					ts[k] = tap{min(max(i, 0), size-1), w}
					sum += w
				}
				if excludeOutside && sum != 0 {
					for k := range ts {
						ts[k].w /= sum
					}
				}
				taps[ax][o] = ts
			}
		}
	}
	extrapolate := f64(attrFloat(n, "extrapolation_value"))
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
		v := extrapolate
		inside := true
		for ax := range idx {
			inside = inside && taps[ax][idx[ax]] != nil
		}
		if inside {
			v = sum(0, 0, 1)
		}
		out.F32[e] = tensor.RoundTo(x.DType, float32(v))
		for ax := r - 1; ax >= 0; ax-- {
			if idx[ax]++; idx[ax] < shape[ax] {
				break
			}
			idx[ax] = 0
		}
	}
	return []*tensor.Tensor{out}, nil
}
