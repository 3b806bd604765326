package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// reduceMiddle is the float32 Sum and Mean over one contiguous run of axes that is not the
// last (Nyström's segment means, (B, h, m, n/m, dk) over axis 3): out[o, j] is the sum over
// r of x[o, r, j], accumulated in float64 for each output element in the order r = 0, 1, …,
// which is the order reduceRowF adds the same elements in, so the result is bitwise the one
// of moving the axes last (a strided copy of the whole input) and reducing rows. It reads x
// once, row by row. ok is false for anything else (several runs of axes, other kinds).
func reduceMiddle(e *exec, x *tensor.Tensor, mark []bool, outShape []int, kind reduceKind) (*tensor.Tensor, bool, error) {
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
	outer, red, inner := graph.NumElements(x.Shape[:a0]), graph.NumElements(x.Shape[a0:a1]), graph.NumElements(x.Shape[a1:])
	out, err := e.alloc(tensor.Float32, outShape)
	if err != nil {
		return nil, true, err
	}
	grain := max(1, elemGrain/max(1, red*inner))
	workpool.For(e.threads, outer, grain, func(lo, hi int) {
		acc := make([]float64, inner)
		for o := lo; o < hi; o++ {
			clear(acc)
			src := x.F32[o*red*inner:]
			for r := 0; r < red; r++ {
				row := src[r*inner : (r+1)*inner]
				for j, v := range row {
					acc[j] += float64(v)
				}
			}
			dst := out.F32[o*inner : (o+1)*inner]
			for j, s := range acc {
				if kind == reduceMean {
					s /= float64(red)
				}
				dst[j] = float32(s)
			}
		}
	})
	return out, true, nil
}
