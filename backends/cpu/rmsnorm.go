package cpu

import (
	"math"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// makeRMSNorm implements RMSNormalization (opset 23): each row (the axes from axis on) is
// divided by its root mean square, accumulated in float64, and multiplied by scale.
func makeRMSNorm(n *graph.Node) (kernel, error) {
	axisAttr := n.Int("axis", -1)
	eps := float64(n.Float("epsilon", 1e-5))
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x, axis, scale, err := normArgs(e, in, axisAttr)
		if err != nil {
			return nil, err
		}
		norm := x.Shape[axis:]
		y, err := e.allocOverwrite(tensor.Float32, x.Shape)
		if err != nil {
			return nil, err
		}
		rows, d := graph.NumElements(x.Shape[:axis]), graph.NumElements(norm)
		if d == 0 {
			return []*tensor.Tensor{y}, nil
		}
		workpool.For(e.threads, rows, max(1, elemGrain/(2*d)), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				src, dst := x.F32[r*d:(r+1)*d], y.F32[r*d:(r+1)*d]
				ss := 0.0
				for _, v := range src {
					ss += float64(v) * float64(v)
				}
				inv := 1 / math.Sqrt(ss/float64(d)+eps)
				for j, v := range src {
					dst[j] = float32(float64(v) * inv * float64(scale[j]))
				}
			}
		})
		return []*tensor.Tensor{y}, nil
	}, nil
}
