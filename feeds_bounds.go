package zoo

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
)

// findSlicedTables finds a position table that the graph slices to the sequence length
// instead of indexing it with a Gather: PyTorch's classic sinusoidal encoding, x + pe[:n],
// exports as Shape → Slice → Slice of a (max_len, d) (or (1, max_len, d)) initializer. Such a
// table bounds the length as a Gather's does: a longer input cannot be added to it. A Slice
// of a constant counts when, run at two lengths (the shapes alone, graph.ConcreteShapes), its
// output's size along one axis is that length; the table's size on that axis is then the
// bound, and the smallest such bound is the model's, if below what the Gathers gave.
func (p *FeedPlan) findSlicedTables(g *graph.Graph) {
	if p.Seq > 0 {
		return // the inputs fix the length
	}
	consts := map[string][]int{}
	for _, in := range g.Initializers {
		consts[in.Name] = in.Tensor.Shape
	}
	for _, n := range g.Nodes {
		if n.Op == "Constant" && len(n.Outputs) == 1 {
			if a, ok := n.Attrs["value"]; ok && a.T != nil {
				consts[n.Outputs[0]] = a.T.Shape
			}
		}
	}
	var slices []*graph.Node
	for _, n := range g.Nodes {
		if n.Op == "Slice" && len(n.Inputs) >= 3 && consts[n.Input(0)] != nil {
			slices = append(slices, n)
		}
	}
	if len(slices) == 0 {
		return
	}
	// Two lengths no real dimension is likely to equal both of.
	const l1, l2 = 5, 7
	probe := func(l int) map[string][]int {
		in := map[string][]int{}
		for _, f := range p.Feeds {
			in[f.Name] = []int{1, l}
		}
		shapes, err := g.ConcreteShapes(in)
		if err != nil {
			return nil
		}
		return shapes
	}
	s1, s2 := probe(l1), probe(l2)
	if s1 == nil || s2 == nil {
		return
	}
	bound, from := 0, ""
	for _, n := range slices {
		table := consts[n.Input(0)]
		o1, o2 := s1[n.Outputs[0]], s2[n.Outputs[0]]
		if len(o1) != len(table) || len(o2) != len(table) {
			continue
		}
		for ax, d := range table {
			if o1[ax] == l1 && o2[ax] == l2 && d >= l2 && (bound == 0 || d < bound) {
				bound, from = d, n.Input(0)
			}
		}
	}
	if bound > 0 && (p.MaxLen == 0 || bound < p.MaxLen) {
		p.MaxLen, p.MaxLenFrom = bound, from
	}
}

// Limit returns the most tokens a model fed as p says takes, and why: its inputs' static
// length, else maxLen when > 0 (a variant's or zoo file's max_len: "max_len"), else the length
// its graph bounds (MaxLenWhy), whichever is shortest; 0 and "" when nothing bounds it.
func (p *FeedPlan) Limit(maxLen int) (int, string) {
	limit, why := maxLen, "max_len"
	if limit == 0 && p.MaxLen > 0 {
		limit, why = p.MaxLen, p.MaxLenWhy()
	}
	if p.Seq > 0 && (limit == 0 || p.Seq < limit) {
		limit, why = p.Seq, "the static length of its inputs"
	}
	if limit == 0 {
		why = ""
	}
	return limit, why
}

// MaxLenWhy says where MaxLen comes from: "the rows of its position table NAME", or where
// the graph's shapes fail beyond it.
func (p *FeedPlan) MaxLenWhy() string {
	if p.MaxLenNode != "" {
		return p.MaxLenNode
	}
	return "the rows of its position table " + p.MaxLenFrom
}

// findShapeBound finds a length bound that no table shows: the graph's shapes alone
// (graph.ConcreteShapes) fail beyond some length, as when a mask or bias of a fixed size is
// added to (n, n) scores, or a tensor is expanded to a fixed shape. When they hold at a few
// tokens but not at the default window (or the bound found so far), the largest length they
// hold at is the bound, and MaxLenNode names the node that fails one token later; a longer
// text is then windowed, never run into that node's shape error.
func (p *FeedPlan) findShapeBound(g *graph.Graph) {
	if p.Seq > 0 {
		return
	}
	fails := func(l int) error {
		in := map[string][]int{}
		for _, f := range p.Feeds {
			in[f.Name] = []int{1, l}
		}
		_, err := g.ConcreteShapes(in)
		return err
	}
	hi := 512
	if p.MaxLen > 0 {
		hi = p.MaxLen
	}
	if fails(hi) == nil || fails(1) != nil {
		return // holds at the window, or fails at any length (not a length bound)
	}
	lo := 1 // holds at lo, fails at hi
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fails(mid) == nil {
			lo = mid
		} else {
			hi = mid
		}
	}
	p.MaxLen, p.MaxLenFrom = lo, ""
	p.MaxLenNode = fmt.Sprintf("its shapes fail beyond %d tokens: %v", lo, fails(lo+1))
}
