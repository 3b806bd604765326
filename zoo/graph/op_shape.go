package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Layout operators: Reshape, Transpose, Squeeze, Unsqueeze, Expand, Tile, Concat, Split,
// Slice and Gather. Their shape arithmetic is opsem.go's.

func init() {
	register(&OpDef{
		Name: "Reshape", SinceVersion: 5, ThroughVersion: LatestOpset,
		Doc:    "the input with a new shape (0 copies a dimension unless allowzero, one -1 is inferred)",
		Inputs: ps(req("data"), req("shape")), Outputs: ps(req("reshaped")),
		Attrs: []AttrDef{intAttr("allowzero", 0)},
		infer: (*nodeCtx).reshape,
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			target, err := intsOf(in[1], "shape")
			if err != nil {
				return nil, err
			}
			shape, err := ReshapeDims(in[0].Shape, target, attrInt(n, "allowzero") != 0)
			if err != nil {
				return nil, err
			}
			return one1(withShape(in[0], shape))
		},
		Cost:    viewCost,
		Grad:    gradReshapeLike,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Transpose", SinceVersion: 1, ThroughVersion: LatestOpset,
		Doc:    "permutes the axes: output axis i is input axis perm[i] (reversed by default)",
		Inputs: ps(req("data")), Outputs: ps(req("transposed")),
		Attrs:   []AttrDef{intsAttr("perm")},
		infer:   (*nodeCtx).transpose,
		Eval:    evalTranspose,
		Cost:    moveCost,
		Grad:    gradTranspose,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Squeeze", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "removes size-1 axes: those listed (input from opset 13, attribute before), or all",
		Inputs: ps(req("data"), opt("axes")), Outputs: ps(req("squeezed")),
		Attrs: []AttrDef{intsAttr("axes")},
		infer: (*nodeCtx).squeeze,
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			axes, err := axesOf(n, in, 1)
			if err != nil {
				return nil, err
			}
			shape, err := SqueezeDims(in[0].Shape, axes)
			if err != nil {
				return nil, err
			}
			return one1(withShape(in[0], shape))
		},
		Cost:    viewCost,
		Grad:    gradReshapeLike,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Unsqueeze", SinceVersion: 13, ThroughVersion: LatestOpset,
		Doc:    "inserts size-1 axes at the listed positions of the output",
		Inputs: ps(req("data"), req("axes")), Outputs: ps(req("expanded")),
		infer: (*nodeCtx).unsqueeze,
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			axes, err := intsOf(in[1], "axes")
			if err != nil {
				return nil, err
			}
			shape, err := UnsqueezeDims(in[0].Shape, axes)
			if err != nil {
				return nil, err
			}
			return one1(withShape(in[0], shape))
		},
		Cost:    viewCost,
		Grad:    gradReshapeLike,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Expand", SinceVersion: 8, ThroughVersion: LatestOpset,
		Doc:    "broadcasts the input with the given shape (numpy multidirectional rules)",
		Inputs: ps(req("input"), req("shape")), Outputs: ps(req("output")),
		infer:   (*nodeCtx).expand,
		Eval:    evalExpand,
		Cost:    moveCost,
		Grad:    gradExpand,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Tile", SinceVersion: 6, ThroughVersion: LatestOpset,
		Doc:    "repeats the input repeats[i] times along each axis i",
		Inputs: ps(req("input"), req("repeats")), Outputs: ps(req("output")),
		infer:   (*nodeCtx).tile,
		Eval:    evalTile,
		Cost:    moveCost,
		Grad:    gradTile,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Concat", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "joins its inputs along axis; the other dimensions must agree",
		Inputs: ps(variadic("inputs")), Outputs: ps(req("concat_result")),
		Attrs:   []AttrDef{reqIntAttr("axis")},
		infer:   (*nodeCtx).concat,
		Eval:    evalConcat,
		Cost:    moveCost,
		Grad:    gradConcat,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Split", SinceVersion: 13, ThroughVersion: LatestOpset,
		Doc:     "cuts the input along axis into the given sizes, num_outputs ceil-sized chunks (opset 18), or equal parts",
		Inputs:  ps(req("input"), opt("split")),
		Outputs: ps(variadic("outputs")),
		Attrs:   []AttrDef{intAttr("axis", 0), optIntAttr("num_outputs")},
		infer:   (*nodeCtx).split,
		Eval:    evalSplit,
		Cost:    moveCost,
		Grad:    gradSplit,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Slice", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "x[starts:ends:steps] on the given axes, with ONNX's clamping of the bounds",
		Inputs: ps(req("data"), req("starts"), req("ends"), opt("axes"), opt("steps")), Outputs: ps(req("output")),
		infer:   (*nodeCtx).slice,
		Eval:    evalSlice,
		Cost:    readsWhatItWrites,
		Grad:    gradSlice,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Gather", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "picks entries of data along axis by indices (negative ones count from the end)",
		Inputs: ps(req("data"), req("indices")), Outputs: ps(req("output")),
		Attrs:   []AttrDef{intAttr("axis", 0)},
		infer:   (*nodeCtx).gather,
		Eval:    evalGather,
		Cost:    readsWhatItWrites,
		Grad:    gradGather,
		Float64: true, Uint64: true,
	})
}

// one1 wraps a single output tensor.
func one1(t *tensor.Tensor, err error) ([]*tensor.Tensor, error) {
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{t}, nil
}

// readsWhatItWrites is the cost of Slice and Gather: they read as many data elements as they
// write, plus their (small) index inputs.
func readsWhatItWrites(n *Node, in, out []TensorType) (OpCost, error) {
	b := ioBytes(in[1:], out)
	for _, o := range out {
		b += o.Bytes()
	}
	return OpCost{Bytes: b}, nil
}

// flatAt returns the flat offset of idx in a tensor with strides st.
func flatAt(idx, st []int) int {
	off := 0
	for k, i := range idx {
		off += i * st[k]
	}
	return off
}

func evalTranspose(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	perm, ok := n.IntList("perm")
	if !ok {
		perm = make([]int64, r)
		for i := range perm {
			perm[i] = int64(r - 1 - i)
		}
	}
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v has %d entries for rank %d", perm, len(perm), r)
	}
	p := make([]int, r)
	seen := make([]bool, r)
	shape := make([]int, r)
	for i, v := range perm {
		if v < 0 || v >= int64(r) || seen[v] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, r-1)
		}
		seen[v] = true
		p[i] = int(v)
		shape[i] = x.Shape[v]
	}
	st := tensor.Strides(x.Shape)
	return one1(takeFrom(x, shape, func(idx []int) (int, error) {
		off := 0
		for i, k := range p {
			off += idx[i] * st[k]
		}
		return off, nil
	}))
}

func evalExpand(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	dims, err := intsOf(in[1], "shape")
	if err != nil {
		return nil, err
	}
	target := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 || d > math.MaxInt32 {
			return nil, fmt.Errorf("shape %v has an invalid dimension %d", dims, d)
		}
		target[i] = int(d)
	}
	shape, err := BroadcastShapes(x.Shape, target)
	if err != nil {
		return nil, err
	}
	out, err := newTensor(x.DType, shape)
	if err != nil {
		return nil, err
	}
	err = broadcastEach(shape, in[:1], func(o int, off []int) error {
		copyElem(out, o, x, off[0])
		return nil
	})
	return one1(out, err)
}

func evalTile(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	reps, err := intsOf(in[1], "repeats")
	if err != nil {
		return nil, err
	}
	if len(reps) != len(x.Shape) {
		return nil, fmt.Errorf("repeats has %d entries for input of rank %d", len(reps), len(x.Shape))
	}
	shape := make([]int, len(reps))
	for i, r := range reps {
		if r < 0 || r > math.MaxInt32 {
			return nil, fmt.Errorf("invalid repeat %d", r)
		}
		shape[i] = x.Shape[i] * int(r)
	}
	st := tensor.Strides(x.Shape)
	return one1(takeFrom(x, shape, func(idx []int) (int, error) {
		off := 0
		for k, i := range idx {
			off += (i % x.Shape[k]) * st[k]
		}
		return off, nil
	}))
}

func evalConcat(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	first := in[0]
	r := len(first.Shape)
	axis, err := NormAxis(attrInt(n, "axis"), r)
	if err != nil {
		return nil, err
	}
	shape := append([]int{}, first.Shape...)
	shape[axis] = 0
	for i, t := range in {
		if t.DType != first.DType || len(t.Shape) != r {
			return nil, fmt.Errorf("input %d is %v %s, input 0 is %v %s", i, t.DType, tensor.ShapeString(t.Shape), first.DType, tensor.ShapeString(first.Shape))
		}
		for k, d := range t.Shape {
			if k != axis && d != first.Shape[k] {
				return nil, fmt.Errorf("input %d has shape %s, which differs from %s off the concat axis %d", i, tensor.ShapeString(t.Shape), tensor.ShapeString(first.Shape), axis)
			}
		}
		shape[axis] += t.Shape[axis]
	}
	out, err := newTensor(first.DType, shape)
	if err != nil {
		return nil, err
	}
	ost := tensor.Strides(shape)
	base := 0
	for _, t := range in {
		err := forIndex(t.Shape, func(flat int, idx []int) error {
			copyElem(out, flatAt(idx, ost)+base*ost[axis], t, flat)
			return nil
		})
		if err != nil {
			return nil, err
		}
		base += t.Shape[axis]
	}
	return []*tensor.Tensor{out}, nil
}

// splitSizes returns Split's part sizes along an axis of size dim for k outputs: the split
// input's values when given, else num_outputs chunks of ceil(dim/k) with a smaller last one
// (opset 18), else k equal parts.
func splitSizes(n *Node, split *tensor.Tensor, dim, k int) ([]int, error) {
	parts := make([]int, k)
	switch {
	case split != nil:
		sp, err := intsOf(split, "split")
		if err != nil {
			return nil, err
		}
		if len(sp) != k {
			return nil, fmt.Errorf("split has %d entries for %d outputs", len(sp), k)
		}
		sum := int64(0)
		for i, s := range sp {
			if s < 0 || s > math.MaxInt32 {
				return nil, fmt.Errorf("split entry %d is invalid (%d)", i, s)
			}
			sum += s
			parts[i] = int(s)
		}
		if sum != int64(dim) {
			return nil, fmt.Errorf("split sizes %v sum to %d, but the axis has size %d", sp, sum, dim)
		}
	case attrInt(n, "num_outputs") != 0:
		if num := attrInt(n, "num_outputs"); num != int64(k) {
			return nil, fmt.Errorf("num_outputs is %d but the node has %d outputs", num, k)
		}
		chunk := (dim + k - 1) / k
		for i := range parts {
			parts[i] = min(chunk, max(dim-i*chunk, 0))
		}
	default:
		if dim%k != 0 {
			return nil, fmt.Errorf("axis of size %d does not split evenly into %d outputs", dim, k)
		}
		for i := range parts {
			parts[i] = dim / k
		}
	}
	return parts, nil
}

func evalSplit(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	var split *tensor.Tensor
	if len(in) > 1 {
		split = in[1]
	}
	parts, err := splitSizes(n, split, x.Shape[axis], len(n.Outputs))
	if err != nil {
		return nil, err
	}
	st := tensor.Strides(x.Shape)
	outs := make([]*tensor.Tensor, len(parts))
	start := 0
	for i, p := range parts {
		shape := append([]int{}, x.Shape...)
		shape[axis] = p
		off := start
		outs[i], err = takeFrom(x, shape, func(idx []int) (int, error) {
			return flatAt(idx, st) + off*st[axis], nil
		})
		if err != nil {
			return nil, err
		}
		start += p
	}
	return outs, nil
}

func evalSlice(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	var vecs [4][]int64
	for i, what := range []string{"starts", "ends", "axes", "steps"} {
		if i+1 < len(in) && in[i+1] != nil {
			v, err := intsOf(in[i+1], what)
			if err != nil {
				return nil, err
			}
			vecs[i] = v
		}
	}
	if vecs[0] == nil || vecs[1] == nil {
		return nil, errors.New("starts and ends are required")
	}
	shape, first, step, err := SliceDims(x.Shape, vecs[0], vecs[1], vecs[2], vecs[3])
	if err != nil {
		return nil, err
	}
	st := tensor.Strides(x.Shape)
	return one1(takeFrom(x, shape, func(idx []int) (int, error) {
		off := 0
		for k, i := range idx {
			off += (first[k] + i*step[k]) * st[k]
		}
		return off, nil
	}))
}

func evalGather(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, ind := in[0], in[1]
	if len(x.Shape) == 0 {
		return nil, errors.New("data must have rank ≥ 1, got a scalar")
	}
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	iv, err := intsOf(ind, "indices")
	if err != nil {
		return nil, err
	}
	dim := x.Shape[axis]
	pos := make([]int, len(iv))
	for i, v := range iv {
		if v < -int64(dim) || v >= int64(dim) {
			return nil, fmt.Errorf("index %d is out of range for axis %d of size %d", v, axis, dim)
		}
		if v < 0 {
			v += int64(dim)
		}
		pos[i] = int(v)
	}
	q := len(ind.Shape)
	shape := append(append(append([]int{}, x.Shape[:axis]...), ind.Shape...), x.Shape[axis+1:]...)
	st := tensor.Strides(x.Shape)
	ist := tensor.Strides(ind.Shape)
	return one1(takeFrom(x, shape, func(idx []int) (int, error) {
		off := 0
		for k := 0; k < axis; k++ {
			off += idx[k] * st[k]
		}
		off += pos[flatAt(idx[axis:axis+q], ist)] * st[axis]
		for k := axis + 1; k < len(x.Shape); k++ {
			off += idx[k-1+q] * st[k]
		}
		return off, nil
	}))
}

// ---- inference ----

func (c *nodeCtx) reshape() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "shape", false); err != nil {
		return nil, err
	}
	allowZero := attrInt(c.n, "allowzero") != 0
	e := c.elems(1, "shape")
	if e == nil {
		s, _ := c.shapeFromVec(1, "shape")
		return one(mk(x.dt, s)), nil
	}
	if fullyKnown(x.shape) {
		if target, ok := c.ints(1, "shape"); ok {
			dims, err := ReshapeDims(ints(sizes(x.shape)), target, allowZero)
			if err != nil {
				return nil, err
			}
			res := mk(x.dt, shapeOf(dims))
			res.vals = x.vals
			return one(res), nil
		}
		c.missing = ""
	}
	out := make(Shape, len(e))
	infer := -1
	for i, v := range e {
		switch {
		case !v.known:
			out[i] = Dim{Size: -1, Param: v.sym}
		case v.v == 0 && !allowZero:
			switch {
			case x.shape == nil:
				out[i] = unknownDim
			case i < len(x.shape):
				out[i] = x.shape[i]
			default:
				return nil, fmt.Errorf("shape entry %d is 0 (copy) but the input %v has rank %d", i, x.shape, len(x.shape))
			}
		case v.v == -1:
			if infer >= 0 {
				return nil, errors.New("shape has more than one -1")
			}
			infer = i
			out[i] = unknownDim
		case v.v < 0:
			return nil, fmt.Errorf("shape entry %d is %d (only -1 and sizes ≥ 0 are valid)", i, v.v)
		default:
			out[i] = Fixed(v.v)
		}
	}
	if x.shape != nil {
		if infer >= 0 {
			d, err := inferReshapeDim(x.shape, out, infer)
			if err != nil {
				return nil, err
			}
			out[infer] = d
		}
		if a, ok := numel(x.shape); ok {
			if b, ok := numel(out); ok && a != b {
				return nil, fmt.Errorf("cannot reshape %v (%d elements) to %v (%d elements)", x.shape, a, out, b)
			}
		}
	}
	res := mk(x.dt, out)
	if x.vals != nil && fullyKnown(out) {
		res.vals = x.vals
	}
	res.floats = nil
	return one(res), nil
}

// inferReshapeDim resolves Reshape's -1 at position at: the input's element count divided by
// the other output dimensions, cancelling matching symbolic dimensions.
func inferReshapeDim(in, out Shape, at int) (Dim, error) {
	pin, pout := int64(1), int64(1)
	syms := map[string]int{}
	for _, d := range in {
		switch {
		case d.Known():
			pin *= d.Size
		case d.Param != "":
			syms[d.Param]++
		default:
			return unknownDim, nil
		}
	}
	for i, d := range out {
		if i == at {
			continue
		}
		switch {
		case d.Known():
			pout *= d.Size
		case d.Param != "" && syms[d.Param] > 0:
			syms[d.Param]--
		default:
			return unknownDim, nil
		}
	}
	var left []string
	for s, k := range syms {
		for ; k > 0; k-- {
			left = append(left, s)
		}
	}
	switch {
	case len(left) == 0:
		if pout == 0 {
			if pin == 0 {
				return unknownDim, errors.New("cannot infer -1 with a zero-size dimension")
			}
			return Dim{}, fmt.Errorf("cannot reshape %v to %v", in, out)
		}
		if pin%pout != 0 {
			return Dim{}, fmt.Errorf("cannot reshape %v (%d elements) to %v: %d is not a multiple of %d", in, pin, out, pin, pout)
		}
		return Fixed(pin / pout), nil
	case len(left) == 1 && pin == pout:
		return Sym(left[0]), nil
	}
	return unknownDim, nil
}

func (c *nodeCtx) transpose() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	perm, hasPerm := c.n.IntList("perm")
	if x.shape == nil {
		if !hasPerm {
			return one(mk(x.dt, nil)), nil
		}
		s := make(Shape, len(perm))
		for i := range s {
			s[i] = unknownDim
		}
		return one(mk(x.dt, s)), nil
	}
	r := len(x.shape)
	if !hasPerm {
		perm = make([]int64, r)
		for i := range perm {
			perm[i] = int64(r - 1 - i)
		}
	}
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v has %d entries for input of rank %d %v", perm, len(perm), r, x.shape)
	}
	seen := make([]bool, r)
	out := make(Shape, r)
	for i, p := range perm {
		if p < 0 || p >= int64(r) || seen[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, r-1)
		}
		seen[p] = true
		out[i] = x.shape[p]
	}
	res := mk(x.dt, out)
	if x.vals != nil {
		vals, err := remap(sizes(out), x.vals, sizes(x.shape), func(o, s []int64) {
			for i, p := range perm {
				s[p] = o[i]
			}
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

func (c *nodeCtx) squeeze() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "axes", false); err != nil {
		return nil, err
	}
	axes, present, ok := c.axesList(1)
	if !ok || x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	if fullyKnown(x.shape) {
		if present && axes == nil {
			axes = []int64{}
		}
		dims, err := SqueezeDims(ints(sizes(x.shape)), axes)
		if err != nil {
			return nil, err
		}
		res := mk(x.dt, shapeOf(dims))
		res.vals = x.vals
		return one(res), nil
	}
	drop := make([]bool, len(x.shape))
	if present {
		for _, a := range axes {
			k, err := NormAxis(a, len(x.shape))
			if err != nil {
				return nil, err
			}
			if d := x.shape[k]; d.Known() && d.Size != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of size %d in %v", a, d.Size, x.shape)
			}
			drop[k] = true
		}
	} else {
		for k, d := range x.shape {
			if !d.Known() {
				return one(mk(x.dt, nil)), nil
			}
			drop[k] = d.Size == 1
		}
	}
	out := Shape{}
	for k, d := range x.shape {
		if !drop[k] {
			out = append(out, d)
		}
	}
	res := mk(x.dt, out)
	res.vals = x.vals
	return one(res), nil
}

func (c *nodeCtx) unsqueeze() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "axes", true); err != nil {
		return nil, err
	}
	axes, _, ok := c.axesList(1)
	if !ok || x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	if fullyKnown(x.shape) {
		dims, err := UnsqueezeDims(ints(sizes(x.shape)), axes)
		if err != nil {
			return nil, err
		}
		res := mk(x.dt, shapeOf(dims))
		res.vals = x.vals
		return one(res), nil
	}
	r := len(x.shape) + len(axes)
	ins := make([]bool, r)
	for _, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if ins[k] {
			return nil, fmt.Errorf("axes %v repeat axis %d", axes, a)
		}
		ins[k] = true
	}
	out := make(Shape, r)
	j := 0
	for k := range out {
		if ins[k] {
			out[k] = Fixed(1)
			continue
		}
		out[k] = x.shape[j]
		j++
	}
	res := mk(x.dt, out)
	res.vals = x.vals
	return one(res), nil
}

func (c *nodeCtx) expand() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "shape", false); err != nil {
		return nil, err
	}
	target, err := c.shapeFromVec(1, "shape")
	if err != nil {
		return nil, err
	}
	out, err := Broadcast(x.shape, target)
	if err != nil {
		return nil, err
	}
	res := mk(x.dt, out)
	if x.vals != nil && trackable(x.dt, out) {
		vals, err := evalBroadcast(sizes(out), []*absVal{x}, func(v []ival) (ival, error) { return v[0], nil })
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

func (c *nodeCtx) tile() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "repeats", false); err != nil {
		return nil, err
	}
	reps, ok := c.ints(1, "repeats")
	if x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	out := make(Shape, len(x.shape))
	if !ok {
		for i := range out {
			out[i] = unknownDim
		}
		return one(mk(x.dt, out)), nil
	}
	if len(reps) != len(x.shape) {
		return nil, fmt.Errorf("repeats has %d entries for input of rank %d", len(reps), len(x.shape))
	}
	for i, d := range x.shape {
		switch r := reps[i]; {
		case r < 0:
			return nil, fmt.Errorf("negative repeat %d", r)
		case d.Known():
			out[i] = Fixed(d.Size * r)
		case r == 1:
			out[i] = d
		case r == 0:
			out[i] = Fixed(0)
		default:
			out[i] = unknownDim
		}
	}
	res := mk(x.dt, out)
	if x.vals != nil && trackable(x.dt, out) {
		in := sizes(x.shape)
		vals, err := remap(sizes(out), x.vals, in, func(o, s []int64) {
			for i := range s {
				s[i] = o[i] % in[i]
			}
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

// mergeDim merges two dimensions that must be equal; ok is false when both are known and differ.
func mergeDim(a, b Dim) (Dim, bool) {
	switch {
	case a.Known() && b.Known():
		return a, a.Size == b.Size
	case a.Known():
		return a, true
	case b.Known():
		return b, true
	case a.Param != "" && a.Param == b.Param:
		return a, true
	}
	return unknownDim, true
}

func (c *nodeCtx) concat() ([]*absVal, error) {
	a, ok := c.n.Attrs["axis"]
	if !ok || a.Kind != AttrInt {
		return nil, errors.New(`Concat needs the integer attribute "axis"`)
	}
	var first *absVal
	var shape Shape
	for i := range c.in {
		v, err := c.req(i)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = v
		} else if v.dt != first.dt {
			return nil, fmt.Errorf("input %q has dtype %v, want %v like input %q", c.name(i), v.dt, first.dt, c.name(0))
		}
		if v.shape == nil {
			continue
		}
		if shape != nil && len(v.shape) != len(shape) {
			return nil, fmt.Errorf("input %q has rank %d (%v), others rank %d", c.name(i), len(v.shape), v.shape, len(shape))
		}
		if shape == nil {
			shape = v.shape
		}
	}
	if shape == nil {
		return one(mk(first.dt, nil)), nil
	}
	axis, err := NormAxis(a.I, len(shape))
	if err != nil {
		return nil, err
	}
	out := cloneShape(shape)
	sum := int64(0)
	sumKnown := true
	for i, v := range c.in {
		if v.shape == nil {
			sumKnown = false
			continue
		}
		for k, d := range v.shape {
			if k == axis {
				if d.Known() {
					sum += d.Size
				} else {
					sumKnown = false
				}
				continue
			}
			m, ok := mergeDim(out[k], d)
			if !ok {
				return nil, fmt.Errorf("input %q has shape %v, which differs from %v off the concat axis %d", c.name(i), v.shape, shape, axis)
			}
			out[k] = m
		}
	}
	out[axis] = unknownDim
	if sumKnown {
		out[axis] = Fixed(sum)
	} else if len(c.in) == 1 {
		out[axis] = shape[axis]
	}
	res := mk(first.dt, out)
	if !trackable(first.dt, out) {
		return one(res), nil
	}
	total, _ := numel(out)
	full := make([]ival, total)
	ost := strides(sizes(out))
	off := int64(0)
	for _, v := range c.in {
		if v.vals == nil {
			return one(res), nil
		}
		in := sizes(v.shape)
		ist := strides(in)
		err := forEach(in, func(idx []int64) error {
			src, dst := int64(0), int64(0)
			for k := range idx {
				src += idx[k] * ist[k]
				j := idx[k]
				if k == axis {
					j += off
				}
				dst += j * ost[k]
			}
			if src >= int64(len(v.vals)) || dst >= int64(len(full)) {
				return errors.New("internal: concat index out of range")
			}
			full[dst] = v.vals[src]
			return nil
		})
		if err != nil {
			return nil, err
		}
		off += in[axis]
	}
	res.vals = full
	return one(res), nil
}

func (c *nodeCtx) split() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "split", false); err != nil {
		return nil, err
	}
	k := len(c.n.Outputs)
	outs := make([]*absVal, k)
	if x.shape == nil {
		for i := range outs {
			outs[i] = mk(x.dt, nil)
		}
		return outs, nil
	}
	axis, err := NormAxis(attrInt(c.n, "axis"), len(x.shape))
	if err != nil {
		return nil, err
	}
	dim := x.shape[axis]
	parts := make([]Dim, k)
	switch {
	case c.arg(1) != nil:
		sp, ok := c.ints(1, "split")
		if !ok {
			for i := range parts {
				parts[i] = unknownDim
			}
			break
		}
		if len(sp) != k {
			return nil, fmt.Errorf("split has %d entries for %d outputs", len(sp), k)
		}
		sum := int64(0)
		for i, s := range sp {
			if s < 0 {
				return nil, fmt.Errorf("split entry %d is negative (%d)", i, s)
			}
			sum += s
			parts[i] = Fixed(s)
		}
		if dim.Known() && sum != dim.Size {
			return nil, fmt.Errorf("split sizes %v sum to %d, but axis %d has size %d", sp, sum, axis, dim.Size)
		}
	case dim.Known():
		n := dim.Size
		if num := attrInt(c.n, "num_outputs"); num != 0 {
			if num != int64(k) {
				return nil, fmt.Errorf("num_outputs is %d but the node has %d outputs", num, k)
			}
			chunk := (n + num - 1) / num
			for i := range parts {
				s := min(chunk, max(n-int64(i)*chunk, 0))
				parts[i] = Fixed(s)
			}
			break
		}
		if n%int64(k) != 0 {
			return nil, fmt.Errorf("axis %d of size %d does not split evenly into %d outputs", axis, n, k)
		}
		for i := range parts {
			parts[i] = Fixed(n / int64(k))
		}
	default:
		for i := range parts {
			parts[i] = unknownDim
		}
		if k == 1 {
			parts[0] = dim
		}
	}
	start := int64(0)
	for i := range outs {
		s := cloneShape(x.shape)
		s[axis] = parts[i]
		outs[i] = mk(x.dt, s)
		if x.vals != nil && fullyKnown(s) {
			off := start
			vals, err := remap(sizes(s), x.vals, sizes(x.shape), func(o, src []int64) {
				copy(src, o)
				src[axis] += off
			})
			if err != nil {
				return nil, err
			}
			outs[i].vals = vals
		}
		if parts[i].Known() {
			start += parts[i].Size
		}
	}
	return outs, nil
}

func (c *nodeCtx) slice() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	for i, what := range []string{"starts", "ends", "axes", "steps"} {
		if i < 2 {
			if _, err := c.req(i + 1); err != nil {
				return nil, err
			}
		}
		if err := c.checkVec(i+1, what, false); err != nil {
			return nil, err
		}
	}
	if x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	r := len(x.shape)
	starts := c.elems(1, "starts")
	ends := c.elems(2, "ends")
	var axes, steps []int64
	ok := true
	if c.arg(3) != nil {
		axes, ok = c.ints(3, "axes")
	}
	if ok && c.arg(4) != nil {
		steps, ok = c.ints(4, "steps")
	}
	if starts == nil || ends == nil || !ok {
		out := make(Shape, r)
		for i := range out {
			out[i] = unknownDim
		}
		// Axes that are not sliced keep their size when it is known which axes are sliced.
		var sliced []int64
		known := true
		switch {
		case c.arg(3) != nil:
			sliced, known = axes, axes != nil
		default:
			st := c.arg(1)
			if known = st.shape != nil && len(st.shape) == 1 && st.shape[0].Known(); known {
				for k := int64(0); k < st.shape[0].Size; k++ {
					sliced = append(sliced, k)
				}
			}
		}
		if known {
			copy(out, x.shape)
			for _, a := range sliced {
				if k, err := NormAxis(a, r); err == nil {
					out[k] = unknownDim
				}
			}
		}
		return one(mk(x.dt, out)), nil
	}
	if len(starts) != len(ends) {
		return nil, fmt.Errorf("starts has %d entries, ends %d", len(starts), len(ends))
	}
	if axes == nil {
		axes = make([]int64, len(starts))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if steps == nil {
		steps = make([]int64, len(starts))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("starts, ends, axes and steps have %d, %d, %d and %d entries", len(starts), len(ends), len(axes), len(steps))
	}
	out := cloneShape(x.shape)
	first := make([]int64, r)
	step := make([]int64, r)
	for i := range step {
		step[i] = 1
	}
	seen := make([]bool, r)
	for i, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, fmt.Errorf("axes %v repeat axis %d", axes, a)
		}
		seen[k] = true
		if steps[i] == 0 {
			return nil, fmt.Errorf("step for axis %d is 0", a)
		}
		step[k] = steps[i]
		d, s, e := x.shape[k], starts[i], ends[i]
		switch {
		case d.Known() && s.known && e.known:
			f, n := SliceBound(s.v, e.v, steps[i], d.Size)
			first[k] = f
			out[k] = Fixed(n)
		case s.known && s.v == 0 && steps[i] == 1 && e.known && e.v >= math.MaxInt32:
			// x[0:] keeps the whole axis.
		case s.known && s.v == 0 && steps[i] == 1 && !e.known && e.sym != "":
			// x[0:seq]: a valid graph's symbolic bound lies within the axis.
			out[k] = Sym(e.sym)
		default:
			out[k] = unknownDim
		}
	}
	res := mk(x.dt, out)
	if x.vals != nil && fullyKnown(out) {
		vals, err := remap(sizes(out), x.vals, sizes(x.shape), func(o, s []int64) {
			for k := range s {
				s[k] = first[k] + o[k]*step[k]
			}
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

func (c *nodeCtx) gather() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	idx, err := c.req(1)
	if err != nil {
		return nil, err
	}
	if !isInt(idx.dt) {
		return nil, fmt.Errorf("indices input %q has dtype %v, want int64 or int32", c.name(1), idx.dt)
	}
	if x.shape == nil || idx.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	if len(x.shape) == 0 {
		return nil, errors.New("data must have rank ≥ 1, got a scalar")
	}
	axis, err := NormAxis(attrInt(c.n, "axis"), len(x.shape))
	if err != nil {
		return nil, err
	}
	out := Shape{}
	out = append(out, x.shape[:axis]...)
	out = append(out, idx.shape...)
	out = append(out, x.shape[axis+1:]...)
	res := mk(x.dt, out)
	dim := x.shape[axis]
	var ind []int64
	if idx.vals != nil {
		ind = make([]int64, len(idx.vals))
		for i, v := range idx.vals {
			if !v.known {
				ind = nil
				break
			}
			ind[i] = v.v
		}
	}
	if ind != nil && dim.Known() {
		for i, v := range ind {
			if v < -dim.Size || v >= dim.Size {
				return nil, fmt.Errorf("index %d is out of range for axis %d of size %d", v, axis, dim.Size)
			}
			if v < 0 {
				ind[i] = v + dim.Size
			}
		}
	}
	if x.vals != nil && ind != nil && fullyKnown(out) && fullyKnown(x.shape) {
		q := len(idx.shape)
		ist := strides(sizes(idx.shape))
		vals, err := remap(sizes(out), x.vals, sizes(x.shape), func(o, s []int64) {
			copy(s[:axis], o[:axis])
			f := int64(0)
			for j := 0; j < q; j++ {
				f += o[axis+j] * ist[j]
			}
			if f < int64(len(ind)) {
				s[axis] = ind[f]
			}
			copy(s[axis+1:], o[axis+q:])
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}
