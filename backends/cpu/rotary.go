package cpu

import (
	"fmt"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// makeRotary implements RotaryEmbedding (opset 23) on float32: the layout, the pairing of
// features and the cache rows are graph's (RotaryShapes, RotaryLayout.Pair, RotaryRow); the
// tokens are split across threads.
func makeRotary(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 3); err != nil {
			return nil, err
		}
		x, cos, sin := in[0], in[1], in[2]
		var pos *tensor.Tensor
		if len(in) > 3 {
			pos = in[3]
		}
		for _, t := range []*tensor.Tensor{x, cos, sin} {
			if t.DType != tensor.Float32 {
				return nil, fmt.Errorf("dtype %v is not supported (float32 is)", t.DType)
			}
		}
		l, err := graph.RotaryShapes(n, x, cos, sin, pos)
		if err != nil {
			return nil, err
		}
		y, err := e.allocOverwrite(tensor.Float32, x.Shape)
		if err != nil {
			return nil, err
		}
		copy(y.F32, x.F32)
		half := l.Rot / 2
		tokens := l.B * l.S
		errs := make([]error, tokens)
		workpool.For(e.threads, tokens, max(1, elemGrain/max(1, l.H*l.D)), func(lo, hi int) {
			for t := lo; t < hi; t++ {
				b, s := t/l.S, t%l.S
				row, err := graph.RotaryRow(l, pos, cos, b, s)
				if err != nil {
					errs[t] = err
					continue
				}
				c, sn := cos.F32[row*half:(row+1)*half], sin.F32[row*half:(row+1)*half]
				for h := 0; h < l.H; h++ {
					for i := 0; i < half; i++ {
						i1, i2 := l.Pair(i)
						o1, o2 := l.At(b, s, h, i1), l.At(b, s, h, i2)
						x1, x2 := x.F32[o1], x.F32[o2]
						y.F32[o1] = c[i]*x1 - sn[i]*x2
						y.F32[o2] = sn[i]*x1 + c[i]*x2
					}
				}
			}
		})
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return []*tensor.Tensor{y}, nil
	}, nil
}
