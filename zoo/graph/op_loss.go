package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The classification losses of ONNX: NegativeLogLikelihoodLoss over log-probabilities, and
// SoftmaxCrossEntropyLoss over scores (LogSoftmax along the class axis, then the same). Both
// take an optional weight per class and an ignore_index whose targets count for nothing;
// reduction none keeps one loss per target, sum adds them, mean divides the sum by the
// weights of the targets that count.

func init() {
	attrs := []AttrDef{{Name: "reduction", Kind: AttrString, Default: String("mean")}, optIntAttr("ignore_index")}
	register(&OpDef{
		Name: "NegativeLogLikelihoodLoss", SinceVersion: 12, ThroughVersion: LatestOpset,
		Doc:    "−input[n, target[n, d...], d...] · weight[target], reduced (none, sum, mean over the counted weights); ignore_index counts for nothing",
		Inputs: ps(req("input"), req("target"), opt("weight")), Outputs: ps(req("loss")),
		Attrs: attrs,
		infer: func(c *nodeCtx) ([]*absVal, error) {
			outs, err := c.classLoss()
			if err != nil {
				return nil, err
			}
			return outs[:1], nil
		},
		Eval:    evalClassLoss,
		Cost:    perInput(2),
		Grad:    NoGradYet,
		Float64: true,
	})
	register(&OpDef{
		Name: "SoftmaxCrossEntropyLoss", SinceVersion: 12, ThroughVersion: LatestOpset,
		Doc:     "NegativeLogLikelihoodLoss of LogSoftmax(scores) along the class axis 1, and those log-probabilities",
		Inputs:  ps(req("scores"), req("labels"), opt("weights")),
		Outputs: ps(req("output"), opt("log_prob")),
		Attrs:   attrs,
		infer:   (*nodeCtx).classLoss,
		Eval:    evalClassLoss,
		Cost:    perInput(6),
		Grad:    NoGradYet,
		Float64: true,
	})
}

// classLoss is the inference rule of both losses: the loss (the target's shape, or a scalar
// when reduced) and the log-probabilities (the input's shape).
func (c *nodeCtx) classLoss() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	t, err := c.req(1)
	if err != nil {
		return nil, err
	}
	if !isFloatVal(x.dt) {
		return nil, fmt.Errorf("input %q has dtype %v, want a float type", c.name(0), x.dt)
	}
	if t.dt != tensor.Int64 && t.dt != tensor.Int32 {
		return nil, fmt.Errorf("target %q has dtype %v, want int64 or int32", c.name(1), t.dt)
	}
	if w := c.arg(2); w != nil {
		if w.dt != x.dt {
			return nil, fmt.Errorf("weight %q has dtype %v, want %v like the input", c.name(2), w.dt, x.dt)
		}
		if w.shape != nil && len(w.shape) != 1 {
			return nil, fmt.Errorf("weight %q has rank %d, want 1 (one per class)", c.name(2), len(w.shape))
		}
	}
	red := attrString(c.n, "reduction")
	if red != "none" && red != "sum" && red != "mean" {
		return nil, fmt.Errorf("reduction %q is not none, sum or mean", red)
	}
	if x.shape != nil {
		if len(x.shape) < 2 {
			return nil, fmt.Errorf("input %q has rank %d, want (N, C, ...)", c.name(0), len(x.shape))
		}
		if t.shape != nil {
			want := append(Shape{x.shape[0]}, x.shape[2:]...)
			if !sameShape(t.shape, want) {
				return nil, fmt.Errorf("target %q has shape %v, want %v (the input's without the class axis)", c.name(1), t.shape, want)
			}
		}
	}
	loss := mk(x.dt, Shape{})
	if red == "none" {
		loss.shape = cloneShape(t.shape)
	}
	return []*absVal{loss, mk(x.dt, cloneShape(x.shape))}, nil
}

// evalClassLoss computes either loss in float64.
func evalClassLoss(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, target := in[0], in[1]
	var weight *tensor.Tensor
	if len(in) > 2 {
		weight = in[2]
	}
	if len(x.Shape) < 2 {
		return nil, errors.New("input must be (N, C, ...)")
	}
	nb, classes, inner := x.Shape[0], x.Shape[1], NumElements(x.Shape[2:])
	if weight != nil && weight.Len() != classes {
		return nil, fmt.Errorf("weight has %d elements for %d classes", weight.Len(), classes)
	}
	if target.Len() != nb*inner {
		return nil, fmt.Errorf("target has %d elements, want %d", target.Len(), nb*inner)
	}
	logp := x
	if n.Op == "SoftmaxCrossEntropyLoss" {
		ls := &Node{Name: n.Name, Op: "LogSoftmax", Attrs: Attrs{"axis": Int(1)}}
		outs, err := evalAlongAxis(ls, []*tensor.Tensor{x})
		if err != nil {
			return nil, err
		}
		logp = outs[0]
	}
	ignore, hasIgnore := int64(0), false
	if a, ok := n.Attrs["ignore_index"]; ok {
		ignore, hasIgnore = a.I, true
	}
	red := attrString(n, "reduction")
	lossShape := []int{}
	if red == "none" {
		lossShape = target.Shape
	}
	loss, err := newTensor(x.DType, lossShape)
	if err != nil {
		return nil, err
	}
	var sum, weights float64
	for b := 0; b < nb; b++ {
		for i := 0; i < inner; i++ {
			k := b*inner + i
			cls := target.I64[k]
			var l, w float64
			if !hasIgnore || cls != ignore {
				if cls < 0 || cls >= int64(classes) {
					return nil, fmt.Errorf("target %d is outside [0, %d) and is not ignore_index", cls, classes)
				}
				w = 1
				if weight != nil {
					w = numAt(weight, int(cls))
				}
				l = -numAt(logp, (b*classes+int(cls))*inner+i) * w
			}
			if red == "none" {
				setNum(loss, k, l)
			}
			sum += l
			weights += w
		}
	}
	switch red {
	case "sum":
		setNum(loss, 0, sum)
	case "mean":
		v := sum / weights // every target ignored: 0/0 is NaN, as ONNX's reference gives
		if weights == 0 {
			v = math.NaN()
		}
		setNum(loss, 0, v)
	}
	return []*tensor.Tensor{loss, logp}, nil
}
