package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// BatchNormalization: in inference mode (x − mean) / sqrt(var + epsilon) · scale + B per
// channel (axis 1), the form convolutional front ends export; in training mode (opset 14's
// training_mode 1) with the batch's own statistics, and the running statistics updated by
// momentum as further outputs.

func init() {
	register(&OpDef{
		Name: "BatchNormalization", SinceVersion: 9, ThroughVersion: LatestOpset,
		Doc:     "(X − input_mean) / sqrt(input_var + epsilon) · scale + B per channel (axis 1); with training_mode 1, the batch's mean and variance instead, and running_mean, running_var updated by momentum",
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
			training := attrInt(c.n, "training_mode") != 0
			if !training && len(c.n.Outputs) > 1 {
				return nil, errors.New("running_mean and running_var are outputs in training mode only (training_mode 1)")
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
			outs := []*absVal{mk(tensor.Float32, cloneShape(x.shape))}
			if training {
				var ch Shape
				if x.shape != nil {
					ch = Shape{x.shape[1]}
				}
				outs = append(outs, mk(tensor.Float32, ch), mk(tensor.Float32, cloneShape(ch)))
			}
			return outs, nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x, scale, b := in[0], in[1], in[2]
			out, err := newTensor(tensor.Float32, x.Shape)
			if err != nil {
				return nil, err
			}
			ch, inner := x.Shape[1], NumElements(x.Shape[2:])
			eps := f64(attrFloat(n, "epsilon"))
			mean, vr := make([]float64, ch), make([]float64, ch)
			for c := range mean {
				mean[c], vr[c] = f64(in[3].F32[c]), f64(in[4].F32[c])
			}
			training := attrInt(n, "training_mode") != 0
			var runMean, runVar *tensor.Tensor
			if training {
				// The batch's statistics per channel (population variance), and the running
				// ones updated: running = input · momentum + batch · (1 − momentum).
				count := float64(x.Shape[0] * inner)
				bm, bv := make([]float64, ch), make([]float64, ch)
				for i, v := range x.F32 {
					bm[i/inner%ch] += f64(v)
				}
				for c := range bm {
					bm[c] /= count
				}
				for i, v := range x.F32 {
					d := f64(v) - bm[i/inner%ch]
					bv[i/inner%ch] += d * d
				}
				mom := f64(attrFloat(n, "momentum"))
				if runMean, err = newTensor(tensor.Float32, []int{ch}); err != nil {
					return nil, err
				}
				if runVar, err = newTensor(tensor.Float32, []int{ch}); err != nil {
					return nil, err
				}
				for c := range bv {
					bv[c] /= count
					runMean.F32[c] = float32(mean[c]*mom + bm[c]*(1-mom))
					runVar.F32[c] = float32(vr[c]*mom + bv[c]*(1-mom))
				}
				mean, vr = bm, bv
			}
			for i, v := range x.F32 {
				c := i / inner % ch
				out.F32[i] = float32((f64(v)-mean[c])/math.Sqrt(vr[c]+eps)*f64(scale.F32[c]) + f64(b.F32[c]))
			}
			if training {
				return []*tensor.Tensor{out, runMean, runVar}, nil
			}
			return []*tensor.Tensor{out}, nil
		},
		Cost: perInput(4),
		Grad: NoGradYet,
	})
}
