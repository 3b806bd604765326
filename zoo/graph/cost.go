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
	// BytesMoved is the sum over nodes of the bytes each reads and writes when run by a
	// plain kernel (OpCost.Bytes): the memory traffic of an unfused run.
	BytesMoved int64
}

// Cost counts FLOPs and memory for one run of the graph with the given graph-input shapes
// (see ConcreteShapes), from the concrete shapes alone. Every node output counts as an
// activation, including values computed only from initializers (a transposed weight), which
// a backend may fold away; data movement costs no FLOPs and is counted in BytesMoved.
//
// The per-node rules are each op's OpDef.Cost in the op table; for FLOPs they come to (a
// multiply-add counts 2):
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
	bytesOf := func(name string) (int64, error) { return valueBytes(vals, name) }
	costs, err := g.nodeCosts(vals)
	if err != nil {
		return Cost{}, err
	}
	for i, n := range g.Nodes {
		oc := costs[i]
		if c.BytesMoved > math.MaxInt64-oc.Bytes {
			return Cost{}, fmt.Errorf("cost of graph %s: byte count overflows int64 at node %q", g.Name, n.Name)
		}
		c.BytesMoved += oc.Bytes
		if f := oc.FLOPs; f > 0 {
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

// NodeCosts returns each node's cost (its OpDef.Cost rule) for one run of the graph with
// the given graph-input shapes, keyed by the graph's own *Node values; Cost's total is their
// sum. It returns an error for everything ConcreteShapes rejects and for an op without a
// cost rule, naming the node.
func (g *Graph) NodeCosts(inputs map[string][]int) (map[*Node]OpCost, error) {
	if g == nil {
		return nil, errors.New("node costs: graph is nil")
	}
	vals, err := g.propagate(true, inputs)
	if err != nil {
		return nil, fmt.Errorf("cost of graph %s: %w", g.Name, err)
	}
	costs, err := g.nodeCosts(vals)
	if err != nil {
		return nil, err
	}
	out := make(map[*Node]OpCost, len(g.Nodes))
	for i, n := range g.Nodes {
		out[n] = costs[i]
	}
	return out, nil
}

// ValueBytes returns the size in bytes of every value of the graph (inputs, initializers and
// node outputs, by name) for one run with the given graph-input shapes. It returns an error
// for everything ConcreteShapes rejects and for a value too large to count.
func (g *Graph) ValueBytes(inputs map[string][]int) (map[string]int64, error) {
	if g == nil {
		return nil, errors.New("value bytes: graph is nil")
	}
	vals, err := g.propagate(true, inputs)
	if err != nil {
		return nil, fmt.Errorf("sizes of graph %s: %w", g.Name, err)
	}
	out := make(map[string]int64, len(vals))
	for name := range vals {
		b, err := valueBytes(vals, name)
		if err != nil {
			return nil, fmt.Errorf("sizes of graph %s: %w", g.Name, err)
		}
		out[name] = b
	}
	return out, nil
}

// valueBytes is the size of value name at the propagated concrete shapes vals.
func valueBytes(vals map[string]*absVal, name string) (int64, error) {
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

// nodeCosts applies every node's cost rule at the propagated shapes vals, in node order.
func (g *Graph) nodeCosts(vals map[string]*absVal) ([]OpCost, error) {
	out := make([]OpCost, len(g.Nodes))
	for i, n := range g.Nodes {
		oc, err := nodeCost(n, vals)
		if err != nil {
			return nil, fmt.Errorf("cost of graph %s: node %d %q (%s): %w", g.Name, i, n.Name, n.Op, err)
		}
		out[i] = oc
	}
	return out, nil
}

// typesOf returns the concrete types of the named values ("" gives a zero TensorType).
func typesOf(names []string, vals map[string]*absVal) ([]TensorType, error) {
	out := make([]TensorType, len(names))
	for i, name := range names {
		if name == "" {
			continue
		}
		v := vals[name]
		if v == nil || !fullyKnown(v.shape) {
			return nil, fmt.Errorf("value %q has no concrete shape", name)
		}
		out[i] = TensorType{DType: v.dt, Shape: ints(sizes(v.shape))}
	}
	return out, nil
}

// ioBytes is the bytes a plain kernel moves: every input read once, every output written once.
func ioBytes(in, out []TensorType) int64 {
	var b int64
	for _, t := range in {
		b += t.Bytes()
	}
	for _, t := range out {
		b += t.Bytes()
	}
	return b
}

// elems returns the element count of a concrete type, failing on overflow.
func (t TensorType) elems() (int64, error) {
	s := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		s[i] = int64(d)
	}
	return mulChecked(s...)
}

// perOutput charges k FLOPs per element of output 0 and moves every input and output once.
func perOutput(k int64) CostFunc {
	return func(n *Node, in, out []TensorType) (OpCost, error) {
		if len(out) == 0 {
			return OpCost{}, errors.New("no outputs")
		}
		e, err := out[0].elems()
		if err != nil {
			return OpCost{}, err
		}
		f, err := mulChecked(e, k)
		return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, err
	}
}

// perInput charges k FLOPs per element of input 0 and moves every input and output once.
func perInput(k int64) CostFunc {
	return func(n *Node, in, out []TensorType) (OpCost, error) {
		if len(in) == 0 {
			return OpCost{}, errors.New("no inputs")
		}
		e, err := in[0].elems()
		if err != nil {
			return OpCost{}, err
		}
		f, err := mulChecked(e, k)
		return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, err
	}
}

// moveCost is the cost of data movement: no FLOPs, every input and output moved once.
func moveCost(n *Node, in, out []TensorType) (OpCost, error) {
	return OpCost{Bytes: ioBytes(in, out)}, nil
}

// writeCost is the cost of an op that only writes its outputs (Shape, Constant, Range, ...).
func writeCost(n *Node, in, out []TensorType) (OpCost, error) {
	return OpCost{Bytes: ioBytes(nil, out)}, nil
}

// viewCost is the cost of an op a backend runs as a view of its input: nothing.
func viewCost(n *Node, in, out []TensorType) (OpCost, error) { return OpCost{}, nil }

// nodeCost applies the node's op-table cost rule at the propagated concrete shapes.
func nodeCost(n *Node, vals map[string]*absVal) (OpCost, error) {
	d, ok := LookupNodeOp(n)
	if !ok || d.Cost == nil {
		return OpCost{}, fmt.Errorf("no cost rule for op %q", n.Op)
	}
	in, err := typesOf(n.Inputs, vals)
	if err != nil {
		return OpCost{}, err
	}
	out, err := typesOf(n.Outputs, vals)
	if err != nil {
		return OpCost{}, err
	}
	return d.Cost(n, in, out)
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
