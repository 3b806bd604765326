package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Dropout with a training_mode decided at run time (an input of the graph). zoo runs
// inference: with training_mode false, or a ratio of 0, Dropout is the identity and its mask
// all true; in training mode with a ratio above 0 it would drop at random, which zoo refuses.
// Package onnx writes a Dropout whose training_mode is a constant false as Identity.

func init() {
	register(&OpDef{
		Name: "Dropout", SinceVersion: 12, ThroughVersion: LatestOpset,
		Doc:     "the identity (mask all true) unless training_mode: zoo refuses training mode with a ratio above 0 (random)",
		Inputs:  ps(req("data"), opt("ratio"), opt("training_mode")),
		Outputs: ps(req("output"), opt("mask")),
		Attrs:   []AttrDef{optIntAttr("seed")},
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			if !isFloatVal(x.dt) {
				return nil, fmt.Errorf("input %q has dtype %v, want a float type", c.name(0), x.dt)
			}
			if r := c.arg(1); r != nil && !isFloatVal(r.dt) {
				return nil, fmt.Errorf("ratio %q has dtype %v, want a float type", c.name(1), r.dt)
			}
			if m := c.arg(2); m != nil && m.dt != tensor.Bool {
				return nil, fmt.Errorf("training_mode %q has dtype %v, want bool", c.name(2), m.dt)
			}
			return []*absVal{mk(x.dt, cloneShape(x.shape)), mk(tensor.Bool, cloneShape(x.shape))}, nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x := in[0]
			training := len(in) > 2 && in[2] != nil && in[2].Len() == 1 && in[2].Bool[0]
			ratio := 0.5
			if len(in) > 1 && in[1] != nil {
				if in[1].Len() != 1 {
					return nil, fmt.Errorf("ratio must be a scalar")
				}
				ratio = numAt(in[1], 0)
			}
			if training && ratio != 0 {
				return nil, fmt.Errorf("Dropout in training mode drops at random (ratio %g); zoo runs inference (training_mode false)", ratio)
			}
			mask, err := newTensor(tensor.Bool, x.Shape)
			if err != nil {
				return nil, err
			}
			for i := range mask.Bool {
				mask.Bool[i] = true
			}
			return []*tensor.Tensor{x.Clone(), mask}, nil
		},
		Cost:    moveCost,
		Grad:    NoGradYet,
		Float64: true,
	})
}
