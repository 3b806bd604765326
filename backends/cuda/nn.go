//go:build cgo && linux

package cuda

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func opSoftmax(r *run, n *graph.Node, in []value) ([]value, error) {
	x, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	ax, err := graph.NormAxis(n.Int("axis", -1), max(len(x.shape), 1))
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
		inner = graph.NumElements(x.shape[ax+1:])
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
	ax, err := graph.NormAxis(n.Int("axis", -1), rank)
	if err != nil {
		return nil, err
	}
	cols := graph.NumElements(x.shape[ax:])
	rows := graph.NumElements(x.shape[:ax])
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
	kernel, grid, block := "zoo_layernorm", min(rows, 1<<20), 256
	if cols <= 1024 {
		// One warp per row, the row in registers: 8 rows per block.
		kernel, grid = "zoo_layernorm_warp", min((rows+7)/8, 1<<20)
	}
	a := (&kargs{}).ptr(y.buf.ptr).ptr(stat[0]).ptr(stat[1]).ptr(x.buf.ptr).ptr(scale.buf.ptr).ptr(bptr).
		i64(int64(rows)).i64(int64(cols)).i64(int64(scale.n())).i64(int64(nb)).f32(n.Float("epsilon", 1e-5))
	if cols > 0 {
		if err := r.launch(kernel, grid, block, a); err != nil {
			for _, v := range res {
				r.release(v)
			}
			return nil, err
		}
	}
	return res[:len(n.Outputs)], nil
}

func opReduce(code int) gpuOp {
	return func(r *run, n *graph.Node, in []value) ([]value, error) {
		x, err := r.dev(in[0], 0, false)
		if err != nil {
			return nil, err
		}
		axes, _, err := axesOf(n, in)
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
		ks, err := graph.NormAxes(axes, rank)
		if err != nil {
			return nil, err
		}
		for _, k := range ks {
			red[k] = true
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
		nred := graph.NumElements(redShape)
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
