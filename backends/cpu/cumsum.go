package cpu

import (
	"fmt"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// makeCumSum is CumSum's kernel: graph's reference rule (float32 summed in float64 and each
// output rounded once, integers in int64 wrapped to int32 for Int32), with the lines along
// the axis split over the threads. Its sums therefore equal EvalNode's bit for bit.
func makeCumSum(n *graph.Node) (kernel, error) {
	exclusive, reverse := n.Int("exclusive", 0) != 0, n.Int("reverse", 0) != 0
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		x := in[0]
		if x.DType != tensor.Float32 && !isInt(x.DType) {
			return nil, fmt.Errorf("dtype %v is not supported (float32, int32, int64 are)", x.DType)
		}
		axis, err := graph.CumSumAxis(in[1], len(x.Shape))
		if err != nil {
			return nil, err
		}
		out, err := e.alloc(x.DType, x.Shape)
		if err != nil {
			return nil, err
		}
		outer, dim, inner := graph.NumElements(x.Shape[:axis]), x.Shape[axis], graph.NumElements(x.Shape[axis+1:])
		lines := outer * inner
		if lines == 0 || dim == 0 {
			return []*tensor.Tensor{out}, nil
		}
		workpool.For(e.threads, lines, max(1, elemGrain/dim), func(lo, hi int) {
			for l := lo; l < hi; l++ {
				o, i := l/inner, l%inner
				base, step := o*dim*inner+i, inner
				if reverse {
					base, step = base+(dim-1)*inner, -inner
				}
				if x.DType == tensor.Float32 {
					var s float64
					for k, at := 0, base; k < dim; k, at = k+1, at+step {
						v := float64(x.F32[at])
						if !exclusive {
							s += v
						}
						out.F32[at] = float32(s)
						if exclusive {
							s += v
						}
					}
					continue
				}
				var s int64
				for k, at := 0, base; k < dim; k, at = k+1, at+step {
					v := x.I64[at]
					if !exclusive {
						s += v
					}
					if x.DType == tensor.Int32 {
						s = int64(int32(s))
					}
					out.I64[at] = s
					if exclusive {
						s += v
					}
				}
			}
		})
		return []*tensor.Tensor{out}, nil
	}, nil
}
