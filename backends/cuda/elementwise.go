//go:build cgo && linux

package cuda

import (
	"fmt"
	"slices"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func opUnary(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	y, err := r.alloc(x.shape)
	if err != nil {
		return nil, err
	}
	if err := r.unary(unaryOps[n.Op], n.Float("alpha", 1), y, x); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}

// unary launches y = op(x) over x's elements (y may be x), four per thread when they
// divide by four.
func (r *run) unary(op int, alpha float32, y, x *dtensor) error {
	n := x.n()
	if n%4 == 0 {
		a := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).i64(int64(n / 4)).i32(op).f32(alpha)
		return r.launch("zoo_unary4", gridFor(n/4), 256, a)
	}
	a := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).i64(int64(n)).i32(op).f32(alpha)
	return r.launch("zoo_unary", gridFor(n), 256, a)
}

// commutative binary ops (their operands may swap for zoo_binary_rows).
var commutative = map[int]bool{0: true, 2: true, 5: true, 6: true} // Add, Mul, Max, Min

// binaryRelu computes a op b with broadcasting into a new tensor, then ReLU when relu is
// set: one pass with zoo_binary_rows where the broadcast is a bias's (b repeated down the
// rows of a, or a of b for a commutative op), else zoo_binary and a ReLU in place.
func (r *run) binaryRelu(op int, a, b *dtensor, relu bool) (*dtensor, error) {
	return r.binaryRows(op, a, b, nil, relu)
}

// binaryRows is binaryRelu with a residual: when res is not nil, y = (a op b) + res before
// the ReLU, rounded as the two unfused Adds round; one pass when res has the result's
// shape and the broadcast is a bias's, else the unfused steps.
func (r *run) binaryRows(op int, a, b, res *dtensor, relu bool) (*dtensor, error) {
	x, w := a, b
	rows, cols, brows, ok := rowsForm(x.shape, w.shape)
	if !ok && commutative[op] {
		x, w = b, a
		rows, cols, brows, ok = rowsForm(x.shape, w.shape)
	}
	if ok && res != nil && !slices.Equal(res.shape, x.shape) {
		ok = false
	}
	if !ok {
		y, err := r.binary(op, a, b)
		if err != nil {
			return nil, err
		}
		if res != nil {
			sum, err := r.binary(binaryOps["Add"], y, res)
			r.releaseBuf(y.buf)
			if err != nil {
				return nil, err
			}
			y = sum
		}
		if !relu {
			return y, nil
		}
		if err := r.unary(unaryOps["Relu"], 0, y, y); err != nil {
			r.releaseBuf(y.buf)
			return nil, err
		}
		return y, nil
	}
	y, err := r.alloc(x.shape)
	if err != nil {
		return nil, err
	}
	vec, work := 0, rows*cols
	if cols%4 == 0 {
		vec, work = 1, rows*cols/4
	}
	flag := 0
	if relu {
		flag = 1
	}
	var rp uint64
	if res != nil {
		rp = res.buf.ptr
	}
	args := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).ptr(w.buf.ptr).ptr(rp).i64(int64(rows)).i64(int64(cols)).i64(int64(brows)).i32(op).i32(flag).i32(vec)
	if err := r.launch("zoo_binary_rows", gridFor(work), 256, args); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return y, nil
}

// binary computes a op b with broadcasting into a new tensor.
func (r *run) binary(op int, a, b *dtensor) (*dtensor, error) {
	shape, err := graph.BroadcastShapes(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	if _, _, _, ok := rowsForm(a.shape, b.shape); ok || (commutative[op] && func() bool { _, _, _, ok := rowsForm(b.shape, a.shape); return ok }()) {
		return r.binaryRelu(op, a, b, false)
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
	shape, err := graph.BroadcastShapes(c.Shape, a.shape, b.shape)
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
