package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Sums over leading axes: the bias and LayerNorm-parameter gradients of training sum a
// (batch, n, d) gradient over its rows. The generic reduction first copies the tensor with
// the reduced axes moved last (a strided pass over all of it) and then sums each column as
// a row; reduceLeading reads the rows in place instead, adding each one into per-column
// accumulators. It adds in the same order (row by row) and in the same float64 precision as
// the generic path, so the two agree bit for bit, for any thread count (threads split the
// columns, never a sum).

// leadCols is the least number of columns a task of reduceLeading sums.
const leadCols = 64

// reduceLeading computes a float32 ReduceSum or ReduceMean whose reduced axes are exactly
// the leading ones (at least one axis kept); ok is false for every other reduction, which
// the caller then runs generically.
func reduceLeading(e *exec, x *tensor.Tensor, mark []bool, keep bool, kind reduceKind) (*tensor.Tensor, bool, error) {
	if x.DType != tensor.Float32 || (kind != reduceSum && kind != reduceMean) || len(mark) == 0 || !mark[0] {
		return nil, false, nil
	}
	lead := 0
	for lead < len(mark) && mark[lead] {
		lead++
	}
	for _, m := range mark[lead:] {
		if m {
			return nil, false, nil
		}
	}
	if lead == len(mark) {
		return nil, false, nil
	}
	var outShape []int
	if keep {
		for range lead {
			outShape = append(outShape, 1)
		}
	}
	outShape = append(outShape, x.Shape[lead:]...)
	out, err := e.alloc(tensor.Float32, outShape)
	if err != nil {
		return nil, true, err
	}
	rows, cols := graph.NumElements(x.Shape[:lead]), graph.NumElements(x.Shape[lead:])
	grain := max(leadCols, elemGrain/max(rows, 1))
	workpool.For(e.threads, cols, grain, func(lo, hi int) {
		sumLeading(out.F32[lo:hi], x.F32, rows, cols, lo, kind == reduceMean)
	})
	return out, true, nil
}

// sumLeading sets dst[j] to the sum (mean when mean is set) over the rows r < rows of
// src[r·cols + c0 + j], accumulated in float64 in row order, a block of columns at a time.
func sumLeading(dst, src []float32, rows, cols, c0 int, mean bool) {
	var acc [256]float64
	for b0 := 0; b0 < len(dst); b0 += len(acc) {
		w := min(len(acc), len(dst)-b0)
		a := acc[:w]
		clear(a)
		for r := 0; r < rows; r++ {
			row := src[r*cols+c0+b0 : r*cols+c0+b0+w]
			for j, v := range row {
				a[j] += float64(v)
			}
		}
		for j, s := range a {
			if mean {
				s /= float64(rows)
			}
			dst[b0+j] = float32(s)
		}
	}
}
