package cpu

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// makeGelu implements Gelu (opset 20), exact or tanh-approximated, elementwise over float32.
func makeGelu(n *graph.Node) (kernel, error) {
	f, err := graph.GeluFunc(n)
	if err != nil {
		return nil, unsupported("%v", err)
	}
	g := func(v float32) float32 { return float32(f(float64(v))) }
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		if in[0].DType != tensor.Float32 {
			return nil, fmt.Errorf("dtype %v is not supported (float32 is)", in[0].DType)
		}
		return one(unaryApply(e, in[0], g, nil, nil))
	}, nil
}
