//go:build cgo && linux

package cuda

import (
	"fmt"

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
	a := (&kargs{}).ptr(y.buf.ptr).ptr(x.buf.ptr).i64(int64(y.n())).i32(unaryOps[n.Op]).f32(n.Float("alpha", 1))
	if err := r.launch("zoo_unary", gridFor(y.n()), 256, a); err != nil {
		r.releaseBuf(y.buf)
		return nil, err
	}
	return one(y), nil
}

// binary computes a op b with broadcasting into a new tensor.
func (r *run) binary(op int, a, b *dtensor) (*dtensor, error) {
	shape, err := graph.BroadcastShapes(a.shape, b.shape)
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
