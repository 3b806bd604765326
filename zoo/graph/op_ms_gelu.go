package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// ONNX Runtime's contrib GELUs (com.microsoft): Gelu (erf), BiasGelu (erf of A + B) and
// FastGelu (tanh approximation of X + bias), as ContribOperators.md defines them.

func init() {
	for _, d := range []struct {
		name, doc string
		inputs    []ParamDef
		f         func(float64) float64
	}{
		{"Gelu", "x · Φ(x) = 0.5 · x · (1 + erf(x / √2))", ps(req("X")), gelu},
		{"BiasGelu", "Gelu(A + B), B broadcast along the last axis", ps(req("A"), req("B")), gelu},
		{"FastGelu", "0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))) of x = X + bias", ps(req("X"), opt("bias")), fastGelu},
	} {
		f := d.f
		register(&OpDef{
			Name: d.name, Domain: MicrosoftDomain, SinceVersion: 1, ThroughVersion: 1,
			Doc: d.doc, Inputs: d.inputs, Outputs: ps(req("Y")),
			infer: (*nodeCtx).biasActivation,
			Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
				return evalBiasActivation(in, f)
			},
			Cost: perInput(10),
			Grad: NoGradYet,
		})
	}
}

func fastGelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// biasActivation checks X and an optional bias whose length is X's last dimension.
func (c *nodeCtx) biasActivation() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.wantFloats(0, 1); err != nil {
		return nil, err
	}
	if b := c.arg(1); b != nil && b.shape != nil {
		if len(b.shape) != 1 {
			return nil, fmt.Errorf("bias %q has shape %v, want 1-D", c.name(1), b.shape)
		}
		if x.shape != nil && len(x.shape) > 0 {
			if err := sameDim(b.shape[0], x.shape[len(x.shape)-1], "bias length and the last dimension of the input differ"); err != nil {
				return nil, err
			}
		}
	}
	return one(mk(tensor.Float32, cloneShape(x.shape))), nil
}

func evalBiasActivation(in []*tensor.Tensor, f func(float64) float64) ([]*tensor.Tensor, error) {
	x, b := in[0], optIn(in, 1)
	out, err := newTensor(tensor.Float32, x.Shape)
	if err != nil {
		return nil, err
	}
	for i, v := range x.F32 {
		s := float64(v)
		if b != nil {
			// The bias is added in float32 first, as ONNX Runtime's kernels do.
			s = float64(v + b.F32[i%b.Len()])
		}
		out.F32[i] = float32(f(s))
	}
	return []*tensor.Tensor{out}, nil
}
