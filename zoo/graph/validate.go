package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Validate checks that the graph is well formed: every name is defined once, nodes are in
// topological order (each input is a graph input, an initializer or an earlier node's
// output), every op is in the op table with a legal number of inputs and outputs, no empty
// name for a required input, the declared kind for each attribute its definition declares
// (others are kept and ignored) and every required one, at an opset within the definition's range (when g.Opset is
// set), and every graph output is produced. It returns the first problem found, naming the node at fault.
func (g *Graph) Validate() error {
	if g == nil {
		return errors.New("graph is nil")
	}
	defined := map[string]string{}
	define := func(name, what string) error {
		if name == "" {
			return fmt.Errorf("%s has an empty name", what)
		}
		if prev, ok := defined[name]; ok {
			return fmt.Errorf("value %q is defined twice (%s and %s)", name, prev, what)
		}
		defined[name] = what
		return nil
	}
	for _, in := range g.Inputs {
		if err := define(in.Name, "graph input"); err != nil {
			return err
		}
		if in.DType.Size() == 0 {
			return fmt.Errorf("graph input %q has unsupported dtype %v", in.Name, in.DType)
		}
	}
	for _, in := range g.Initializers {
		if err := define(in.Name, "initializer"); err != nil {
			return err
		}
		if err := in.Tensor.Check(); err != nil {
			return fmt.Errorf("initializer %q: %w", in.Name, err)
		}
	}
	for i, n := range g.Nodes {
		where := fmt.Sprintf("node %d (%s %q)", i, n.Op, n.Name)
		def, ok := LookupNodeOp(n)
		if !ok {
			return fmt.Errorf("%s: unknown op type %q", where, OpKey(n.Domain, n.Op))
		}
		if err := def.checkNode(n); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		// A contrib op's versions are its own domain's, not ai.onnx's.
		if g.Opset > 0 && def.Domain == "" && (g.Opset < def.SinceVersion || g.Opset > def.ThroughVersion) {
			return fmt.Errorf("%s: the IR's %s follows ai.onnx opsets %d to %d, but the graph declares opset %d", where, n.Op, def.SinceVersion, def.ThroughVersion, g.Opset)
		}
		for _, in := range n.Inputs {
			if in == "" {
				continue
			}
			if _, ok := defined[in]; !ok {
				return fmt.Errorf("%s: input %q is not defined before use (missing initializer or nodes out of order)", where, in)
			}
		}
		for j, out := range n.Outputs {
			if out == "" {
				if j == 0 {
					return fmt.Errorf("%s: first output has an empty name", where)
				}
				continue
			}
			if err := define(out, where); err != nil {
				return err
			}
		}
	}
	if len(g.Outputs) == 0 {
		return errors.New("graph has no outputs")
	}
	for _, out := range g.Outputs {
		if _, ok := defined[out.Name]; !ok {
			return fmt.Errorf("graph output %q is not produced by any node", out.Name)
		}
	}
	return nil
}

func arity(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("at least %d", lo)
	case lo == hi:
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// TopoSort reorders Nodes so that each node follows the producers of its inputs. It returns an
// error naming a node on a cycle, or a node whose input nothing produces.
func (g *Graph) TopoSort() error {
	available := map[string]bool{"": true}
	for _, in := range g.Inputs {
		available[in.Name] = true
	}
	for _, in := range g.Initializers {
		available[in.Name] = true
	}
	producer := map[string]int{}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o != "" {
				producer[o] = i
			}
		}
	}
	state := make([]uint8, len(g.Nodes)) // 0 new, 1 on stack, 2 done
	order := make([]*Node, 0, len(g.Nodes))
	type frame struct{ node, next int }
	for root := range g.Nodes {
		if state[root] != 0 {
			continue
		}
		stack := []frame{{root, 0}}
		state[root] = 1
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			n := g.Nodes[top.node]
			if top.next < len(n.Inputs) {
				in := n.Inputs[top.next]
				top.next++
				if available[in] {
					continue
				}
				p, ok := producer[in]
				if !ok {
					return fmt.Errorf("node %q (%s): input %q is not produced by any node, input or initializer", n.Name, n.Op, in)
				}
				switch state[p] {
				case 1:
					return fmt.Errorf("graph has a cycle through node %q (%s)", g.Nodes[p].Name, g.Nodes[p].Op)
				case 0:
					state[p] = 1
					stack = append(stack, frame{p, 0})
				}
				continue
			}
			state[top.node] = 2
			order = append(order, n)
			stack = stack[:len(stack)-1]
		}
	}
	g.Nodes = order
	return nil
}

// CheckWideTypes refuses a graph in which a float64 or uint64 value reaches an op that does
// not take it (OpDef.Float64, OpDef.Uint64), naming the node: backends run their own kernels,
// which compute float32 and int64, and only those ops through the reference evaluation. A
// graph with no such value anywhere (its inputs, outputs, initializers, constants and casts)
// passes without inference; otherwise the graph's types are inferred on a copy.
func (g *Graph) CheckWideTypes() error {
	if !g.mayHoldWide() {
		return nil
	}
	probe := *g
	if err := probe.InferShapes(); err != nil {
		return err
	}
	return nil
}

// mayHoldWide reports whether any value of g could be float64 or uint64.
func (g *Graph) mayHoldWide() bool {
	for _, vs := range [][]ValueInfo{g.Inputs, g.Outputs} {
		for _, v := range vs {
			if IsWide(v.DType) {
				return true
			}
		}
	}
	for _, in := range g.Initializers {
		if IsWide(in.Tensor.DType) {
			return true
		}
	}
	for _, n := range g.Nodes {
		for name, a := range n.Attrs {
			if a.Kind == AttrTensor && a.T != nil && IsWide(a.T.DType) {
				return true
			}
			if a.Kind == AttrInt && (name == "to" || name == "dtype") && IsWide(tensor.DType(a.I)) {
				return true
			}
		}
	}
	return false
}
