package cpu

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func makeIdentity(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		return []*tensor.Tensor{in[0]}, nil
	}, nil
}

// makeConstant reads value (a tensor), value_float(s) or value_int(s).
func makeConstant(n *graph.Node) (kernel, error) {
	var t *tensor.Tensor
	for name, a := range n.Attrs {
		switch {
		case name == "value" && a.Kind == graph.AttrTensor:
			t = a.T
		case name == "value_float" && a.Kind == graph.AttrFloat:
			t = tensor.ScalarF(a.F)
		case name == "value_floats" && a.Kind == graph.AttrFloats:
			t = &tensor.Tensor{DType: tensor.Float32, Shape: []int{len(a.Floats)}, F32: append([]float32{}, a.Floats...)}
		case name == "value_int" && a.Kind == graph.AttrInt:
			t = tensor.Scalar64(a.I)
		case name == "value_ints" && a.Kind == graph.AttrInts:
			t = &tensor.Tensor{DType: tensor.Int64, Shape: []int{len(a.Ints)}, I64: append([]int64{}, a.Ints...)}
		default:
			return nil, unsupported("attribute %q is not supported (value, value_float(s) and value_int(s) are)", name)
		}
	}
	if t == nil {
		return nil, fmt.Errorf("constant has no value attribute")
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("constant value: %w", err)
	}
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		return []*tensor.Tensor{t}, nil
	}, nil
}

// shapeArg reads a 1-D int64 shape tensor into dims.
func shapeArg(t *tensor.Tensor, what string) ([]int64, error) {
	v, err := intValues(t, what)
	if err != nil {
		return nil, err
	}
	if len(t.Shape) > 1 {
		return nil, fmt.Errorf("%s must be 1-D, got shape %s", what, tensor.ShapeString(t.Shape))
	}
	return v, nil
}

func makeConstantOfShape(n *graph.Node) (kernel, error) {
	val := tensor.ScalarF(0)
	if a, ok := n.Attrs["value"]; ok {
		if a.Kind != graph.AttrTensor || a.T == nil || a.T.Len() != 1 {
			return nil, fmt.Errorf("attribute value must be a one-element tensor")
		}
		val = a.T
	}
	switch val.DType {
	case tensor.Float32, tensor.Int32, tensor.Int64, tensor.Bool:
	default:
		return nil, unsupported("value dtype %v is not supported", val.DType)
	}
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		dims, err := shapeArg(in[0], "shape")
		if err != nil {
			return nil, err
		}
		shape := make([]int, len(dims))
		for i, d := range dims {
			if d < 0 {
				return nil, fmt.Errorf("shape %v has a negative dimension", dims)
			}
			shape[i] = int(d)
		}
		out, err := e.allocOverwrite(val.DType, shape)
		if err != nil {
			return nil, err
		}
		switch val.DType {
		case tensor.Float32:
			fill(out.F32, val.F32[0])
		case tensor.Bool:
			fill(out.Bool, val.Bool[0])
		default:
			fill(out.I64, val.I64[0])
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// makeShape implements Shape with opset-15 start and end attributes.
func makeShape(n *graph.Node) (kernel, error) {
	start := n.Int("start", 0)
	end, hasEnd := n.Attrs["end"]
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		r := int64(len(in[0].Shape))
		clampDim := func(v int64) int64 {
			if v < 0 {
				v += r
			}
			return min(max(v, 0), r)
		}
		s, en := clampDim(start), r
		if hasEnd {
			en = clampDim(end.I)
		}
		vals := []int64{}
		for i := s; i < en; i++ {
			vals = append(vals, int64(in[0].Shape[i]))
		}
		return []*tensor.Tensor{{DType: tensor.Int64, Shape: []int{len(vals)}, I64: vals}}, nil
	}, nil
}

// makeReshape implements Reshape: 0 copies the input dimension (unless allowzero=1) and one
// -1 is inferred. The output shares the input's storage.
func makeReshape(n *graph.Node) (kernel, error) {
	allowZero := n.Int("allowzero", 0) != 0
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		x := in[0]
		dims, err := shapeArg(in[1], "shape")
		if err != nil {
			return nil, err
		}
		shape, err := graph.ReshapeDims(x.Shape, dims, allowZero)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{view(x, shape)}, nil
	}, nil
}

// axesArg returns axes from input i when present, else from the "axes" attribute (older
// opsets), and whether any were given.
func axesArg(n *graph.Node, in []*tensor.Tensor, i int) ([]int64, bool, error) {
	if i < len(in) && in[i] != nil {
		v, err := shapeArg(in[i], "axes")
		return v, true, err
	}
	if v, ok := n.IntList("axes"); ok {
		return v, true, nil
	}
	return nil, false, nil
}

// axisMask marks the axes (normalised by graph.NormAxes) among rank.
func axisMask(axes []int64, rank int) ([]bool, error) {
	ks, err := graph.NormAxes(axes, rank)
	if err != nil {
		return nil, err
	}
	mark := make([]bool, rank)
	for _, k := range ks {
		mark[k] = true
	}
	return mark, nil
}

// makeSqueeze implements Squeeze with graph.SqueezeDims: without axes every size-1 axis
// goes; a given (even empty) list removes exactly the axes listed. The output shares the
// input's storage.
func makeSqueeze(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		x := in[0]
		axes, given, err := axesArg(n, in, 1)
		if err != nil {
			return nil, err
		}
		if given {
			axes = append([]int64{}, axes...) // an empty list given is not "no axes"
		}
		shape, err := graph.SqueezeDims(x.Shape, axes)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{view(x, shape)}, nil
	}, nil
}

// makeUnsqueeze implements Unsqueeze with graph.UnsqueezeDims. The output shares the
// input's storage.
func makeUnsqueeze(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		x := in[0]
		axes, given, err := axesArg(n, in, 1)
		if err != nil {
			return nil, err
		}
		if !given {
			return nil, fmt.Errorf("axes are missing")
		}
		shape, err := graph.UnsqueezeDims(x.Shape, axes)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{view(x, shape)}, nil
	}, nil
}

// copyStrided returns a new tensor of shape outShape whose element at multi-index i is
// x[base + Σ i[d]·strides[d]].
func copyStrided(e *exec, x *tensor.Tensor, outShape []int, base int, strides []int) (*tensor.Tensor, error) {
	out, err := e.allocOverwrite(x.DType, outShape)
	if err != nil {
		return nil, err
	}
	if out.Len() == 0 {
		return out, nil
	}
	switch x.DType {
	case tensor.Float32:
		stridedCopy(e.threads, out.F32, outShape, x.F32, base, strides)
	case tensor.Bool:
		stridedCopy(e.threads, out.Bool, outShape, x.Bool, base, strides)
	default:
		stridedCopy(e.threads, out.I64, outShape, x.I64, base, strides)
	}
	return out, nil
}

func makeTranspose(n *graph.Node) (kernel, error) {
	perm, hasPerm := n.IntList("perm")
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		x := in[0]
		r := len(x.Shape)
		p, err := transposeAxes(perm, hasPerm, r)
		if err != nil {
			return nil, err
		}
		st := tensor.Strides(x.Shape)
		shape := make([]int, r)
		strides := make([]int, r)
		for i, ax := range p {
			shape[i] = x.Shape[ax]
			strides[i] = st[ax]
		}
		if movesUnitAxesOnly(p, x.Shape) {
			// The elements keep their order (PyTorch's batch-first/sequence-first swaps at
			// batch 1): a view, as Reshape returns, instead of a copy.
			return []*tensor.Tensor{view(x, shape)}, nil
		}
		return one(copyStrided(e, x, shape, 0, strides))
	}, nil
}

// transposeAxes returns the axes of a Transpose of a rank-r input: perm with negative axes
// counted from the end, or the reversal when the node has no perm; an error when perm is
// not a permutation of the axes.
func transposeAxes(perm []int64, hasPerm bool, r int) ([]int, error) {
	p := make([]int, r)
	if !hasPerm {
		for i := range p {
			p[i] = r - 1 - i
		}
		return p, nil
	}
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v has %d entries for an input of rank %d", perm, len(perm), r)
	}
	seen := make([]bool, r)
	for i, v := range perm {
		ax, err := graph.NormAxis(v, r)
		if err != nil || seen[ax] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, r-1)
		}
		seen[ax] = true
		p[i] = ax
	}
	return p, nil
}

// movesUnitAxesOnly reports whether permutation p of an array of the given shape keeps the
// axes longer than 1 in their order, so that the transposed array has the same elements in
// the same row-major order.
func movesUnitAxesOnly(p, shape []int) bool {
	last := -1
	for _, ax := range p {
		if shape[ax] == 1 {
			continue
		}
		if ax < last {
			return false
		}
		last = ax
	}
	return true
}

// copyBlocks copies, for each of outer rows, a block of blk elements from src (row stride
// blk) into dst at offset off with row stride dstStride.
func copyBlocks[T any](threads int, dst []T, off, dstStride int, src []T, blk, outer int) {
	if blk == 0 {
		return
	}
	grain := max(1, elemGrain/blk)
	workpool.For(threads, outer, grain, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			copy(dst[o*dstStride+off:o*dstStride+off+blk], src[o*blk:(o+1)*blk])
		}
	})
}

// copyBlocksFrom copies, for each of outer rows, blk elements at offset off (row stride
// srcStride) from src into dst (row stride blk).
func copyBlocksFrom[T any](threads int, dst []T, src []T, off, srcStride, blk, outer int) {
	if blk == 0 {
		return
	}
	grain := max(1, elemGrain/blk)
	workpool.For(threads, outer, grain, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			copy(dst[o*blk:(o+1)*blk], src[o*srcStride+off:o*srcStride+off+blk])
		}
	})
}

func makeConcat(n *graph.Node) (kernel, error) {
	if _, ok := n.Attrs["axis"]; !ok {
		return nil, fmt.Errorf("attribute axis is required")
	}
	axisAttr := n.Int("axis", 0)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, len(in)); err != nil {
			return nil, err
		}
		if err := sameDType(in); err != nil {
			return nil, err
		}
		r := len(in[0].Shape)
		axis, err := graph.NormAxis(axisAttr, r)
		if err != nil {
			return nil, err
		}
		shape := append([]int{}, in[0].Shape...)
		shape[axis] = 0
		for i, t := range in {
			if len(t.Shape) != r {
				return nil, fmt.Errorf("input %d has rank %d, input 0 has rank %d", i, len(t.Shape), r)
			}
			for d := range t.Shape {
				if d != axis && t.Shape[d] != in[0].Shape[d] {
					return nil, fmt.Errorf("input %d has shape %s, incompatible with input 0's %s on axis %d", i, tensor.ShapeString(t.Shape), tensor.ShapeString(in[0].Shape), d)
				}
			}
			shape[axis] += t.Shape[axis]
		}
		// Padding by an empty block (a multiple of the block size already) leaves one input
		// whole: it is the result, shared as Identity shares (storage is reference-counted).
		if only := soleNonEmpty(in, axis); only != nil && tensor.SameShape(only.Shape, shape) {
			return []*tensor.Tensor{only}, nil
		}
		out, err := e.allocOverwrite(in[0].DType, shape)
		if err != nil {
			return nil, err
		}
		outer, inner := graph.NumElements(shape[:axis]), graph.NumElements(shape[axis+1:])
		rowOut := shape[axis] * inner
		off := 0
		for _, t := range in {
			blk := t.Shape[axis] * inner
			switch t.DType {
			case tensor.Float32:
				copyBlocks(e.threads, out.F32, off, rowOut, t.F32, blk, outer)
			case tensor.Bool:
				copyBlocks(e.threads, out.Bool, off, rowOut, t.Bool, blk, outer)
			default:
				copyBlocks(e.threads, out.I64, off, rowOut, t.I64, blk, outer)
			}
			off += blk
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

// makeSplit implements Split with the split sizes from input 1 (opset 13+) or the split
// attribute (older opsets), else equal parts (the last one smaller, as num_outputs in
// opset 18, when the axis does not divide evenly).
func makeSplit(n *graph.Node) (kernel, error) {
	axisAttr := n.Int("axis", 0)
	nout := len(n.Outputs)
	splitAttr, hasSplitAttr := n.IntList("split")
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		x := in[0]
		axis, err := graph.NormAxis(axisAttr, len(x.Shape))
		if err != nil {
			return nil, err
		}
		dim := x.Shape[axis]
		var sizes []int64
		switch {
		case len(in) > 1 && in[1] != nil:
			if sizes, err = shapeArg(in[1], "split"); err != nil {
				return nil, err
			}
		case hasSplitAttr:
			sizes = splitAttr
		default:
			chunk := (dim + nout - 1) / nout
			for i := 0; i < nout; i++ {
				sizes = append(sizes, int64(min(chunk, max(dim-i*chunk, 0))))
			}
		}
		if len(sizes) != nout {
			return nil, fmt.Errorf("split has %d sizes for %d outputs", len(sizes), nout)
		}
		total := int64(0)
		for _, s := range sizes {
			if s < 0 {
				return nil, fmt.Errorf("split sizes %v include a negative size", sizes)
			}
			total += s
		}
		if total != int64(dim) {
			return nil, fmt.Errorf("split sizes %v add up to %d, but axis %d has size %d", sizes, total, axis, dim)
		}
		outer, inner := graph.NumElements(x.Shape[:axis]), graph.NumElements(x.Shape[axis+1:])
		row := dim * inner
		outs := make([]*tensor.Tensor, nout)
		off := 0
		for i, s := range sizes {
			shape := append([]int{}, x.Shape...)
			shape[axis] = int(s)
			t, err := e.allocOverwrite(x.DType, shape)
			if err != nil {
				return nil, err
			}
			blk := int(s) * inner
			switch x.DType {
			case tensor.Float32:
				copyBlocksFrom(e.threads, t.F32, x.F32, off, row, blk, outer)
			case tensor.Bool:
				copyBlocksFrom(e.threads, t.Bool, x.Bool, off, row, blk, outer)
			default:
				copyBlocksFrom(e.threads, t.I64, x.I64, off, row, blk, outer)
			}
			off += blk
			outs[i] = t
		}
		return outs, nil
	}, nil
}

// makeSlice implements Slice (opset 13) with graph.SliceDims: negative starts and ends count
// from the end, out of range values are clamped, steps may be negative, axes default to
// 0..len(starts)-1.
func makeSlice(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 3); err != nil {
			return nil, err
		}
		x := in[0]
		starts, err := shapeArg(in[1], "starts")
		if err != nil {
			return nil, err
		}
		ends, err := shapeArg(in[2], "ends")
		if err != nil {
			return nil, err
		}
		var axes, steps []int64 // nil: not given (an empty list given stays non-nil)
		if len(in) > 3 && in[3] != nil {
			if axes, err = shapeArg(in[3], "axes"); err != nil {
				return nil, err
			}
			axes = append([]int64{}, axes...)
		}
		if len(in) > 4 && in[4] != nil {
			if steps, err = shapeArg(in[4], "steps"); err != nil {
				return nil, err
			}
			steps = append([]int64{}, steps...)
		}
		shape, first, step, err := graph.SliceDims(x.Shape, starts, ends, axes, steps)
		if err != nil {
			return nil, err
		}
		st := tensor.Strides(x.Shape)
		strides := make([]int, len(st))
		base := 0
		whole := true
		for k := range st {
			if shape[k] > 0 {
				base += first[k] * st[k]
			}
			strides[k] = st[k] * step[k]
			whole = whole && shape[k] == x.Shape[k] && (first[k] == 0 && step[k] == 1 || x.Shape[k] <= 1)
		}
		if whole && x.Len() > 0 {
			return []*tensor.Tensor{x}, nil // the whole of x, shared as Identity shares
		}
		return one(copyStrided(e, x, shape, base, strides))
	}, nil
}

// makeGather implements Gather: negative indices count from the end of the axis.
func makeGather(n *graph.Node) (kernel, error) {
	axisAttr := n.Int("axis", 0)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		x, idx := in[0], in[1]
		if !isInt(idx.DType) {
			return nil, fmt.Errorf("indices must be int64 or int32, got %v", idx.DType)
		}
		axis, err := graph.NormAxis(axisAttr, len(x.Shape))
		if err != nil {
			return nil, err
		}
		dim := x.Shape[axis]
		pos := make([]int, len(idx.I64))
		for i, v := range idx.I64 {
			if v < -int64(dim) || v >= int64(dim) {
				return nil, fmt.Errorf("index %d is out of range for axis %d of size %d", v, axis, dim)
			}
			if v < 0 {
				v += int64(dim)
			}
			pos[i] = int(v)
		}
		shape := append(append(append([]int{}, x.Shape[:axis]...), idx.Shape...), x.Shape[axis+1:]...)
		out, err := e.allocOverwrite(x.DType, shape)
		if err != nil {
			return nil, err
		}
		outer, inner := graph.NumElements(x.Shape[:axis]), graph.NumElements(x.Shape[axis+1:])
		switch x.DType {
		case tensor.Float32:
			gather(e.threads, out.F32, x.F32, pos, outer, dim, inner)
		case tensor.Bool:
			gather(e.threads, out.Bool, x.Bool, pos, outer, dim, inner)
		default:
			gather(e.threads, out.I64, x.I64, pos, outer, dim, inner)
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

func gather[T any](threads int, out, src []T, pos []int, outer, dim, inner int) {
	rows := outer * len(pos)
	if rows == 0 || inner == 0 {
		return
	}
	grain := max(1, elemGrain/inner)
	workpool.For(threads, rows, grain, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o, j := r/len(pos), r%len(pos)
			s := (o*dim + pos[j]) * inner
			copy(out[r*inner:(r+1)*inner], src[s:s+inner])
		}
	})
}

func makeExpand(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		x := in[0]
		dims, err := shapeArg(in[1], "shape")
		if err != nil {
			return nil, err
		}
		target := make([]int, len(dims))
		for i, d := range dims {
			if d < 0 {
				return nil, fmt.Errorf("shape %v has a negative dimension", dims)
			}
			target[i] = int(d)
		}
		shape, err := graph.BroadcastShapes(x.Shape, target)
		if err != nil {
			return nil, err
		}
		out, err := e.allocOverwrite(x.DType, shape)
		if err != nil {
			return nil, err
		}
		if out.Len() == 0 {
			return []*tensor.Tensor{out}, nil
		}
		switch x.DType {
		case tensor.Float32:
			expandInto(e.threads, out.F32, shape, x.F32, x.Shape)
		case tensor.Bool:
			expandInto(e.threads, out.Bool, shape, x.Bool, x.Shape)
		default:
			expandInto(e.threads, out.I64, shape, x.I64, x.Shape)
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

func makeTile(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		x := in[0]
		reps, err := shapeArg(in[1], "repeats")
		if err != nil {
			return nil, err
		}
		r := len(x.Shape)
		if len(reps) != r {
			return nil, fmt.Errorf("repeats has %d entries for an input of rank %d", len(reps), r)
		}
		st := tensor.Strides(x.Shape)
		shape := make([]int, r)
		inter := make([]int, 2*r)
		strides := make([]int, 2*r)
		for i, rep := range reps {
			if rep < 0 {
				return nil, fmt.Errorf("repeats %v has a negative entry", reps)
			}
			shape[i] = x.Shape[i] * int(rep)
			inter[2*i], inter[2*i+1] = int(rep), x.Shape[i]
			strides[2*i], strides[2*i+1] = 0, st[i]
		}
		out, err := copyStrided(e, x, inter, 0, strides)
		if err != nil {
			return nil, err
		}
		out.Shape = shape
		return []*tensor.Tensor{out}, nil
	}, nil
}

// makeRange implements Range: max(ceil((limit-start)/delta), 0) values start + i·delta.
func makeRange(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 3); err != nil {
			return nil, err
		}
		if err := sameDType(in); err != nil {
			return nil, err
		}
		for i, t := range in {
			if t.Len() != 1 {
				return nil, fmt.Errorf("input %d must be a scalar, got shape %s", i, tensor.ShapeString(t.Shape))
			}
		}
		switch dt := in[0].DType; {
		case dt == tensor.Float32:
			start, limit, delta := in[0].F32[0], in[1].F32[0], in[2].F32[0]
			if delta == 0 {
				return nil, fmt.Errorf("delta is 0")
			}
			cnt := math.Ceil(float64(limit-start) / float64(delta))
			if !(cnt > 0) {
				cnt = 0
			}
			if cnt > 1<<31 {
				return nil, fmt.Errorf("range has %g elements", cnt)
			}
			out := make([]float32, int(cnt))
			for i := range out {
				out[i] = start + float32(i)*delta
			}
			return []*tensor.Tensor{{DType: dt, Shape: []int{len(out)}, F32: out}}, nil
		case isInt(dt):
			start, limit, delta := in[0].I64[0], in[1].I64[0], in[2].I64[0]
			if delta == 0 {
				return nil, fmt.Errorf("delta is 0")
			}
			var cnt int64
			if delta > 0 && limit > start {
				cnt = (limit - start + delta - 1) / delta
			} else if delta < 0 && limit < start {
				cnt = (start - limit - delta - 1) / (-delta)
			}
			if cnt > 1<<31 {
				return nil, fmt.Errorf("range has %d elements", cnt)
			}
			out := make([]int64, cnt)
			for i := range out {
				out[i] = start + int64(i)*delta
			}
			return []*tensor.Tensor{{DType: dt, Shape: []int{len(out)}, I64: out}}, nil
		default:
			return nil, fmt.Errorf("dtype %v is not supported", dt)
		}
	}, nil
}

// soleNonEmpty returns the one input with elements along axis when every other input has
// none, nil otherwise.
func soleNonEmpty(in []*tensor.Tensor, axis int) *tensor.Tensor {
	var only *tensor.Tensor
	for _, t := range in {
		if t.Shape[axis] == 0 {
			continue
		}
		if only != nil {
			return nil
		}
		only = t
	}
	return only
}
