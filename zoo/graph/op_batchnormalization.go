package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// BatchNormalization in inference mode: (x − mean) / sqrt(var + epsilon) · scale + B per
// channel (axis 1), the form convolutional front ends export.

func init() {
	register(&OpDef{
		Name: "BatchNormalization", SinceVersion: 9, ThroughVersion: LatestOpset,
		Doc:     "inference-mode (X − input_mean) / sqrt(input_var + epsilon) · scale + B per channel (axis 1)",
		Inputs:  ps(req("X"), req("scale"), req("B"), req("input_mean"), req("input_var")),
		Outputs: ps(req("Y"), opt("running_mean"), opt("running_var")),
		Attrs:   []AttrDef{floatAttr("epsilon", 1e-5), floatAttr("momentum", 0.9), intAttr("training_mode", 0)},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if err := c.wantFloats(0, 1, 2, 3, 4); err != nil {
				return nil, err
			}
			if attrInt(c.n, "training_mode") != 0 || (len(c.n.Outputs) > 1 && c.n.Outputs[1] != "") {
				return nil, errors.New("training mode (running statistics) is not supported: zoo runs BatchNormalization for inference")
			}
			if x.shape != nil && len(x.shape) < 2 {
				return nil, fmt.Errorf("input %q has shape %v, want (N, C, ...)", c.name(0), x.shape)
			}
			for i := 1; i <= 4; i++ {
				if err := c.wantRank(i, "statistic", 1); err != nil {
					return nil, err
				}
				if err := sameDim(dimOf(c.arg(i), 0), dimOf(x, 1), fmt.Sprintf("%q and the channels of the input differ", c.name(i))); err != nil {
					return nil, err
				}
			}
			return one(mk(tensor.Float32, cloneShape(x.shape))), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x, scale, b, mean, vr := in[0], in[1], in[2], in[3], in[4]
			out, err := newTensor(tensor.Float32, x.Shape)
			if err != nil {
				return nil, err
			}
			ch, inner := x.Shape[1], NumElements(x.Shape[2:])
			eps := f64(attrFloat(n, "epsilon"))
			for i, v := range x.F32 {
				c := i / inner % ch
				out.F32[i] = float32((f64(v)-f64(mean.F32[c]))/math.Sqrt(f64(vr.F32[c])+eps)*f64(scale.F32[c]) + f64(b.F32[c]))
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost: perInput(4),
		Grad: NoGradYet,
	})
}
