package graph

import (
	"errors"
	"fmt"
	"math"
)

// Cost is the arithmetic and memory cost of one run of a graph at concrete input shapes.
type Cost struct {
	// FLOPs is the total floating-point operation count (a multiply-add counts 2).
	FLOPs int64
	// ByOp splits FLOPs by op type; ops that cost nothing are absent.
	ByOp map[string]int64
	// ParamBytes is the memory every initializer occupies: learned parameters, buffers (such
	// as positional tables) and builder constants.
	ParamBytes int64
	// ActivationBytes is the peak of live activation bytes when the nodes run in order, each
	// node's outputs allocated while its inputs are still live, and each value freed after its
	// last use. Graph inputs are live from the start; graph outputs are never freed.
	ActivationBytes int64
	// SumActivationBytes is the total size of every graph input and node output, as if
	// nothing were ever freed.
	SumActivationBytes int64
}

// Cost counts FLOPs and memory for one run of the graph with the given graph-input shapes
// (see ConcreteShapes), from the concrete shapes alone. Every node output counts as an
// activation, including values computed only from initializers (a transposed weight), which
// a backend may fold away; data movement is not charged.
//
// FLOP rules, per node (a multiply-add counts 2):
//   - MatMul: 2·M·K·N for every element of the broadcast batch (a 1-D operand has M or N = 1).
//   - Gemm: 2·M·K·N, plus M·N when C is given (alpha and beta scaling are not counted).
//   - Elementwise arithmetic and logic — Add Sub Mul Div Pow Neg Abs Relu Where Equal Greater
//     Less And Or Not: 1 per output element; variadic Max and Min with k inputs: k−1 per
//     output element. Integer arithmetic on shape vectors counts the same way.
//   - Exp Log Sqrt Erf Tanh Sigmoid Elu: 1 per element. This counts each as one operation, not
//     its real instruction cost (a transcendental takes tens of instructions).
//   - Softmax: 5 per element (max, subtract, exp, sum, divide).
//   - LayerNormalization: 8 per element of the input.
//   - ReduceSum ReduceMean ReduceMax: 1 per input element.
//   - Data movement and shape ops — Reshape Transpose Gather Slice Concat Expand Shape Cast
//     Identity Unsqueeze Squeeze Split Tile Constant ConstantOfShape Range: 0.
//
// It returns an error for everything ConcreteShapes rejects, for an op without a FLOP rule,
// and when a count overflows int64.
func (g *Graph) Cost(inputs map[string][]int) (Cost, error) {
	if g == nil {
		return Cost{}, errors.New("cost: graph is nil")
	}
	vals, err := g.propagate(true, inputs)
	if err != nil {
		return Cost{}, fmt.Errorf("cost of graph %s: %w", g.Name, err)
	}
	c := Cost{ByOp: map[string]int64{}}
	for _, in := range g.Initializers {
		c.ParamBytes += int64(in.Tensor.Bytes())
	}
	bytesOf := func(name string) (int64, error) {
		v := vals[name]
		if v == nil {
			return 0, fmt.Errorf("value %q has no shape", name)
		}
		n, ok := numel(v.shape)
		if !ok || n > math.MaxInt64/8 {
			return 0, fmt.Errorf("value %q of shape %v is too large to count", name, v.shape)
		}
		return n * int64(v.dt.Size()), nil
	}
	for i, n := range g.Nodes {
		f, err := nodeFLOPs(n, vals)
		if err != nil {
			return Cost{}, fmt.Errorf("cost of graph %s: node %d %q (%s): %w", g.Name, i, n.Name, n.Op, err)
		}
		if f > 0 {
			if c.FLOPs > math.MaxInt64-f {
				return Cost{}, fmt.Errorf("cost of graph %s: FLOP count overflows int64 at node %q", g.Name, n.Name)
			}
			c.FLOPs += f
			c.ByOp[n.Op] += f
		}
	}

	// Memory: walk the nodes, allocating outputs and freeing values after their last use.
	isInit := map[string]bool{}
	for _, in := range g.Initializers {
		isInit[in.Name] = true
	}
	lastUse := map[string]int{}
	for _, in := range g.Inputs {
		lastUse[in.Name] = -1
	}
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" && !isInit[in] {
				lastUse[in] = i
			}
		}
	}
	for _, out := range g.Outputs {
		lastUse[out.Name] = len(g.Nodes)
	}
	var live int64
	for _, in := range g.Inputs {
		b, err := bytesOf(in.Name)
		if err != nil {
			return Cost{}, fmt.Errorf("cost of graph %s: %w", g.Name, err)
		}
		live += b
		c.SumActivationBytes += b
	}
	c.ActivationBytes = live
	for _, in := range g.Inputs {
		if lastUse[in.Name] < 0 {
			b, _ := bytesOf(in.Name)
			live -= b
		}
	}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o == "" {
				continue
			}
			b, err := bytesOf(o)
			if err != nil {
				return Cost{}, fmt.Errorf("cost of graph %s: node %q: %w", g.Name, n.Name, err)
			}
			live += b
			c.SumActivationBytes += b
		}
		c.ActivationBytes = max(c.ActivationBytes, live)
		freed := map[string]bool{}
		free := func(name string) {
			if name == "" || isInit[name] || freed[name] {
				return
			}
			if lu, ok := lastUse[name]; ok && lu > i {
				return
			}
			freed[name] = true
			b, _ := bytesOf(name)
			live -= b
		}
		for _, in := range n.Inputs {
			free(in)
		}
		for _, o := range n.Outputs {
			free(o)
		}
	}
	return c, nil
}

// nodeFLOPs applies Cost's FLOP rules to one node.
func nodeFLOPs(n *Node, vals map[string]*absVal) (int64, error) {
	shapeOf := func(name string) ([]int64, error) {
		v := vals[name]
		if v == nil || !fullyKnown(v.shape) {
			return nil, fmt.Errorf("value %q has no concrete shape", name)
		}
		return sizes(v.shape), nil
	}
	count := func(name string) (int64, error) {
		s, err := shapeOf(name)
		if err != nil {
			return 0, err
		}
		return mulChecked(s...)
	}
	perElem := func(name string, k int64) (int64, error) {
		e, err := count(name)
		if err != nil {
			return 0, err
		}
		return mulChecked(e, k)
	}
	out := ""
	if len(n.Outputs) > 0 {
		out = n.Outputs[0]
	}
	switch n.Op {
	case "MatMul":
		a, err := shapeOf(n.Input(0))
		if err != nil {
			return 0, err
		}
		b, err := shapeOf(n.Input(1))
		if err != nil {
			return 0, err
		}
		o, err := count(out)
		if err != nil {
			return 0, err
		}
		if len(a) == 0 || len(b) == 0 {
			return 0, errors.New("MatMul operand is a scalar")
		}
		// Every output element takes K multiply-adds.
		return mulChecked(o, a[len(a)-1], 2)
	case "Gemm":
		a, err := shapeOf(n.Input(0))
		if err != nil {
			return 0, err
		}
		if len(a) != 2 {
			return 0, fmt.Errorf("Gemm operand A has rank %d", len(a))
		}
		k := a[1]
		if n.Int("transA", 0) != 0 {
			k = a[0]
		}
		o, err := count(out)
		if err != nil {
			return 0, err
		}
		f, err := mulChecked(o, k, 2)
		if err != nil {
			return 0, err
		}
		if n.Input(2) != "" {
			f += o
		}
		return f, nil
	case "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Relu", "Where", "Equal", "Greater", "Less", "And", "Or", "Not",
		"Exp", "Log", "Sqrt", "Erf", "Tanh", "Sigmoid", "Elu":
		return perElem(out, 1)
	case "Max", "Min":
		return perElem(out, int64(max(len(n.Inputs)-1, 0)))
	case "Softmax":
		return perElem(out, 5)
	case "LayerNormalization":
		return perElem(n.Input(0), 8)
	case "ReduceSum", "ReduceMean", "ReduceMax":
		return perElem(n.Input(0), 1)
	case "Reshape", "Transpose", "Gather", "Slice", "Concat", "Expand", "Shape", "Cast", "Identity", "Unsqueeze",
		"Squeeze", "Split", "Tile", "Constant", "ConstantOfShape", "Range":
		return 0, nil
	}
	return 0, fmt.Errorf("no FLOP rule for op %q", n.Op)
}

// mulChecked multiplies non-negative factors, failing on overflow.
func mulChecked(xs ...int64) (int64, error) {
	p := int64(1)
	for _, x := range xs {
		if x < 0 {
			return 0, fmt.Errorf("negative size %d", x)
		}
		if x != 0 && p > math.MaxInt64/x {
			return 0, errors.New("count overflows int64")
		}
		p *= x
	}
	return p, nil
}

// SeedFLOPs returns the seed tutorial's estimate of one attention layer's cost for sequence
// length n and model width d: 4·n·d² (the Q, K, V and output projections) + 2·n²·d (the
// scores Q·Kᵀ and the weighted sum with V). The seed counts multiply-adds, so the same
// MatMuls cost 2·SeedFLOPs(n, d) under Cost's rules (which count a multiply-add as 2), and the
// estimate leaves out biases, scaling, masking and softmax. It returns -1 for negative
// arguments or when the result overflows int64.
func SeedFLOPs(n, d int64) int64 {
	a, err := mulChecked(4, n, d, d)
	if err != nil {
		return -1
	}
	b, err := mulChecked(2, n, n, d)
	if err != nil || a > math.MaxInt64-b {
		return -1
	}
	return a + b
}
