package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Sums and means over one contiguous run of axes that is not the last: the bias and
// LayerNorm-parameter gradients of training ((batch, n, d) over its leading axes) and
// Nyström's segment means ((B, h, m, n/m, dk) over axis 3). The generic reduction first copies
// the tensor with the reduced axes moved last (a strided pass over all of it) and then
// reduces each block; reduceRun reads the rows in place instead, adding each into per-column
// float64 accumulators in the order r = 0, 1, …, which is the order and precision reduceRowF
// adds the same elements in. So the two agree bit for bit, for any thread count (threads
// split the outer index and the columns, never a sum).

// reduceBlock is the most columns one task of reduceRun sums; its accumulators stay on the
// stack.
const reduceBlock = 256

// reduceRun computes a float32 ReduceSum or ReduceMean whose reduced axes are one contiguous
// run followed by at least one kept axis; ok is false for every other reduction (several
// runs, a trailing run, other kinds or dtypes), which the caller then runs generically.
func reduceRun(e *exec, x *tensor.Tensor, mark []bool, keep bool, kind reduceKind) (*tensor.Tensor, bool, error) {
	if x.DType != tensor.Float32 || (kind != reduceSum && kind != reduceMean) {
		return nil, false, nil
	}
	a0, a1 := -1, -1
	for i, m := range mark {
		switch {
		case m && a0 < 0:
			a0 = i
		case m && a1 >= 0:
			return nil, false, nil // a second run
		case !m && a0 >= 0 && a1 < 0:
			a1 = i
		}
	}
	if a0 < 0 || a1 < 0 {
		return nil, false, nil
	}
	out, err := e.allocOverwrite(tensor.Float32, reducedShape(x.Shape, mark, keep))
	if err != nil {
		return nil, true, err
	}
	outer, red, inner := graph.NumElements(x.Shape[:a0]), graph.NumElements(x.Shape[a0:a1]), graph.NumElements(x.Shape[a1:])
	blocks := (inner + reduceBlock - 1) / reduceBlock
	grain := max(1, elemGrain/max(1, red*min(inner, reduceBlock)))
	workpool.For(e.threads, outer*blocks, grain, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			o, c0 := t/blocks, t%blocks*reduceBlock
			dst := out.F32[o*inner+c0 : o*inner+min(c0+reduceBlock, inner)]
			sumRows(dst, x.F32[o*red*inner:], red, inner, c0, kind == reduceMean)
		}
	})
	return out, true, nil
}

// sumRows sets dst[j] (len(dst) ≤ reduceBlock) to the sum, or the mean when mean is set, over
// the rows r < rows of src[r·cols + c0 + j], accumulated in float64 in row order.
func sumRows(dst, src []float32, rows, cols, c0 int, mean bool) {
	var acc [reduceBlock]float64
	a := acc[:len(dst)]
	for r := 0; r < rows; r++ {
		vec.AccF64(a, src[r*cols+c0:r*cols+c0+len(dst)])
	}
	for j, s := range a {
		if mean {
			s /= float64(rows)
		}
		dst[j] = float32(s)
	}
}

// reducedShape is the shape of a reduction of shape over the marked axes: each kept as 1
// when keep is set, dropped otherwise.
func reducedShape(shape []int, mark []bool, keep bool) []int {
	var out []int
	for i, d := range shape {
		switch {
		case !mark[i]:
			out = append(out, d)
		case keep:
			out = append(out, 1)
		}
	}
	return out
}
