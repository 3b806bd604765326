package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Gelu (ai.onnx opset 20): x·Φ(x), exactly through erf (approximate "none") or through tanh
// (approximate "tanh").

func init() {
	register(&OpDef{
		Name: "Gelu", SinceVersion: 20, ThroughVersion: LatestOpset,
		Doc:    `0.5·x·(1 + erf(x/√2)), or with approximate "tanh" 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`,
		Inputs: ps(req("X")), Outputs: ps(req("Y")),
		Attrs: []AttrDef{{Name: "approximate", Kind: AttrString, Default: String("none")}},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			if _, err := geluFunc(c.n); err != nil {
				return nil, err
			}
			return c.unary(func(dt tensor.DType) bool { return dt == tensor.Float32 }, "float32", nil)
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			f, err := geluFunc(n)
			if err != nil {
				return nil, err
			}
			return evalUnary(f, nil, nil)(n, in)
		},
		Cost: perOutput(8),
		Grad: NoGradYet,
	})
}

// GeluFunc returns the function a Gelu node computes, in float64 (the backends' kernels and
// the reference share it), or an error for an approximate other than "none" and "tanh".
func GeluFunc(n *Node) (func(float64) float64, error) { return geluFunc(n) }

func geluFunc(n *Node) (func(float64) float64, error) {
	switch a := n.Str("approximate", "none"); a {
	case "none":
		return func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, nil
	case "tanh":
		k := math.Sqrt(2 / math.Pi)
		return func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(k*(x+0.044715*x*x*x))) }, nil
	default:
		return nil, fmt.Errorf("Gelu's approximate is %q, want \"none\" or \"tanh\"", a)
	}
}
