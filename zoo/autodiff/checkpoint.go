package autodiff

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
)

// RecomputePrefix starts the names of the nodes and values that Checkpoint adds: the
// recomputed copies of forward nodes are named RecomputePrefix + the original's name.
const RecomputePrefix = "recompute/"

// LayerSegment is the segment rule zoo's encoders need: a node named "layers.3.ffn/Add" (any
// name under the "layers.N." scope that nn's builders give a layer's nodes) belongs to segment
// "layers.3"; every other node (embedding, output head, loss) to none, so it is never
// recomputed.
func LayerSegment(node string) string {
	rest, ok := strings.CutPrefix(node, "layers.")
	if !ok {
		return ""
	}
	i := strings.IndexByte(rest, '.')
	j := strings.IndexByte(rest, '/')
	switch {
	case i > 0 && (j < 0 || i < j):
		return node[:len("layers.")+i]
	case j > 0:
		return node[:len("layers.")+j]
	}
	return ""
}

// Checkpoint trades compute for memory in a gradient graph (Gradients' result, whose first
// forward nodes are the graph it differentiated): for every segment of forward nodes (segment
// gives a node's segment from its name; "" means none), the backward nodes stop reading the
// segment's activations and read copies instead, recomputed from the segment's inputs just
// before the first backward node that needs one. A forward activation then lives only until
// its last forward use, and in the backward pass one segment's activations are alive at a
// time beside the segment boundaries (what a segment reads from outside itself: the
// checkpoints), as in torch.utils.checkpoint. The result computes exactly the same values in
// the same way (the copies are the same ops on the same inputs; dropout masks are graph
// inputs, so recomputing draws nothing new).
//
// Values that are graph outputs are not recomputed. It returns an error when forward is out
// of range or the graph fails validation; g is not modified.
func Checkpoint(g *graph.Graph, forward int, segment func(node string) string) (*graph.Graph, error) {
	if g == nil {
		return nil, errors.New("autodiff: checkpoint: graph is nil")
	}
	if forward < 0 || forward > len(g.Nodes) {
		return nil, fmt.Errorf("autodiff: checkpoint of graph %s: %d forward nodes of %d", g.Name, forward, len(g.Nodes))
	}
	isOutput := map[string]bool{}
	for _, o := range g.Outputs {
		isOutput[o.Name] = true
	}
	// The segment each forward value comes from, and its producer's index.
	segOf := map[string]string{}
	prodOf := map[string]int{}
	for i, n := range g.Nodes[:forward] {
		s := segment(n.Name)
		for _, o := range n.Outputs {
			if o != "" {
				segOf[o], prodOf[o] = s, i
			}
		}
	}
	recomputed := func(v string) bool { return segOf[v] != "" && !isOutput[v] }
	// For each segment: the first backward node that reads one of its activations.
	first := map[string]int{}
	var order []string
	for i, n := range g.Nodes[forward:] {
		for _, in := range n.Inputs {
			if !recomputed(in) {
				continue
			}
			if _, ok := first[segOf[in]]; !ok {
				first[segOf[in]] = forward + i
				order = append(order, segOf[in])
			}
		}
	}
	if len(order) == 0 {
		return g, nil
	}
	// The forward nodes of each segment that its backward readers need, found backwards from
	// what they read through producers of the same segment; copied in forward order.
	clones := map[int][]*graph.Node{} // insertion index → copies
	for _, s := range order {
		need := map[int]bool{}
		var stack []int
		mark := func(v string) {
			if recomputed(v) && segOf[v] == s {
				if p := prodOf[v]; !need[p] {
					need[p] = true
					stack = append(stack, p)
				}
			}
		}
		for _, n := range g.Nodes[forward:] {
			for _, in := range n.Inputs {
				mark(in)
			}
		}
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, in := range g.Nodes[p].Inputs {
				mark(in)
			}
		}
		at := first[s]
		for i, n := range g.Nodes[:forward] {
			if !need[i] {
				continue
			}
			c := *n
			c.Name = RecomputePrefix + n.Name
			c.Inputs = renamed(n.Inputs, func(v string) bool { return recomputed(v) && segOf[v] == s })
			c.Outputs = renamed(n.Outputs, func(v string) bool { return v != "" })
			clones[at] = append(clones[at], &c)
		}
	}
	out := *g
	out.Nodes = make([]*graph.Node, 0, len(g.Nodes)+len(clones))
	out.Nodes = append(out.Nodes, g.Nodes[:forward]...)
	for i, n := range g.Nodes[forward:] {
		out.Nodes = append(out.Nodes, clones[forward+i]...)
		c := *n
		c.Inputs = renamed(n.Inputs, recomputed)
		out.Nodes = append(out.Nodes, &c)
	}
	if g.ValueInfo != nil {
		out.ValueInfo = make(map[string]graph.ValueInfo, len(g.ValueInfo))
		for k, v := range g.ValueInfo {
			out.ValueInfo[k] = v
		}
		for _, cs := range clones {
			for _, c := range cs {
				for _, o := range c.Outputs {
					if v, ok := g.ValueInfo[strings.TrimPrefix(o, RecomputePrefix)]; ok && o != "" {
						v.Name = o
						out.ValueInfo[o] = v
					}
				}
			}
		}
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("autodiff: checkpoint of graph %s: %w", g.Name, err)
	}
	return &out, nil
}

// renamed returns names with RecomputePrefix added to those that pick says are recomputed.
func renamed(names []string, pick func(string) bool) []string {
	out := make([]string, len(names))
	for i, v := range names {
		if v != "" && pick(v) {
			v = RecomputePrefix + v
		}
		out[i] = v
	}
	return out
}
