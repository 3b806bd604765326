package cpu

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// ScatterND: a copy of data with slices of updates written, added or multiplied in at the
// positions indices give. Autodiff's gradient of Gather (an embedding) is one with "add".

func makeScatterND(n *graph.Node) (kernel, error) {
	red := n.Str("reduction", "none")
	if red != "none" && red != "add" && red != "mul" {
		return nil, fmt.Errorf("reduction %q is not none, add or mul", red)
	}
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 3); err != nil {
			return nil, err
		}
		data, idx, upd := in[0], in[1], in[2]
		if idx.DType != tensor.Int64 || upd.DType != data.DType || len(idx.Shape) == 0 || len(data.Shape) == 0 {
			return nil, fmt.Errorf("want data, int64 indices and updates of data's dtype, got %v %v, %v %v, %v", data.DType, data.Shape, idx.DType, idx.Shape, upd.DType)
		}
		k := idx.Shape[len(idx.Shape)-1]
		if k < 1 || k > len(data.Shape) {
			return nil, fmt.Errorf("indices address %d axes of data of rank %d", k, len(data.Shape))
		}
		want := append(append([]int{}, idx.Shape[:len(idx.Shape)-1]...), data.Shape[k:]...)
		if !tensor.SameShape(want, upd.Shape) {
			return nil, fmt.Errorf("updates have shape %v, want %v", upd.Shape, want)
		}
		out, err := e.alloc(data.DType, data.Shape)
		if err != nil {
			return nil, err
		}
		switch data.DType {
		case tensor.Float32:
			copy(out.F32, data.F32)
		case tensor.Bool:
			copy(out.Bool, data.Bool)
		default:
			copy(out.I64, data.I64)
		}
		slice := graph.NumElements(data.Shape[k:])
		st := tensor.Strides(data.Shape)
		rows := graph.NumElements(idx.Shape[:len(idx.Shape)-1])
		for r := 0; r < rows; r++ {
			off, err := graph.ScatterNDOffset(idx.I64[r*k:(r+1)*k], data.Shape, st)
			if err != nil {
				return nil, err
			}
			lo, hi := r*slice, (r+1)*slice
			switch data.DType {
			case tensor.Float32:
				scatterRow(out.F32[off:off+slice], upd.F32[lo:hi], red)
			case tensor.Bool:
				if red != "none" {
					return nil, fmt.Errorf("reduction %q needs a number type", red)
				}
				copy(out.Bool[off:off+slice], upd.Bool[lo:hi])
			default:
				scatterRow(out.I64[off:off+slice], upd.I64[lo:hi], red)
				if data.DType == tensor.Int32 {
					for i := off; i < off+slice; i++ {
						out.I64[i] = int64(int32(out.I64[i]))
					}
				}
			}
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

func scatterRow[T float32 | int64](dst, src []T, red string) {
	switch red {
	case "add":
		for i, v := range src {
			dst[i] += v
		}
	case "mul":
		for i, v := range src {
			dst[i] *= v
		}
	default:
		copy(dst, src)
	}
}
