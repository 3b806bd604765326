//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// gpuOp computes a node on the device. Inputs may be device or host values; outputs carry
// one reference each.
type gpuOp func(r *run, n *graph.Node, in []value) ([]value, error)

var gpuOps map[string]gpuOp

// Op codes shared with kernels.cu.
var (
	unaryOps  = map[string]int{"Abs": 0, "Neg": 1, "Exp": 2, "Log": 3, "Sqrt": 4, "Erf": 5, "Tanh": 6, "Sigmoid": 7, "Relu": 8, "Elu": 9}
	binaryOps = map[string]int{"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Pow": 4, "Max": 5, "Min": 6}
)

func init() {
	gpuOps = map[string]gpuOp{
		"Where": opWhere, "MatMul": opMatMul, "Gemm": opGemm, "Softmax": opSoftmax,
		"LayerNormalization": opLayerNorm, "Gather": opGather, "Transpose": opTranspose,
		"Slice": opSlice, "Concat": opConcat, "Split": opSplit, "Expand": opExpand, "Tile": opTile,
		"Reshape": opReshape, "Squeeze": axesView(squeezeShape), "Unsqueeze": axesView(unsqueezeShape), "Identity": opIdentity,
		"ReduceSum": opReduce(0), "ReduceMean": opReduce(1), "ReduceMax": opReduce(2),
	}
	for op := range unaryOps {
		gpuOps[op] = opUnary
	}
	for op := range binaryOps {
		gpuOps[op] = opBinary
	}
}

// step runs one node: host ops (and any op whose inputs are all int64 or bool) on the
// host, the rest on the device.
func (r *run) step(st *step, in []value) ([]value, error) {
	n := st.node
	switch n.Op {
	case "Shape":
		return opShape(n, in)
	case "Cast":
		if in[0].dev != nil && tensor.DType(n.Int("to", 0)) == tensor.Float32 {
			return []value{{dev: r.view(in[0].dev, in[0].dev.shape)}}, nil
		}
	}
	anyFloat := false
	for _, v := range in {
		anyFloat = anyFloat || v.isFloat()
	}
	if hostOps[n.Op] || !anyFloat {
		hs := make([]*tensor.Tensor, len(in))
		for i, v := range in {
			if v.host == nil && v.dev != nil {
				t, err := r.download(v.dev)
				if err != nil {
					return nil, err
				}
				hs[i] = t
			} else {
				hs[i] = v.host
			}
		}
		outs, err := st.host.run(hs)
		if err != nil {
			return nil, err
		}
		res := make([]value, len(outs))
		for i, t := range outs {
			res[i] = value{host: t}
		}
		return res, nil
	}
	fn, ok := gpuOps[n.Op]
	if !ok {
		return nil, fmt.Errorf("no CUDA kernel for %s on float32 data", n.Op)
	}
	return fn(r, n, in)
}

// hostInts returns an int64 host input's values (shape operands).
func hostInts(v value, what string) ([]int64, error) {
	if v.host == nil {
		if v.dev != nil {
			return nil, fmt.Errorf("%s must be int64, got float32", what)
		}
		return nil, fmt.Errorf("%s is missing", what)
	}
	if v.host.DType != tensor.Int64 && v.host.DType != tensor.Int32 {
		return nil, fmt.Errorf("%s must be int64, got %v", what, v.host.DType)
	}
	return v.host.I64, nil
}

func one(t *dtensor) []value { return []value{{dev: t}} }

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

func opUnary(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	y, err := r.alloc(x.shape)
	if err != nil {
		return nil, err
	}
	a := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).i64(int64(y.n())).i32(unaryOps[n.Op]).f32(n.Float("alpha", 1))
	if err := r.launch("zoo_unary", gridFor(y.n()), 256, a); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}

// binary computes a op b with broadcasting into a new tensor.
func (r *run) binary(op int, a, b *dtensor) (*dtensor, error) {
	shape, err := broadcastShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	y, err := r.alloc(shape)
	if err != nil {
		return nil, err
	}
	d := coalesce(shape, broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape))
	args, err := (&kargs{}).ptr(y.buf.ptr).ptr(a.buf.ptr).ptr(b.buf.ptr).i64(int64(y.n())).i32(op).desc(d)
	if err == nil {
		err = r.launch("zoo_binary", gridFor(y.n()), 256, args)
	}
	if err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return y, nil
}

func opBinary(r *run, n *graph.Node, in []value) ([]value, error) {
	op := binaryOps[n.Op]
	acc, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	if len(in) == 1 {
		return one(r.view(acc, acc.shape)), nil
	}
	owned := false
	for i := 1; i < len(in); i++ {
		b, err := r.dev(in[i], i, n.Op == "Pow")
		if err != nil {
			return nil, err
		}
		y, err := r.binary(op, acc, b)
		if owned {
			r.releaseBuf(acc.buf)
		}
		if err != nil {
			return nil, err
		}
		acc, owned = y, true
	}
	return one(acc), nil
}

func opWhere(r *run, n *graph.Node, in []value) ([]value, error) {
	c := in[0].host
	if c == nil || c.DType != tensor.Bool {
		return nil, fmt.Errorf("condition must be a bool tensor")
	}
	a, err := r.dev(in[1], 1, false)
	if err != nil {
		return nil, err
	}
	b, err := r.dev(in[2], 2, false)
	if err != nil {
		return nil, err
	}
	shape, err := broadcastShape(c.Shape, a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	cb := make([]byte, len(c.Bool)+1)
	for i, v := range c.Bool {
		if v {
			cb[i] = 1
		}
	}
	cbuf, err := r.uploadBytes(ptrOf(cb), len(c.Bool))
	if err != nil {
		return nil, err
	}
	r.temp(cbuf)
	y, err := r.alloc(shape)
	if err != nil {
		return nil, err
	}
	d := coalesce(shape, broadcastStrides(c.Shape, shape), broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape))
	args, err := (&kargs{}).ptr(y.buf.ptr).ptr(cbuf.ptr).ptr(a.buf.ptr).ptr(b.buf.ptr).i64(int64(y.n())).desc(d)
	if err == nil {
		err = r.launch("zoo_where", gridFor(y.n()), 256, args)
	}
	if err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}

// copyInto launches zoo_copy: for every coordinate of shape, y[ybase+Σc·yst] = x[xbase+Σc·xst].
func (r *run) copyInto(y *dtensor, ybase int64, x *dtensor, xbase int64, shape []int, xst, yst []int64) error {
	n := numel(shape)
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
	if len(starts) != len(ends) {
		return nil, fmt.Errorf("starts has %d values, ends %d", len(starts), len(ends))
	}
	rank := len(x.shape)
	axes := make([]int64, len(starts))
	for i := range axes {
		axes[i] = int64(i)
	}
	if len(in) > 3 && (in[3].host != nil || in[3].dev != nil) {
		if axes, err = hostInts(in[3], "axes"); err != nil {
			return nil, err
		}
	}
	steps := make([]int64, len(starts))
	for i := range steps {
		steps[i] = 1
	}
	if len(in) > 4 && (in[4].host != nil || in[4].dev != nil) {
		if steps, err = hostInts(in[4], "steps"); err != nil {
			return nil, err
		}
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("starts, ends, axes and steps must have the same length")
	}
	cs := contiguous(x.shape)
	shape := append([]int(nil), x.shape...)
	st := append([]int64(nil), cs...)
	var base int64
	seen := make([]bool, rank)
	for i := range starts {
		ax, err := normAxis(axes[i], rank)
		if err != nil {
			return nil, err
		}
		if seen[ax] {
			return nil, fmt.Errorf("axis %d is repeated", axes[i])
		}
		seen[ax] = true
		first, count, err := sliceAxis(x.shape[ax], starts[i], ends[i], steps[i])
		if err != nil {
			return nil, err
		}
		shape[ax] = count
		if count > 0 {
			base += first * cs[ax]
		}
		st[ax] = cs[ax] * steps[i]
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
	ax, err := normAxis(n.Int("axis", 0), rank)
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
	ax, err := normAxis(n.Int("axis", 0), rank)
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
	target := make([]int, len(dims))
	for i, d := range dims {
		target[i] = int(d)
	}
	shape, err := broadcastShape(x.shape, target)
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
	shape, err := reshapeTo(x.shape, target, n.Int("allowzero", 0) != 0)
	if err != nil {
		return nil, err
	}
	return one(r.view(x, shape)), nil
}

func axesOf(n *graph.Node, in []value) ([]int64, error) {
	if len(in) > 1 && (in[1].host != nil || in[1].dev != nil) {
		return hostInts(in[1], "axes")
	}
	a, _ := n.IntList("axes")
	return a, nil
}

// axesView returns the op for Squeeze or Unsqueeze: a view of the input under the shape
// that reshape computes from the axes (input or attribute).
func axesView(reshape func(shape []int, axes []int64) ([]int, error)) func(*run, *graph.Node, []value) ([]value, error) {
	return func(r *run, n *graph.Node, in []value) ([]value, error) {
		x, err := r.dev(in[0], 0, false)
		if err != nil {
			return nil, err
		}
		axes, err := axesOf(n, in)
		if err != nil {
			return nil, err
		}
		shape, err := reshape(x.shape, axes)
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

func opSoftmax(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	ax, err := normAxis(n.Int("axis", -1), max(len(x.shape), 1))
	if err != nil {
		return nil, err
	}
	y, err := r.alloc(x.shape)
	if err != nil {
		return nil, err
	}
	if len(x.shape) == 0 {
		// softmax of a scalar is 1 (or NaN for -inf/NaN); treat it as a row of one.
		ax = -1
	}
	length, inner := 1, 1
	if ax >= 0 {
		length = x.shape[ax]
		inner = numel(x.shape[ax+1:])
	}
	rows := 0
	if length > 0 {
		rows = x.n() / length
	}
	block := 256
	if length <= 128 {
		block = 64
	}
	a := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).i64(int64(rows)).i64(int64(length)).i64(int64(inner))
	if err := r.launch("zoo_softmax", min(rows, 1<<20), block, a); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}

func opLayerNorm(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	scale, err := r.dev(in[1], 1, false)
	if err != nil {
		return nil, err
	}
	var bias *dtensor
	if len(in) > 2 && (in[2].host != nil || in[2].dev != nil) {
		if bias, err = r.dev(in[2], 2, false); err != nil {
			return nil, err
		}
	}
	rank := len(x.shape)
	ax, err := normAxis(n.Int("axis", -1), rank)
	if err != nil {
		return nil, err
	}
	cols := numel(x.shape[ax:])
	rows := numel(x.shape[:ax])
	if s := scale.n(); s != cols && s != 1 {
		return nil, fmt.Errorf("scale has shape %s, want the normalised shape %s", tensor.ShapeString(scale.shape), tensor.ShapeString(x.shape[ax:]))
	}
	nb, bptr := 0, uint64(0)
	if bias != nil {
		if nb = bias.n(); nb != cols && nb != 1 {
			return nil, fmt.Errorf("bias has shape %s, want the normalised shape %s", tensor.ShapeString(bias.shape), tensor.ShapeString(x.shape[ax:]))
		}
		bptr = bias.buf.ptr
	}
	y, err := r.alloc(x.shape)
	if err != nil {
		return nil, err
	}
	res := []value{{dev: y}}
	statShape := append([]int(nil), x.shape...)
	for i := ax; i < rank; i++ {
		statShape[i] = 1
	}
	var stat [2]uint64
	for k := 0; k < 2; k++ {
		if len(n.Outputs) > k+1 && n.Outputs[k+1] != "" {
			t, err := r.alloc(statShape)
			if err != nil {
				for _, v := range res {
					r.release(v)
				}
				return nil, err
			}
			stat[k] = t.buf.ptr
			res = append(res, value{dev: t})
		} else {
			res = append(res, value{})
		}
	}
	block := 256
	if cols <= 128 {
		block = 64
	}
	a := (&kargs{}).ptr(y.buf.ptr).ptr(stat[0]).ptr(stat[1]).ptr(x.buf.ptr).ptr(scale.buf.ptr).ptr(bptr).
		i64(int64(rows)).i64(int64(cols)).i64(int64(scale.n())).i64(int64(nb)).f32(n.Float("epsilon", 1e-5))
	if cols > 0 {
		if err := r.launch("zoo_layernorm", min(rows, 1<<20), block, a); err != nil {
			for _, v := range res {
				r.release(v)
			}
			return nil, err
		}
	}
	return res[:len(n.Outputs)], nil
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
	ax, err := normAxis(n.Int("axis", 0), rank)
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
	outer, inner := numel(x.shape[:ax]), numel(x.shape[ax+1:])
	a := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).ptr(ib.ptr).i64(int64(outer)).i64(int64(len(idx))).i64(dim).i64(int64(inner))
	if err := r.launch("zoo_gather", gridFor(y.n()), 256, a); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}

func opReduce(code int) gpuOp {
	return func(r *run, n *graph.Node, in []value) ([]value, error) {
		x, err := r.dev(in[0], 0, false)
		if err != nil {
			return nil, err
		}
		axes, err := axesOf(n, in)
		if err != nil {
			return nil, err
		}
		keep := n.Int("keepdims", 1) != 0
		rank := len(x.shape)
		if len(axes) == 0 && n.Int("noop_with_empty_axes", 0) != 0 {
			return one(r.view(x, x.shape)), nil
		}
		red := make([]bool, rank)
		if len(axes) == 0 {
			for i := range red {
				red[i] = true
			}
		}
		for _, a := range axes {
			ax, err := normAxis(a, rank)
			if err != nil {
				return nil, err
			}
			red[ax] = true
		}
		cs := contiguous(x.shape)
		var outShape, keptShape, redShape []int
		var keptSt, redSt []int64
		for i, d := range x.shape {
			if red[i] {
				redShape = append(redShape, d)
				redSt = append(redSt, cs[i])
				if keep {
					outShape = append(outShape, 1)
				}
			} else {
				keptShape = append(keptShape, d)
				keptSt = append(keptSt, cs[i])
				outShape = append(outShape, d)
			}
		}
		if outShape == nil {
			outShape = []int{}
		}
		y, err := r.alloc(outShape)
		if err != nil {
			return nil, err
		}
		nred := numel(redShape)
		if nred == 0 && code == 2 {
			r.releaseBuf(y.buf)
			return nil, fmt.Errorf("cannot take the max over an empty axis")
		}
		k := coalesce(keptShape, keptSt)
		rd := coalesce(redShape, redSt)
		a, err := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).i64(int64(y.n())).i64(int64(nred)).i32(code).desc(k)
		if err == nil {
			a, err = a.desc(rd)
		}
		if err == nil {
			err = r.launch("zoo_reduce", gridFor(y.n()), 256, a)
		}
		if err != nil {
			r.releaseBuf(y.buf)
			return nil, err
		}
		return one(y), nil
	}
}

// gemm computes, for each of batch problems, C = alpha·op(A)·op(B) + beta·C in row-major
// terms (A is m×k after op, B k×n, C m×n) by calling cuBLAS on the transposed problem.
// sa and sb are the batch strides (0 to reuse one matrix).
func (r *run) gemm(a, b, c uint64, transA, transB bool, m, n, k, batch int, sa, sb int64, alpha, beta float32) error {
	for _, v := range []int{m, n, k, batch} {
		if v > math.MaxInt32 {
			return fmt.Errorf("matrix dimension %d exceeds cuBLAS's 32-bit limit", v)
		}
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	if err := r.p.ensureBLAS(); err != nil {
		return err
	}
	return cublasGemm(r.p.blas, gemmArgs{
		transA: transB, transB: transA, m: n, n: m, k: k, alpha: alpha, beta: beta,
		a: b, lda: ldb, sa: sb, b: a, ldb: lda, sb: sa, c: c, ldc: n, sc: int64(m) * int64(n),
		batch: batch, computeType: r.p.compute,
	})
}

func (r *run) fill(y *dtensor, v float32) error {
	a := (&kargs{}).ptr(y.buf.ptr).i64(int64(y.n())).f32(v)
	return r.launch("zoo_fill", gridFor(y.n()), 256, a)
}

func opMatMul(r *run, n *graph.Node, in []value) ([]value, error) {
	a, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	b, err := r.dev(in[1], 1, false)
	if err != nil {
		return nil, err
	}
	as, bs := a.shape, b.shape
	if len(as) == 0 || len(bs) == 0 {
		return nil, fmt.Errorf("MatMul needs inputs of rank 1 or more, got %s and %s", tensor.ShapeString(as), tensor.ShapeString(bs))
	}
	dropM, dropN := len(as) == 1, len(bs) == 1
	if dropM {
		as = []int{1, as[0]}
	}
	if dropN {
		bs = []int{bs[0], 1}
	}
	m, k := as[len(as)-2], as[len(as)-1]
	k2, nn := bs[len(bs)-2], bs[len(bs)-1]
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions differ: %s × %s", tensor.ShapeString(a.shape), tensor.ShapeString(b.shape))
	}
	ba, bb := as[:len(as)-2], bs[:len(bs)-2]
	batchShape, err := broadcastShape(ba, bb)
	if err != nil {
		return nil, fmt.Errorf("batch dimensions: %w", err)
	}
	nb := numel(batchShape)
	outShape := append(append([]int(nil), batchShape...), m, nn)
	final := append([]int(nil), batchShape...)
	if !dropM {
		final = append(final, m)
	}
	if !dropN {
		final = append(final, nn)
	}
	y, err := r.alloc(outShape)
	if err != nil {
		return nil, err
	}
	y.shape = final
	fail := func(err error) ([]value, error) { r.releaseBuf(y.buf); return nil, err }
	if y.n() == 0 {
		return one(y), nil
	}
	if k == 0 {
		if err := r.fill(y, 0); err != nil {
			return fail(err)
		}
		return one(y), nil
	}
	na, nbb := numel(ba), numel(bb)
	sameA := na == nb && sameTail(ba, batchShape)
	sameB := nbb == nb && sameTail(bb, batchShape)
	switch {
	case nbb == 1 && sameA:
		// A weight shared by every batch: one GEMM over all rows.
		err = r.gemm(a.buf.ptr, b.buf.ptr, y.buf.ptr, false, false, nb*m, nn, k, 1, 0, 0, 1, 0)
	case (na == 1 || sameA) && (nbb == 1 || sameB):
		sa, sb := int64(m*k), int64(k*nn)
		if na == 1 {
			sa = 0
		}
		if nbb == 1 {
			sb = 0
		}
		err = r.gemm(a.buf.ptr, b.buf.ptr, y.buf.ptr, false, false, m, nn, k, nb, sa, sb, 1, 0)
	default:
		// General broadcasting: materialise both operands at the full batch shape.
		fullA := append(append([]int(nil), batchShape...), m, k)
		fullB := append(append([]int(nil), batchShape...), k, nn)
		ea, err := r.gather(a, 0, fullA, broadcastStrides(as, fullA))
		if err != nil {
			return fail(err)
		}
		r.temp(ea.buf)
		eb, err := r.gather(b, 0, fullB, broadcastStrides(bs, fullB))
		if err != nil {
			return fail(err)
		}
		r.temp(eb.buf)
		err = r.gemm(ea.buf.ptr, eb.buf.ptr, y.buf.ptr, false, false, m, nn, k, nb, int64(m*k), int64(k*nn), 1, 0)
	}
	if err != nil {
		return fail(err)
	}
	return one(y), nil
}

// sameTail reports whether shape, left-padded with ones, equals full.
func sameTail(shape, full []int) bool {
	off := len(full) - len(shape)
	for i, d := range full {
		s := 1
		if i >= off {
			s = shape[i-off]
		}
		if s != d {
			return false
		}
	}
	return true
}

func opGemm(r *run, n *graph.Node, in []value) ([]value, error) {
	a, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	b, err := r.dev(in[1], 1, false)
	if err != nil {
		return nil, err
	}
	if len(a.shape) != 2 || len(b.shape) != 2 {
		return nil, fmt.Errorf("Gemm needs 2-D inputs, got %s and %s", tensor.ShapeString(a.shape), tensor.ShapeString(b.shape))
	}
	tA, tB := n.Int("transA", 0) != 0, n.Int("transB", 0) != 0
	m, k := a.shape[0], a.shape[1]
	if tA {
		m, k = k, m
	}
	k2, nn := b.shape[0], b.shape[1]
	if tB {
		k2, nn = nn, k2
	}
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions differ: %s × %s (transA=%v, transB=%v)", tensor.ShapeString(a.shape), tensor.ShapeString(b.shape), tA, tB)
	}
	alpha, beta := n.Float("alpha", 1), n.Float("beta", 1)
	y, err := r.alloc([]int{m, nn})
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]value, error) { r.releaseBuf(y.buf); return nil, err }
	if y.n() == 0 {
		return one(y), nil
	}
	useC := len(in) > 2 && (in[2].host != nil || in[2].dev != nil) && beta != 0
	if useC {
		c, err := r.dev(in[2], 2, false)
		if err != nil {
			return fail(err)
		}
		if _, err := broadcastShape(c.shape, y.shape); err != nil || len(c.shape) > 2 {
			return fail(fmt.Errorf("C of shape %s does not broadcast to %s", tensor.ShapeString(c.shape), tensor.ShapeString(y.shape)))
		}
		if err := r.copyInto(y, 0, c, 0, y.shape, broadcastStrides(c.shape, y.shape), contiguous(y.shape)); err != nil {
			return fail(err)
		}
	} else {
		beta = 0
		if k == 0 {
			if err := r.fill(y, 0); err != nil {
				return fail(err)
			}
			return one(y), nil
		}
	}
	if k == 0 {
		// alpha·0 + beta·C: scale C in place.
		sc, err := r.upload(&tensor.Tensor{DType: tensor.Float32, Shape: []int{}, F32: []float32{beta}})
		if err != nil {
			return fail(err)
		}
		r.temp(sc.buf)
		z, err := r.binary(binaryOps["Mul"], y, sc)
		r.releaseBuf(y.buf)
		if err != nil {
			return nil, err
		}
		return one(z), nil
	}
	if err := r.gemm(a.buf.ptr, b.buf.ptr, y.buf.ptr, tA, tB, m, nn, k, 1, 0, 0, alpha, beta); err != nil {
		return fail(err)
	}
	return one(y), nil
}
