package autodiff

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The names WithCrossEntropy adds to a model's graph.
const (
	// InputTargets is the int64 targets input: one class id per position (the logits' shape
	// without the class axis).
	InputTargets = "targets"
	// OutputLoss is the scalar float32 loss output.
	OutputLoss = "loss"
)

// LogSoftmax adds log(softmax(x)) over the last axis, computed stably as
// x − max − log Σ exp(x − max) with the max cut from the gradient (it cancels).
func LogSoftmax(b *graph.Builder, x string) string {
	m := StopGradient(b, b.Op("ReduceMax", []string{x}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Int(1)}))
	z := b.Sub(x, m)
	lse := b.Op("Log", []string{b.Op("ReduceSum", []string{b.Op("Exp", []string{z}, nil), b.ConstInts(-1)}, graph.Attrs{"keepdims": graph.Int(1)})}, nil)
	return b.Sub(z, lse)
}

// CrossEntropy adds the mean cross-entropy of logits (..., C) against int64 targets (...)
// over the counted positions and returns the scalar loss. counted is a bool value of the
// targets' shape (true: the position counts) or "" to count every position. With label
// smoothing ε it is PyTorch's formula, per position (1−ε)·(−log p[target]) + ε·mean over
// classes of (−log p), summed over counted positions and divided by their number (NaN when none
// count, as in PyTorch). Positions that do not count take no part whatever their logits hold:
// their logits get a zero gradient even when NaN (PyTorch would pass the NaN back). A target
// outside [0, C) at a counted position contributes only its smoothing term; callers keep
// targets in range there (PyTorch raises an error).
func CrossEntropy(b *graph.Builder, logits, targets, counted string, smoothing float32) string {
	if smoothing < 0 || smoothing > 1 || math.IsNaN(float64(smoothing)) {
		b.Failf("cross-entropy: label smoothing %v is not in [0, 1]", smoothing)
	}
	if counted != "" {
		// Positions that do not count (padding) read zeros, so that whatever their logits
		// hold, no NaN or infinity reaches the loss or flows back from them.
		logits = b.Where(b.Unsqueeze(counted, -1), logits, b.ConstFloat(0))
	}
	lsm := LogSoftmax(b, logits)
	// One-hot targets by comparison with 0..C-1, so that a position with an ignored target
	// (any id) reads no class.
	c := b.Op("Squeeze", []string{b.Slice(b.Shape(logits), b.ConstInts(-1), b.ConstInts(math.MaxInt64), b.ConstInts(0)), b.ConstInts(0)}, nil)
	classes := b.Op("Range", []string{b.Const(tensor.Scalar64(0)), c, b.Const(tensor.Scalar64(1))}, nil)
	oneHot := b.Op("Cast", []string{b.Op("Equal", []string{b.Unsqueeze(targets, -1), classes}, nil)}, graph.Attrs{"to": graph.Int(1)})
	per := b.Op("Neg", []string{b.Op("ReduceSum", []string{b.Mul(oneHot, lsm), b.ConstInts(-1)}, graph.Attrs{"keepdims": graph.Int(0)})}, nil)
	if smoothing != 0 {
		smooth := b.Op("Neg", []string{b.Op("ReduceMean", []string{lsm}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Int(0)})}, nil)
		per = b.Add(b.Mul(per, b.ConstFloat(1-smoothing)), b.Mul(smooth, b.ConstFloat(smoothing)))
	}
	all := graph.Attrs{"keepdims": graph.Int(0)}
	if counted == "" {
		ones := b.Op("ConstantOfShape", []string{b.Shape(targets)}, graph.Attrs{"value": graph.TensorAttr(&tensor.Tensor{DType: tensor.Float32, Shape: []int{1}, F32: []float32{1}})})
		return b.Div(b.Op("ReduceSum", []string{per}, all), b.Op("ReduceSum", []string{ones}, all))
	}
	kept := b.Where(counted, per, b.ConstFloat(0))
	n := b.Op("ReduceSum", []string{b.Op("Cast", []string{counted}, graph.Attrs{"to": graph.Int(1)})}, all)
	return b.Div(b.Op("ReduceSum", []string{kept}, all), n)
}

// LossOptions configures WithCrossEntropy.
type LossOptions struct {
	// Logits names the model output the loss reads; "" means nn.OutputLogits.
	Logits string
	// LabelSmoothing is PyTorch's label_smoothing, in [0, 1].
	LabelSmoothing float32
	// IgnoreIndex is the target id of positions that do not count (PyTorch's ignore_index);
	// the zero value 0 is the byte tokenizer's pad id, as in the seed.
	IgnoreIndex int64
}

// WithCrossEntropy returns a copy of the model graph g with the int64 input InputTargets
// (the logits' dimensions without the last) and the scalar output OutputLoss: CrossEntropy
// of the logits against the targets, counting the positions whose target is not
// IgnoreIndex. g is not modified. It returns an error when g has no such logits output, its
// rank is below 2, or the label smoothing is out of range.
func WithCrossEntropy(g *graph.Graph, o LossOptions) (*graph.Graph, error) {
	if g == nil {
		return nil, errors.New("cross-entropy: graph is nil")
	}
	logits := o.Logits
	if logits == "" {
		logits = nn.OutputLogits
	}
	var li *graph.ValueInfo
	for i := range g.Outputs {
		if g.Outputs[i].Name == logits {
			li = &g.Outputs[i]
		}
	}
	if li == nil {
		return nil, fmt.Errorf("cross-entropy of graph %s: no output %q", g.Name, logits)
	}
	if li.Shape != nil && len(li.Shape) < 2 {
		return nil, fmt.Errorf("cross-entropy of graph %s: logits %q have shape %v, want (..., classes)", g.Name, logits, li.Shape)
	}
	for _, in := range g.Inputs {
		if in.Name == InputTargets {
			return nil, fmt.Errorf("cross-entropy of graph %s: it already has an input %q", g.Name, InputTargets)
		}
	}
	b := g.Extend("xent")
	var dims []graph.Dim
	if li.Shape != nil {
		dims = append(dims, li.Shape[:len(li.Shape)-1]...)
	}
	t := b.Input(InputTargets, tensor.Int64, dims...)
	counted := b.Op("Not", []string{b.Op("Equal", []string{t, b.Const(tensor.Scalar64(o.IgnoreIndex))}, nil)}, nil)
	b.Output(OutputLoss, CrossEntropy(b, logits, t, counted, o.LabelSmoothing), tensor.Float32)
	out, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("cross-entropy: %w", err)
	}
	return out, nil
}
