package graph

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// EvalNode runs the reference evaluation of node n on concrete input tensors, one per entry
// of n.Inputs (nil where an optional input is omitted), and returns one tensor per entry of
// n.Outputs. The reference follows ONNX semantics plainly, computing float32 results in
// float64 and rounding once; it is the oracle the backends are tested against, not a fast
// path. Before evaluating, the node is checked against the op table (arity, attributes)
// and run through the same type and shape inference rule InferShapes uses, so the oracle
// accepts exactly what inference accepts; after, each output is checked against the
// inferred dtype and shape.
//
// It returns an error naming the op and the node for an unknown op, a malformed node, a
// missing or invalid input tensor, anything inference rejects (wrong dtypes, incompatible
// shapes, out-of-range axes or indices), and values ONNX leaves undefined (integer division
// by zero, a float cast to an integer type it does not fit). It never panics.
func EvalNode(n *Node, in []*tensor.Tensor) (outs []*tensor.Tensor, err error) {
	if n == nil {
		return nil, errors.New("eval: node is nil")
	}
	where := fmt.Sprintf("eval node %q (%s)", n.Name, OpKey(n.Domain, n.Op))
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("%s: internal error: %v", where, r)
		}
	}()
	d, ok := LookupNodeOp(n)
	if !ok {
		return nil, fmt.Errorf("%s: unknown op type %q", where, OpKey(n.Domain, n.Op))
	}
	if err := d.checkNode(n); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(in) != len(n.Inputs) {
		return nil, fmt.Errorf("%s: got %d input tensors for %d inputs", where, len(in), len(n.Inputs))
	}
	c := &nodeCtx{concrete: true, n: n, def: d, in: make([]*absVal, len(in)), names: n.Inputs}
	for i, t := range in {
		switch {
		case t == nil && n.Inputs[i] != "":
			return nil, fmt.Errorf("%s: input %d (%q) has no tensor", where, i, n.Inputs[i])
		case t == nil:
			continue
		}
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("%s: input %d (%q): %w", where, i, n.Inputs[i], err)
		}
		c.in[i] = fromTensor(t)
	}
	want, err := d.infer(c)
	if err == nil {
		err = c.checkWide(want)
	}
	if err == nil && len(want) < len(n.Outputs) {
		err = fmt.Errorf("inference gave %d outputs for %d", len(want), len(n.Outputs))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if d.Eval == nil {
		return nil, fmt.Errorf("%s: op %s has no reference evaluation", where, n.Op)
	}
	outs, err = d.Eval(n, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(outs) < len(n.Outputs) {
		return nil, fmt.Errorf("%s: internal error: evaluation gave %d outputs for %d", where, len(outs), len(n.Outputs))
	}
	outs = outs[:len(n.Outputs)]
	for i, o := range outs {
		if o == nil {
			return nil, fmt.Errorf("%s: internal error: output %d is nil", where, i)
		}
		if err := o.Check(); err != nil {
			return nil, fmt.Errorf("%s: internal error: output %d: %w", where, i, err)
		}
		w := want[i]
		if w.dt != o.DType || !shapeAgrees(w.shape, o.Shape) {
			return nil, fmt.Errorf("%s: internal error: output %d is %v %s, inference says %v %v", where, i, o.DType, tensor.ShapeString(o.Shape), w.dt, w.shape)
		}
	}
	return outs, nil
}

// shapeAgrees reports whether a concrete shape fits an inferred one.
func shapeAgrees(s Shape, dims []int) bool {
	if s == nil {
		return true
	}
	if len(s) != len(dims) {
		return false
	}
	for i, d := range s {
		if d.Known() && d.Size != int64(dims[i]) {
			return false
		}
	}
	return true
}

// ---- helpers for the reference evaluations ----

// newTensor allocates a zero tensor of dtype dt.
func newTensor(dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	return tensor.New(dt, shape...)
}

// wrapInt keeps an integer result in its dtype's range: int32 arithmetic wraps as in C.
func wrapInt(dt tensor.DType, v int64) int64 { return dt.Wrap(v) }

// forIndex calls f with every multi-index of shape in row-major order and its flat offset;
// idx is reused between calls.
func forIndex(shape []int, f func(flat int, idx []int) error) error {
	n := NumElements(shape)
	if n <= 0 {
		return nil
	}
	idx := make([]int, len(shape))
	for flat := 0; flat < n; flat++ {
		if err := f(flat, idx); err != nil {
			return err
		}
		for k := len(shape) - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	return nil
}

// broadcastEach calls f for every element o of outShape with offs[k], the flat element of
// ins[k] that numpy broadcasting reads there. Every input shape must broadcast to outShape.
func broadcastEach(outShape []int, ins []*tensor.Tensor, f func(o int, offs []int) error) error {
	sts := make([][]int, len(ins))
	for k, t := range ins {
		if len(t.Shape) > len(outShape) {
			return fmt.Errorf("shape %s does not broadcast to %s", tensor.ShapeString(t.Shape), tensor.ShapeString(outShape))
		}
		st := tensor.Strides(t.Shape)
		full := make([]int, len(outShape))
		lead := len(outShape) - len(t.Shape)
		for j, d := range t.Shape {
			switch {
			case d == outShape[lead+j]:
				full[lead+j] = st[j]
			case d == 1:
			default:
				return fmt.Errorf("shape %s does not broadcast to %s", tensor.ShapeString(t.Shape), tensor.ShapeString(outShape))
			}
		}
		sts[k] = full
	}
	offs := make([]int, len(ins))
	return forIndex(outShape, func(o int, idx []int) error {
		for k := range ins {
			off := 0
			for j, i := range idx {
				off += i * sts[k][j]
			}
			offs[k] = off
		}
		return f(o, offs)
	})
}

// copyElem copies element si of src to element di of dst (same dtype).
func copyElem(dst *tensor.Tensor, di int, src *tensor.Tensor, si int) {
	switch {
	case src.F32 != nil:
		dst.F32[di] = src.F32[si]
	case src.DType == tensor.Float64:
		dst.F64[di] = src.F64[si]
	case src.DType == tensor.Bool:
		dst.Bool[di] = src.Bool[si]
	default:
		dst.I64[di] = src.I64[si]
	}
}

// takeFrom builds a tensor of x's dtype and shape outShape whose element at idx is x's
// element at flat offset src(idx).
func takeFrom(x *tensor.Tensor, outShape []int, src func(idx []int) (int, error)) (*tensor.Tensor, error) {
	out, err := newTensor(x.DType, outShape)
	if err != nil {
		return nil, err
	}
	n := x.Len()
	err = forIndex(outShape, func(o int, idx []int) error {
		s, err := src(idx)
		if err != nil {
			return err
		}
		if s < 0 || s >= n {
			return fmt.Errorf("internal error: element %d of a tensor of %d", s, n)
		}
		copyElem(out, o, x, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// withShape returns a copy of x with a new shape of the same element count.
func withShape(x *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	if NumElements(shape) != x.Len() {
		return nil, fmt.Errorf("internal error: shape %s for %d elements", tensor.ShapeString(shape), x.Len())
	}
	c := x.Clone()
	c.Shape = append([]int{}, shape...)
	return c, nil
}

// intsOf returns the values of an integer tensor input (a shape, axes, indices vector).
func intsOf(t *tensor.Tensor, what string) ([]int64, error) {
	if t == nil {
		return nil, fmt.Errorf("%s is missing", what)
	}
	if !isInt(t.DType) {
		return nil, fmt.Errorf("%s has dtype %v, want int64", what, t.DType)
	}
	return t.I64, nil
}

// axesOf reads Squeeze's or a Reduce op's axes from input i when given, else from the
// "axes" attribute (older opsets); nil means none were given.
func axesOf(n *Node, in []*tensor.Tensor, i int) ([]int64, error) {
	if i < len(in) && in[i] != nil {
		v, err := intsOf(in[i], "axes")
		if err != nil {
			return nil, err
		}
		return append([]int64{}, v...), nil
	}
	if v, ok := n.IntList("axes"); ok {
		return append([]int64{}, v...), nil
	}
	return nil, nil
}

// f64 widens a float32 for the reference's float64 arithmetic.
func f64(v float32) float64 { return float64(v) }

// floatToInt converts a float to an integer dtype, truncating toward zero as a C cast does;
// ONNX leaves NaN, infinities and values outside the type undefined, and the oracle refuses
// them.
func floatToInt(v float64, dt tensor.DType) (int64, error) {
	t := math.Trunc(v)
	if dt == tensor.Uint64 {
		if math.IsNaN(v) || t < 0 || t >= 1<<64 {
			return 0, fmt.Errorf("float %v does not fit %v (ONNX leaves the result undefined)", v, dt)
		}
		return int64(uint64(t)), nil
	}
	lo, hi := float64(math.MinInt64), float64(math.MaxInt64)
	if dt.IsInt() && dt != tensor.Int64 {
		l, h := dt.IntRange()
		lo, hi = float64(l), float64(h)
	}
	if math.IsNaN(v) || t < lo || t >= hi+1 || (dt == tensor.Int64 && t >= hi) {
		return 0, fmt.Errorf("float %v does not fit %v (ONNX leaves the result undefined)", v, dt)
	}
	return int64(t), nil
}

// Eval runs the whole graph on the reference evaluator: every node in order through
// EvalNode, from the given graph inputs (by name) and the initializers. It returns the graph
// outputs by name. It is slow and plain on purpose; backends compare their results with it.
//
// It returns an error when the graph fails Validate, when an input is missing, names no
// graph input, or contradicts the declared dtype, rank or a fixed dimension, when ctx is
// done (checked between nodes), and for any node EvalNode rejects.
func (g *Graph) Eval(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if g == nil {
		return nil, errors.New("eval: graph is nil")
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("eval graph %s: %w", g.Name, err)
	}
	vals := g.InitializerMap()
	declared := map[string]bool{}
	for _, in := range g.Inputs {
		declared[in.Name] = true
		t, ok := inputs[in.Name]
		if !ok || t == nil {
			return nil, fmt.Errorf("eval graph %s: no tensor for graph input %q", g.Name, in.Name)
		}
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("eval graph %s: graph input %q: %w", g.Name, in.Name, err)
		}
		if t.DType != in.DType || !shapeAgrees(in.Shape, t.Shape) {
			return nil, fmt.Errorf("eval graph %s: graph input %q is %v %s, declared %v %v", g.Name, in.Name, t.DType, tensor.ShapeString(t.Shape), in.DType, in.Shape)
		}
		vals[in.Name] = t
	}
	for name := range inputs {
		if !declared[name] {
			return nil, fmt.Errorf("eval graph %s: %q is not a graph input", g.Name, name)
		}
	}
	for _, n := range g.Nodes {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("eval graph %s: %w", g.Name, err)
		}
		in := make([]*tensor.Tensor, len(n.Inputs))
		for i, name := range n.Inputs {
			if name != "" {
				in[i] = vals[name]
			}
		}
		outs, err := EvalNode(n, in)
		if err != nil {
			return nil, fmt.Errorf("eval graph %s: %w", g.Name, err)
		}
		for i, name := range n.Outputs {
			if name != "" {
				vals[name] = outs[i]
			}
		}
	}
	res := make(map[string]*tensor.Tensor, len(g.Outputs))
	for _, o := range g.Outputs {
		res[o.Name] = vals[o.Name]
	}
	return res, nil
}
