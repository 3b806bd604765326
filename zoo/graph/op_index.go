package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Indexing and type operators for imported files: GatherElements, GatherND, ScatterElements,
// OneHot, NonZero, Compress, Size, EyeLike and CastLike.

func init() {
	register(&OpDef{
		Name: "GatherElements", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "out[i][j][k] = data[indices[i][j][k]][j][k] along axis (negative indices count from the end)",
		Inputs: ps(req("data"), req("indices")), Outputs: ps(req("output")),
		Attrs: []AttrDef{intAttr("axis", 0)},
		infer: (*nodeCtx).gatherElements,
		Eval:  evalGatherElements,
		Cost:  readsWhatItWrites,
		Grad:  NoGradYet,
	})
	register(&OpDef{
		Name: "GatherND", SinceVersion: 12, ThroughVersion: LatestOpset,
		Doc:    "the slices of data that the last axis of indices addresses, after batch_dims shared leading axes",
		Inputs: ps(req("data"), req("indices")), Outputs: ps(req("output")),
		Attrs: []AttrDef{intAttr("batch_dims", 0)},
		infer: (*nodeCtx).gatherND,
		Eval:  evalGatherND,
		Cost:  readsWhatItWrites,
		Grad:  NoGradYet,
	})
	register(&OpDef{
		Name: "ScatterElements", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "a copy of data with updates written along axis at indices (reduction none, add, mul, max or min)",
		Inputs: ps(req("data"), req("indices"), req("updates")), Outputs: ps(req("output")),
		Attrs: []AttrDef{intAttr("axis", 0), {Name: "reduction", Kind: AttrString, Default: String("none")}},
		infer: (*nodeCtx).scatterElements,
		Eval:  evalScatterElements,
		Cost:  perInput(1),
		Grad:  NoGradYet,
	})
	register(&OpDef{
		Name: "OneHot", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "values[1] at each index's position along a new axis of size depth, values[0] elsewhere (negative indices count from the end)",
		Inputs: ps(req("indices"), req("depth"), req("values")), Outputs: ps(req("output")),
		Attrs: []AttrDef{intAttr("axis", -1)},
		infer: (*nodeCtx).oneHot,
		Eval:  evalOneHot,
		Cost:  writeCost,
		Grad:  NoGrad,
	})
	register(&OpDef{
		Name: "NonZero", SinceVersion: 9, ThroughVersion: LatestOpset,
		Doc:    "the indices of the nonzero elements, one row per axis (row-major order), as int64",
		Inputs: ps(req("X")), Outputs: ps(req("Y")),
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if x.shape == nil {
				return one(mk(tensor.Int64, Shape{unknownDim, unknownDim})), nil
			}
			return one(mk(tensor.Int64, Shape{Fixed(int64(len(x.shape))), unknownDim})), nil
		},
		Eval: evalNonZero,
		Cost: writeCost,
		Grad: NoGrad,
	})
	register(&OpDef{
		Name: "Compress", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "the slices along axis (of the flattened input without one) where condition is true",
		Inputs: ps(req("input"), req("condition")), Outputs: ps(req("output")),
		Attrs: []AttrDef{optIntAttr("axis")},
		infer: (*nodeCtx).compress,
		Eval:  evalCompress,
		Cost:  readsWhatItWrites,
		Grad:  NoGradYet,
	})
	register(&OpDef{
		Name: "Size", SinceVersion: 1, ThroughVersion: LatestOpset,
		Doc:    "the input's number of elements, as an int64 scalar",
		Inputs: ps(req("data")), Outputs: ps(req("size")),
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			out := mk(tensor.Int64, Shape{})
			if n, ok := numel(x.shape); ok {
				out.vals = []ival{kv(n)}
			}
			return one(out), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{tensor.Scalar64(int64(NumElements(in[0].Shape)))}, nil
		},
		Cost:    writeCost,
		Grad:    NoGrad,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "EyeLike", SinceVersion: 9, ThroughVersion: LatestOpset,
		Doc:    "a 2-D tensor of the input's shape with ones on diagonal k (dtype: the attribute, else the input's)",
		Inputs: ps(req("input")), Outputs: ps(req("output")),
		Attrs: []AttrDef{optIntAttr("dtype"), intAttr("k", 0)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if x.shape != nil && len(x.shape) != 2 {
				return nil, fmt.Errorf("input %q has rank %d, want 2", c.name(0), len(x.shape))
			}
			dt := x.dt
			if a, ok := c.n.Attrs["dtype"]; ok {
				dt = tensor.DType(a.I)
			}
			if dt.Size() == 0 || dt == tensor.Float16 || dt == tensor.BFloat16 {
				return nil, fmt.Errorf("dtype %v is not supported", dt)
			}
			return one(mk(dt, cloneShape(x.shape))), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x := in[0]
			dt := x.DType
			if a, ok := n.Attrs["dtype"]; ok {
				dt = tensor.DType(a.I)
			}
			out, err := newTensor(dt, x.Shape)
			if err != nil {
				return nil, err
			}
			k := int(attrInt(n, "k"))
			rows, cols := x.Shape[0], x.Shape[1]
			for i := 0; i < rows; i++ {
				if j := i + k; j >= 0 && j < cols {
					setOne(out, i*cols+j)
				}
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost:    writeCost,
		Grad:    NoGrad,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "CastLike", SinceVersion: 15, ThroughVersion: LatestOpset,
		Doc:    "input converted to target_type's element type, as Cast does",
		Inputs: ps(req("input"), req("target_type")), Outputs: ps(req("output")),
		Attrs: []AttrDef{intAttr("saturate", 1)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			t, err := c.req(1)
			if err != nil {
				return nil, err
			}
			out := mk(t.dt, cloneShape(x.shape))
			if x.vals != nil && tracksVals(t.dt) && isInt(x.dt) == isInt(t.dt) {
				out.vals = x.vals
			}
			return one(out), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			cast := &Node{Name: n.Name, Op: "Cast", Attrs: Attrs{"to": Int(int64(in[1].DType))}}
			return evalCast(cast, in[:1])
		},
		Cost:    moveCost,
		Grad:    NoGradYet,
		Float64: true, Uint64: true,
	})
}

// setOne stores 1 at element k of t, whatever its dtype.
func setOne(t *tensor.Tensor, k int) {
	switch {
	case t.DType == tensor.Bool:
		t.Bool[k] = true
	case t.DType.HeldInI64():
		t.I64[k] = 1
	default:
		setNum(t, k, 1)
	}
}

// indexAt returns element k of an integer index tensor, negative values counted back from
// size; it errors outside [-size, size).
func indexAt(idx *tensor.Tensor, k, size int) (int, error) {
	v := idx.I64[k]
	if v < -int64(size) || v >= int64(size) {
		return 0, fmt.Errorf("index %d is out of range for an axis of size %d", v, size)
	}
	if v < 0 {
		v += int64(size)
	}
	return int(v), nil
}

// checkIndices checks that input i holds int32 or int64 indices.
func (c *nodeCtx) checkIndices(i int) (*absVal, error) {
	v, err := c.req(i)
	if err != nil {
		return nil, err
	}
	if v.dt != tensor.Int64 && v.dt != tensor.Int32 {
		return nil, fmt.Errorf("indices input %q has dtype %v, want int64 or int32", c.name(i), v.dt)
	}
	return v, nil
}

// ---- GatherElements, ScatterElements ----

func (c *nodeCtx) gatherElements() ([]*absVal, error) {
	data, err := c.req(0)
	if err != nil {
		return nil, err
	}
	idx, err := c.checkIndices(1)
	if err != nil {
		return nil, err
	}
	if data.shape != nil && idx.shape != nil {
		if len(data.shape) != len(idx.shape) {
			return nil, fmt.Errorf("indices have rank %d, data %d: they must agree", len(idx.shape), len(data.shape))
		}
		if _, err := NormAxis(attrInt(c.n, "axis"), len(data.shape)); err != nil {
			return nil, err
		}
	}
	return one(mk(data.dt, cloneShape(idx.shape))), nil
}

func evalGatherElements(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	data, idx := in[0], in[1]
	axis, err := NormAxis(attrInt(n, "axis"), len(data.Shape))
	if err != nil {
		return nil, err
	}
	for d := range idx.Shape {
		if d != axis && idx.Shape[d] > data.Shape[d] {
			return nil, fmt.Errorf("indices shape %s exceeds data shape %s on axis %d", tensor.ShapeString(idx.Shape), tensor.ShapeString(data.Shape), d)
		}
	}
	st := tensor.Strides(data.Shape)
	out, err := newTensor(data.DType, idx.Shape)
	if err != nil {
		return nil, err
	}
	err = forIndex(idx.Shape, func(o int, at []int) error {
		j, err := indexAt(idx, o, data.Shape[axis])
		if err != nil {
			return err
		}
		src := 0
		for d, i := range at {
			if d == axis {
				i = j
			}
			src += i * st[d]
		}
		copyElem(out, o, data, src)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func (c *nodeCtx) scatterElements() ([]*absVal, error) {
	data, err := c.req(0)
	if err != nil {
		return nil, err
	}
	idx, err := c.checkIndices(1)
	if err != nil {
		return nil, err
	}
	upd, err := c.req(2)
	if err != nil {
		return nil, err
	}
	if upd.dt != data.dt {
		return nil, fmt.Errorf("updates input %q has dtype %v, want %v like data", c.name(2), upd.dt, data.dt)
	}
	switch red := c.n.Str("reduction", "none"); red {
	case "none":
	case "add", "mul", "max", "min":
		if !isNumeric(data.dt) {
			return nil, fmt.Errorf("reduction %q needs a number type, data is %v", red, data.dt)
		}
	default:
		return nil, fmt.Errorf("reduction %q is not none, add, mul, max or min", red)
	}
	if data.shape != nil && idx.shape != nil {
		if len(data.shape) != len(idx.shape) {
			return nil, fmt.Errorf("indices have rank %d, data %d: they must agree", len(idx.shape), len(data.shape))
		}
		if _, err := NormAxis(attrInt(c.n, "axis"), len(data.shape)); err != nil {
			return nil, err
		}
	}
	if idx.shape != nil && upd.shape != nil && !sameShape(idx.shape, upd.shape) {
		return nil, fmt.Errorf("updates have shape %v, indices %v: they must agree", upd.shape, idx.shape)
	}
	return one(mk(data.dt, cloneShape(data.shape))), nil
}

// sameShape reports whether two static shapes can be equal (unknown dimensions match anything).
func sameShape(a, b Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Known() && b[i].Known() && a[i].Size != b[i].Size {
			return false
		}
	}
	return true
}

func evalScatterElements(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	data, idx, upd := in[0], in[1], in[2]
	axis, err := NormAxis(attrInt(n, "axis"), len(data.Shape))
	if err != nil {
		return nil, err
	}
	if !tensor.SameShape(idx.Shape, upd.Shape) {
		return nil, fmt.Errorf("updates shape %s differs from indices shape %s", tensor.ShapeString(upd.Shape), tensor.ShapeString(idx.Shape))
	}
	for d := range idx.Shape {
		if d != axis && idx.Shape[d] > data.Shape[d] {
			return nil, fmt.Errorf("indices shape %s exceeds data shape %s on axis %d", tensor.ShapeString(idx.Shape), tensor.ShapeString(data.Shape), d)
		}
	}
	red := n.Str("reduction", "none")
	out := data.Clone()
	st := tensor.Strides(data.Shape)
	err = forIndex(idx.Shape, func(o int, at []int) error {
		j, err := indexAt(idx, o, data.Shape[axis])
		if err != nil {
			return err
		}
		dst := 0
		for d, i := range at {
			if d == axis {
				i = j
			}
			dst += i * st[d]
		}
		if red == "none" {
			copyElem(out, dst, upd, o)
			return nil
		}
		combineElem(out, dst, upd, o, red)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

// combineElem sets element di of dst to dst[di] red src[si] (add, mul, max or min).
func combineElem(dst *tensor.Tensor, di int, src *tensor.Tensor, si int, red string) {
	if isInt(dst.DType) {
		a, b := dst.I64[di], src.I64[si]
		switch red {
		case "add":
			a += b
		case "mul":
			a *= b
		case "max":
			a = max(a, b)
		case "min":
			a = min(a, b)
		}
		dst.I64[di] = wrapInt(dst.DType, a)
		return
	}
	a, b := numAt(dst, di), numAt(src, si)
	switch red {
	case "add":
		a += b
	case "mul":
		a *= b
	case "max":
		if b > a || b != b {
			a = b
		}
	case "min":
		if b < a || b != b {
			a = b
		}
	}
	setNum(dst, di, a)
}

// ---- GatherND ----

func (c *nodeCtx) gatherND() ([]*absVal, error) {
	data, err := c.req(0)
	if err != nil {
		return nil, err
	}
	idx, err := c.req(1)
	if err != nil {
		return nil, err
	}
	if idx.dt != tensor.Int64 {
		return nil, fmt.Errorf("indices input %q has dtype %v, want int64", c.name(1), idx.dt)
	}
	b := int(attrInt(c.n, "batch_dims"))
	if data.shape == nil || idx.shape == nil {
		return one(mk(data.dt, nil)), nil
	}
	r, q := len(data.shape), len(idx.shape)
	if b < 0 || b >= min(r, q) {
		return nil, fmt.Errorf("batch_dims %d is outside [0, %d)", b, min(r, q))
	}
	last := idx.shape[q-1]
	if !last.Known() {
		return one(mk(data.dt, nil)), nil
	}
	k := int(last.Size)
	if k < 1 || b+k > r {
		return nil, fmt.Errorf("indices address %d axes after %d batch axes of data of rank %d", k, b, r)
	}
	out := append(cloneShape(idx.shape[:q-1]), data.shape[b+k:]...)
	return one(mk(data.dt, out)), nil
}

func evalGatherND(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	data, idx := in[0], in[1]
	b := int(attrInt(n, "batch_dims"))
	q := len(idx.Shape)
	k := idx.Shape[q-1]
	for d := 0; d < b; d++ {
		if idx.Shape[d] != data.Shape[d] {
			return nil, fmt.Errorf("batch axis %d: indices have %d, data %d", d, idx.Shape[d], data.Shape[d])
		}
	}
	slice := NumElements(data.Shape[b+k:])
	shape := append(append([]int{}, idx.Shape[:q-1]...), data.Shape[b+k:]...)
	out, err := newTensor(data.DType, shape)
	if err != nil {
		return nil, err
	}
	st := tensor.Strides(data.Shape)
	batchSize := NumElements(data.Shape[:b])
	perBatch := NumElements(idx.Shape[b : q-1])
	if batchSize == 0 || perBatch == 0 {
		return []*tensor.Tensor{out}, nil
	}
	dataBatch := NumElements(data.Shape[b:])
	o := 0
	for bi := 0; bi < batchSize*perBatch; bi++ {
		base := (bi / perBatch) * dataBatch
		for j := 0; j < k; j++ {
			p, err := indexAt(idx, bi*k+j, data.Shape[b+j])
			if err != nil {
				return nil, err
			}
			base += p * st[b+j]
		}
		for s := 0; s < slice; s++ {
			copyElem(out, o, data, base+s)
			o++
		}
	}
	return []*tensor.Tensor{out}, nil
}

// ---- OneHot ----

func (c *nodeCtx) oneHot() ([]*absVal, error) {
	idx, err := c.req(0)
	if err != nil {
		return nil, err
	}
	depth, err := c.req(1)
	if err != nil {
		return nil, err
	}
	vals, err := c.req(2)
	if err != nil {
		return nil, err
	}
	if !isNumeric(idx.dt) || !isNumeric(depth.dt) {
		return nil, fmt.Errorf("indices and depth must be numbers, are %v and %v", idx.dt, depth.dt)
	}
	if vals.shape != nil && (len(vals.shape) != 1 || (vals.shape[0].Known() && vals.shape[0].Size != 2)) {
		return nil, fmt.Errorf("values input %q has shape %v, want (2)", c.name(2), vals.shape)
	}
	if idx.shape == nil {
		return one(mk(vals.dt, nil)), nil
	}
	r := len(idx.shape) + 1
	axis, err := NormAxis(attrInt(c.n, "axis"), r)
	if err != nil {
		return nil, err
	}
	d := unknownDim
	if v, ok := c.ints(1, "depth"); ok && len(v) == 1 {
		d = Fixed(v[0])
	} else if depth.floats != nil && len(depth.floats) == 1 {
		d = Fixed(int64(depth.floats[0]))
	}
	out := append(append(cloneShape(idx.shape[:axis]), d), idx.shape[axis:]...)
	return one(mk(vals.dt, out)), nil
}

func evalOneHot(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	idx, depthT, vals := in[0], in[1], in[2]
	if depthT.Len() != 1 {
		return nil, errors.New("depth must hold one value")
	}
	depth := int(numAt(depthT, 0))
	if depth < 1 {
		return nil, fmt.Errorf("depth %d is not positive", depth)
	}
	if vals.Len() != 2 {
		return nil, errors.New("values must hold two elements (off, on)")
	}
	axis, err := NormAxis(attrInt(n, "axis"), len(idx.Shape)+1)
	if err != nil {
		return nil, err
	}
	shape := append(append(append([]int{}, idx.Shape[:axis]...), depth), idx.Shape[axis:]...)
	out, err := newTensor(vals.DType, shape)
	if err != nil {
		return nil, err
	}
	for k := 0; k < out.Len(); k++ {
		copyElem(out, k, vals, 0)
	}
	outer, inner := NumElements(idx.Shape[:axis]), NumElements(idx.Shape[axis:])
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			v := int(numAt(idx, o*inner+i)) // float indices truncate toward zero
			if isInt(idx.DType) {
				v = int(idx.I64[o*inner+i])
			}
			if v < 0 {
				v += depth
			}
			if v < 0 || v >= depth {
				continue // outside [-depth, depth): no position is on
			}
			copyElem(out, (o*depth+v)*inner+i, vals, 1)
		}
	}
	return []*tensor.Tensor{out}, nil
}

// ---- NonZero, Compress ----

// nonzeroAt reports whether element k is nonzero (true for bools).
func nonzeroAt(t *tensor.Tensor, k int) bool {
	switch {
	case t.DType == tensor.Bool:
		return t.Bool[k]
	case t.DType.HeldInI64():
		return t.I64[k] != 0
	}
	return numAt(t, k) != 0
}

func evalNonZero(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	var hits [][]int
	_ = forIndex(x.Shape, func(flat int, idx []int) error {
		if nonzeroAt(x, flat) {
			hits = append(hits, append([]int{}, idx...))
		}
		return nil
	})
	out, err := newTensor(tensor.Int64, []int{len(x.Shape), len(hits)})
	if err != nil {
		return nil, err
	}
	for j, h := range hits {
		for d, i := range h {
			out.I64[d*len(hits)+j] = int64(i)
		}
	}
	return []*tensor.Tensor{out}, nil
}

func (c *nodeCtx) compress() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	cond, err := c.req(1)
	if err != nil {
		return nil, err
	}
	if cond.dt != tensor.Bool {
		return nil, fmt.Errorf("condition input %q has dtype %v, want bool", c.name(1), cond.dt)
	}
	if cond.shape != nil && len(cond.shape) != 1 {
		return nil, fmt.Errorf("condition input %q has rank %d, want 1", c.name(1), len(cond.shape))
	}
	a, ok := c.n.Attrs["axis"]
	if !ok {
		return one(mk(x.dt, Shape{unknownDim})), nil
	}
	if x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	axis, err := NormAxis(a.I, len(x.shape))
	if err != nil {
		return nil, err
	}
	out := cloneShape(x.shape)
	out[axis] = unknownDim
	return one(mk(x.dt, out)), nil
}

func evalCompress(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, cond := in[0], in[1]
	shape := x.Shape
	axis := 0
	if a, ok := n.Attrs["axis"]; ok {
		ax, err := NormAxis(a.I, len(x.Shape))
		if err != nil {
			return nil, err
		}
		axis = ax
	} else {
		shape = []int{x.Len()}
	}
	if len(cond.Bool) > shape[axis] {
		return nil, fmt.Errorf("condition has %d elements for an axis of %d", len(cond.Bool), shape[axis])
	}
	var keep []int
	for i, b := range cond.Bool {
		if b {
			keep = append(keep, i)
		}
	}
	outShape := append([]int{}, shape...)
	outShape[axis] = len(keep)
	out, err := newTensor(x.DType, outShape)
	if err != nil {
		return nil, err
	}
	outer, dim, inner := NumElements(shape[:axis]), shape[axis], NumElements(shape[axis+1:])
	o := 0
	for a := 0; a < outer; a++ {
		for _, j := range keep {
			for i := 0; i < inner; i++ {
				copyElem(out, o, x, (a*dim+j)*inner+i)
				o++
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}
