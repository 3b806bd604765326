//go:build cgo && linux

package cuda

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func opShape(n *graph.Node, in []value) ([]value, error) {
	shape := in[0].shape()
	rank := int64(len(shape))
	clampAxis := func(a int64) int64 {
		if a < 0 {
			a += rank
		}
		return min(max(a, 0), rank)
	}
	start := clampAxis(n.Int("start", 0))
	end := clampAxis(n.Int("end", rank))
	var dims []int64
	for i := start; i < end; i++ {
		dims = append(dims, int64(shape[i]))
	}
	t, err := tensor.FromInt64(dims, len(dims))
	if err != nil {
		return nil, err
	}
	return []value{{host: t}}, nil
}

// copyInto launches zoo_copy: for every coordinate of shape, y[ybase+Σc·yst] = x[xbase+Σc·xst].
func (r *run) copyInto(y *dtensor, ybase int64, x *dtensor, xbase int64, shape []int, xst, yst []int64) error {
	n := graph.NumElements(shape)
	if n == 0 {
		return nil
	}
	d := coalesce(shape, xst, yst)
	args, err := (&kargs{}).ptr(y.buf.ptr).i64(ybase).ptr(x.buf.ptr).i64(xbase).i64(int64(n)).desc(d)
	if err != nil {
		return err
	}
	return r.launch("zoo_copy", gridFor(n), 256, args)
}

// gather copies x (strides xst over shape) into a new contiguous tensor of shape.
func (r *run) gather(x *dtensor, xbase int64, shape []int, xst []int64) (*dtensor, error) {
	y, err := r.alloc(shape)
	if err != nil {
		return nil, err
	}
	if err := r.copyInto(y, 0, x, xbase, shape, xst, contiguous(shape)); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return y, nil
}

func opTranspose(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	rank := len(x.shape)
	perm, ok := n.IntList("perm")
	if !ok {
		for i := rank - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != rank {
		return nil, fmt.Errorf("perm %v does not match rank %d", perm, rank)
	}
	cs := contiguous(x.shape)
	shape := make([]int, rank)
	st := make([]int64, rank)
	used := make([]bool, rank)
	for i, p := range perm {
		if p < 0 || int(p) >= rank || used[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, rank-1)
		}
		used[p] = true
		shape[i], st[i] = x.shape[p], cs[p]
	}
	y, err := r.gather(x, 0, shape, st)
	if err != nil {
		return nil, err
	}
	return one(y), nil
}

func opSlice(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	starts, err := hostInts(in[1], "starts")
	if err != nil {
		return nil, err
	}
	ends, err := hostInts(in[2], "ends")
	if err != nil {
		return nil, err
	}
	var axes, steps []int64 // nil: not given (an empty list given stays non-nil)
	if len(in) > 3 && (in[3].host != nil || in[3].dev != nil) {
		if axes, err = hostInts(in[3], "axes"); err != nil {
			return nil, err
		}
		axes = append([]int64{}, axes...)
	}
	if len(in) > 4 && (in[4].host != nil || in[4].dev != nil) {
		if steps, err = hostInts(in[4], "steps"); err != nil {
			return nil, err
		}
		steps = append([]int64{}, steps...)
	}
	shape, base, st, err := sliceView(x.shape, starts, ends, axes, steps)
	if err != nil {
		return nil, err
	}
	y, err := r.gather(x, base, shape, st)
	if err != nil {
		return nil, err
	}
	return one(y), nil
}

func opConcat(r *run, n *graph.Node, in []value) ([]value, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("no inputs")
	}
	xs := make([]*dtensor, len(in))
	for i, v := range in {
		x, err := r.dev(v, i, false)
		if err != nil {
			return nil, err
		}
		xs[i] = x
	}
	rank := len(xs[0].shape)
	ax, err := graph.NormAxis(n.Int("axis", 0), rank)
	if err != nil {
		return nil, err
	}
	shape := append([]int(nil), xs[0].shape...)
	shape[ax] = 0
	for i, x := range xs {
		if len(x.shape) != rank {
			return nil, fmt.Errorf("input %d has rank %d, input 0 has %d", i, len(x.shape), rank)
		}
		for d := range x.shape {
			if d != ax && x.shape[d] != xs[0].shape[d] {
				return nil, fmt.Errorf("input %d has shape %s, incompatible with %s on axis %d", i, tensor.ShapeString(x.shape), tensor.ShapeString(xs[0].shape), ax)
			}
		}
		shape[ax] += x.shape[ax]
	}
	y, err := r.alloc(shape)
	if err != nil {
		return nil, err
	}
	yst := contiguous(shape)
	off := 0
	for _, x := range xs {
		if err := r.copyInto(y, int64(off)*yst[ax], x, 0, x.shape, contiguous(x.shape), yst); err != nil {
			r.releaseBuf(y.buf)
			return nil, err
		}
		off += x.shape[ax]
	}
	return one(y), nil
}

func opSplit(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	rank := len(x.shape)
	ax, err := graph.NormAxis(n.Int("axis", 0), rank)
	if err != nil {
		return nil, err
	}
	outs := len(n.Outputs)
	var sizes []int64
	switch {
	case len(in) > 1 && in[1].host != nil:
		if sizes, err = hostInts(in[1], "split"); err != nil {
			return nil, err
		}
	default:
		if s, ok := n.IntList("split"); ok {
			sizes = s
		}
	}
	dim := x.shape[ax]
	if sizes == nil {
		if dim%outs != 0 {
			return nil, fmt.Errorf("axis %d of size %d cannot be split into %d equal parts", ax, dim, outs)
		}
		for i := 0; i < outs; i++ {
			sizes = append(sizes, int64(dim/outs))
		}
	}
	if len(sizes) != outs {
		return nil, fmt.Errorf("split has %d sizes for %d outputs", len(sizes), outs)
	}
	var sum int64
	for _, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("split sizes %v are negative", sizes)
		}
		sum += s
	}
	if sum != int64(dim) {
		return nil, fmt.Errorf("split sizes %v add up to %d, axis %d has size %d", sizes, sum, ax, dim)
	}
	cs := contiguous(x.shape)
	res := make([]value, 0, outs)
	var off int64
	for _, s := range sizes {
		shape := append([]int(nil), x.shape...)
		shape[ax] = int(s)
		y, err := r.gather(x, off*cs[ax], shape, cs)
		if err != nil {
			for _, v := range res {
				r.release(v)
			}
			return nil, err
		}
		res = append(res, value{dev: y})
		off += s
	}
	return res, nil
}

func opExpand(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	dims, err := hostInts(in[1], "shape")
	if err != nil {
		return nil, err
	}
	shape, err := expandView(x.shape, dims)
	if err != nil {
		return nil, err
	}
	y, err := r.gather(x, 0, shape, broadcastStrides(x.shape, shape))
	if err != nil {
		return nil, err
	}
	return one(y), nil
}

func opTile(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	reps, err := hostInts(in[1], "repeats")
	if err != nil {
		return nil, err
	}
	rank := len(x.shape)
	if len(reps) != rank {
		return nil, fmt.Errorf("repeats has %d values for rank %d", len(reps), rank)
	}
	// Tile is a broadcast over (r0, d0, r1, d1, ...) read with stride 0 along each r.
	cs := contiguous(x.shape)
	out := make([]int, rank)
	var ishape []int
	var xst []int64
	for i, d := range x.shape {
		if reps[i] < 0 {
			return nil, fmt.Errorf("repeats %v are negative", reps)
		}
		out[i] = d * int(reps[i])
		ishape = append(ishape, int(reps[i]), d)
		xst = append(xst, 0, cs[i])
	}
	y, err := r.alloc(out)
	if err != nil {
		return nil, err
	}
	ycs := contiguous(out)
	var yst []int64
	for i, d := range x.shape {
		yst = append(yst, int64(d)*ycs[i], ycs[i])
	}
	if err := r.copyInto(y, 0, x, 0, ishape, xst, yst); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}

func opReshape(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	target, err := hostInts(in[1], "shape")
	if err != nil {
		return nil, err
	}
	shape, err := reshapeView(n, x.shape, target)
	if err != nil {
		return nil, err
	}
	return one(r.view(x, shape)), nil
}

// axesOf returns the axes of Squeeze, Unsqueeze or a Reduce from input 1 or, in older
// opsets, the "axes" attribute, and whether any were given (a given empty list is
// non-nil).
func axesOf(n *graph.Node, in []value) ([]int64, bool, error) {
	if len(in) > 1 && (in[1].host != nil || in[1].dev != nil) {
		a, err := hostInts(in[1], "axes")
		return append([]int64{}, a...), true, err
	}
	a, ok := n.IntList("axes")
	if ok {
		a = append([]int64{}, a...)
	}
	return a, ok, nil
}

// axesView returns the op for Squeeze or Unsqueeze: a view of the input under the shape
// that view (squeezeView or unsqueezeView) computes from the axes (input or attribute).
func axesView(view func(shape []int, axes []int64, given bool) ([]int, error)) func(*run, *graph.Node, []value) ([]value, error) {
	return func(r *run, n *graph.Node, in []value) ([]value, error) {
		x, err := r.dev(in[0], 0, false)
		if err != nil {
			return nil, err
		}
		axes, given, err := axesOf(n, in)
		if err != nil {
			return nil, err
		}
		shape, err := view(x.shape, axes, given)
		if err != nil {
			return nil, err
		}
		return one(r.view(x, shape)), nil
	}
}

func opIdentity(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	return one(r.view(x, x.shape)), nil
}

func opGather(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	idxT := in[1].host
	if idxT == nil || (idxT.DType != tensor.Int64 && idxT.DType != tensor.Int32) {
		return nil, fmt.Errorf("indices must be an int64 tensor")
	}
	rank := len(x.shape)
	ax, err := graph.NormAxis(n.Int("axis", 0), rank)
	if err != nil {
		return nil, err
	}
	dim := int64(x.shape[ax])
	idx := make([]int64, len(idxT.I64))
	for i, v := range idxT.I64 {
		if v < -dim || v >= dim {
			return nil, fmt.Errorf("index %d is out of range for axis %d of size %d", v, ax, dim)
		}
		if v < 0 {
			v += dim
		}
		idx[i] = v
	}
	shape := append(append(append([]int(nil), x.shape[:ax]...), idxT.Shape...), x.shape[ax+1:]...)
	y, err := r.alloc(shape)
	if err != nil {
		return nil, err
	}
	if y.n() == 0 {
		return one(y), nil
	}
	ib, err := r.uploadBytes(ptrOf(int64Bytes(idx)), 8*len(idx))
	if err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	r.temp(ib)
	outer, inner := graph.NumElements(x.shape[:ax]), graph.NumElements(x.shape[ax+1:])
	a := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).ptr(ib.ptr).i64(int64(outer)).i64(int64(len(idx))).i64(dim).i64(int64(inner))
	if err := r.launch("zoo_gather", gridFor(y.n()), 256, a); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}
