package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Neural-network operators: Softmax, LayerNormalization and the reductions ReduceMax,
// ReduceMean and ReduceSum.

func init() {
	register(&OpDef{
		Name: "Softmax", SinceVersion: 13, ThroughVersion: LatestOpset,
		Doc:    "exp(x − max) / Σ exp(x − max) along axis",
		Inputs: ps(req("input")), Outputs: ps(req("output")),
		Attrs: []AttrDef{intAttr("axis", -1)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if x.dt != tensor.Float32 {
				return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(0), x.dt)
			}
			if x.shape != nil {
				if _, err := NormAxis(attrInt(c.n, "axis"), len(x.shape)); err != nil {
					return nil, err
				}
			}
			return one(mk(x.dt, cloneShape(x.shape))), nil
		},
		Eval: evalSoftmax,
		Cost: perOutput(5),
		Grad: gradSoftmax,
	})
	register(&OpDef{
		Name: "LayerNormalization", SinceVersion: 17, ThroughVersion: LatestOpset,
		Doc:     "(x − mean) / sqrt(var + epsilon) · scale + B over the axes from axis on",
		Inputs:  ps(req("X"), req("Scale"), opt("B")),
		Outputs: ps(req("Y"), opt("Mean"), opt("InvStdDev")),
		Attrs:   []AttrDef{intAttr("axis", -1), floatAttr("epsilon", 1e-5), intAttr("stash_type", 1)},
		infer:   (*nodeCtx).layerNorm,
		Eval:    evalLayerNorm,
		Cost:    perInput(8),
		Grad:    gradLayerNorm,
	})
	for _, r := range []struct {
		name  string
		since int
		doc   string
	}{
		{"ReduceMax", 11, "the maximum over axes (NaN wins; −Inf or the type's minimum over none)"},
		{"ReduceMean", 11, "the mean over axes"},
		{"ReduceSum", 11, "the sum over axes"},
	} {
		register(&OpDef{
			Name: r.name, SinceVersion: r.since, ThroughVersion: LatestOpset,
			Doc:    r.doc + "; axes from the input (ReduceSum 13, the others 18) or the attribute; all axes when none are given unless noop_with_empty_axes",
			Inputs: ps(req("data"), opt("axes")), Outputs: ps(req("reduced")),
			Attrs:   []AttrDef{intsAttr("axes"), intAttr("keepdims", 1), intAttr("noop_with_empty_axes", 0)},
			infer:   (*nodeCtx).reduce,
			Eval:    evalReduce,
			Cost:    perInput(1),
			Grad:    reduceGrad(r.name),
			Float64: true,
		})
	}
}

// evalSoftmax computes softmax in float64 along one axis.
func evalSoftmax(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	out, err := newTensor(tensor.Float32, x.Shape)
	if err != nil {
		return nil, err
	}
	outer, dim := NumElements(x.Shape[:axis]), x.Shape[axis]
	inner := NumElements(x.Shape[axis+1:])
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			at := func(j int) int { return (o*dim+j)*inner + i }
			mx := math.Inf(-1)
			for j := 0; j < dim; j++ {
				mx = math.Max(mx, f64(x.F32[at(j)]))
			}
			var sum float64
			for j := 0; j < dim; j++ {
				sum += math.Exp(f64(x.F32[at(j)]) - mx)
			}
			for j := 0; j < dim; j++ {
				out.F32[at(j)] = float32(math.Exp(f64(x.F32[at(j)])-mx) / sum)
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// evalLayerNorm normalises over x's axes from axis on, in float64, and also returns the mean
// and the inverse standard deviation (shape x.shape[:axis] followed by ones).
func evalLayerNorm(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, scale := in[0], in[1]
	var bias *tensor.Tensor
	if len(in) > 2 {
		bias = in[2]
	}
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	eps := f64(attrFloat(n, "epsilon"))
	norm := x.Shape[axis:]
	rows, width := NumElements(x.Shape[:axis]), NumElements(norm)
	offsets := func(t *tensor.Tensor, what string) ([]int, error) {
		if t == nil {
			return nil, nil
		}
		if s, err := BroadcastShapes(norm, t.Shape); err != nil || !tensor.SameShape(s, norm) {
			return nil, fmt.Errorf("%s has shape %s, which does not broadcast to the normalized shape %s", what, tensor.ShapeString(t.Shape), tensor.ShapeString(norm))
		}
		offs := make([]int, width)
		err := broadcastEach(norm, []*tensor.Tensor{t}, func(o int, off []int) error {
			offs[o] = off[0]
			return nil
		})
		return offs, err
	}
	so, err := offsets(scale, "scale")
	if err != nil {
		return nil, err
	}
	bo, err := offsets(bias, "bias")
	if err != nil {
		return nil, err
	}
	stat := append([]int{}, x.Shape[:axis]...)
	for range norm {
		stat = append(stat, 1)
	}
	y, err := newTensor(tensor.Float32, x.Shape)
	if err != nil {
		return nil, err
	}
	mean, err := newTensor(tensor.Float32, stat)
	if err != nil {
		return nil, err
	}
	inv, err := newTensor(tensor.Float32, stat)
	if err != nil {
		return nil, err
	}
	for r := 0; r < rows; r++ {
		row := x.F32[r*width : (r+1)*width]
		var mu float64
		for _, v := range row {
			mu += f64(v)
		}
		mu /= float64(width)
		var vr float64
		for _, v := range row {
			dv := f64(v) - mu
			vr += dv * dv
		}
		vr /= float64(width)
		is := 1 / math.Sqrt(vr+eps)
		mean.F32[r], inv.F32[r] = float32(mu), float32(is)
		for j, v := range row {
			o := (f64(v) - mu) * is * f64(scale.F32[so[j]])
			if bo != nil {
				o += f64(bias.F32[bo[j]])
			}
			y.F32[r*width+j] = float32(o)
		}
	}
	return []*tensor.Tensor{y, mean, inv}, nil
}

// evalReduce computes ReduceMax, ReduceMean or ReduceSum (integer means truncate toward
// zero; int32 sums wrap).
func evalReduce(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axes, err := axesOf(n, in, 1)
	if err != nil {
		return nil, err
	}
	keep := attrInt(n, "keepdims") != 0
	r := len(x.Shape)
	red := make([]bool, r)
	if len(axes) == 0 {
		if attrInt(n, "noop_with_empty_axes") != 0 {
			return []*tensor.Tensor{x.Clone()}, nil
		}
		for i := range red {
			red[i] = true
		}
	}
	for _, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		red[k] = true
	}
	var shape, kept []int // kept: the output shape with reduced axes as 1
	for i, dim := range x.Shape {
		switch {
		case !red[i]:
			shape = append(shape, dim)
			kept = append(kept, dim)
		case keep:
			shape = append(shape, 1)
			kept = append(kept, 1)
		default:
			kept = append(kept, 1)
		}
	}
	if shape == nil {
		shape = []int{}
	}
	cells := NumElements(kept)
	count := 1
	for i, dim := range x.Shape {
		if red[i] {
			count *= dim
		}
	}
	kst := tensor.Strides(kept)
	cell := func(idx []int) int {
		off := 0
		for k, i := range idx {
			if !red[k] {
				off += i * kst[k]
			}
		}
		return off
	}
	out, err := newTensor(x.DType, shape)
	if err != nil {
		return nil, err
	}
	switch {
	case isFloatVal(x.DType):
		acc := make([]float64, cells)
		if n.Op == "ReduceMax" {
			for i := range acc {
				acc[i] = math.Inf(-1)
			}
		}
		_ = forIndex(x.Shape, func(flat int, idx []int) error {
			c, v := cell(idx), numAt(x, flat)
			if n.Op == "ReduceMax" {
				if math.IsNaN(v) || v > acc[c] {
					acc[c] = v
				}
			} else {
				acc[c] += v
			}
			return nil
		})
		for i, v := range acc {
			if n.Op == "ReduceMean" {
				v /= float64(count)
			}
			setNum(out, i, v)
		}
	case isInt(x.DType):
		acc := make([]int64, cells)
		if n.Op == "ReduceMax" {
			lo := int64(math.MinInt64)
			if x.DType == tensor.Int32 {
				lo = math.MinInt32
			}
			for i := range acc {
				acc[i] = lo
			}
		}
		_ = forIndex(x.Shape, func(flat int, idx []int) error {
			c, v := cell(idx), x.I64[flat]
			if n.Op == "ReduceMax" {
				acc[c] = max(acc[c], v)
			} else {
				acc[c] += v
			}
			return nil
		})
		for i, v := range acc {
			if n.Op == "ReduceMean" {
				if count == 0 {
					return nil, errors.New("integer mean over no elements")
				}
				v /= int64(count)
			}
			out.I64[i] = wrapInt(x.DType, v)
		}
	default:
		return nil, fmt.Errorf("dtype %v is not supported", x.DType)
	}
	return []*tensor.Tensor{out}, nil
}

// ---- inference ----

func (c *nodeCtx) layerNorm() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	scale, err := c.req(1)
	if err != nil {
		return nil, err
	}
	for i := range c.in {
		if v := c.arg(i); v != nil && v.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
	}
	outs := []*absVal{mk(x.dt, cloneShape(x.shape))}
	if x.shape == nil {
		outs = append(outs, mk(tensor.Float32, nil), mk(tensor.Float32, nil))
		return outs, nil
	}
	axis, err := NormAxis(attrInt(c.n, "axis"), len(x.shape))
	if err != nil {
		return nil, err
	}
	norm := x.shape[axis:]
	for i, v := range []*absVal{scale, c.arg(2)} {
		if v == nil || v.shape == nil {
			continue
		}
		what := []string{"scale", "bias"}[i]
		bad := len(v.shape) > len(norm)
		if !bad {
			bs, err := Broadcast(norm, v.shape)
			bad = err != nil
			for j := range bs {
				if !bad && bs[j].Known() && norm[j].Known() && bs[j].Size != norm[j].Size {
					bad = true
				}
			}
		}
		if bad {
			return nil, fmt.Errorf("%s %q has shape %v, which does not broadcast to the normalized shape %v", what, c.name(i+1), v.shape, norm)
		}
	}
	stat := append(Shape{}, x.shape[:axis]...)
	for range norm {
		stat = append(stat, Fixed(1))
	}
	outs = append(outs, mk(tensor.Float32, stat), mk(tensor.Float32, cloneShape(stat)))
	return outs, nil
}

func (c *nodeCtx) reduce() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if !isNumeric(x.dt) {
		return nil, fmt.Errorf("input %q has dtype %v, want a number type", c.name(0), x.dt)
	}
	if err := c.checkVec(1, "axes", false); err != nil {
		return nil, err
	}
	keep := attrInt(c.n, "keepdims") != 0
	axes, present, ok := c.axesList(1)
	if x.shape == nil || !ok {
		if !keep || x.shape == nil {
			return one(mk(x.dt, nil)), nil
		}
		out := make(Shape, len(x.shape))
		for i := range out {
			out[i] = unknownDim
		}
		return one(mk(x.dt, out)), nil
	}
	r := len(x.shape)
	red := make([]bool, r)
	if !present || len(axes) == 0 {
		if attrInt(c.n, "noop_with_empty_axes") != 0 {
			return one(mk(x.dt, cloneShape(x.shape))), nil
		}
		for i := range red {
			red[i] = true
		}
	}
	for _, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		red[k] = true
	}
	out := Shape{}
	for i, d := range x.shape {
		switch {
		case !red[i]:
			out = append(out, d)
		case keep:
			out = append(out, Fixed(1))
		}
	}
	return one(mk(x.dt, out)), nil
}
