package autodiff

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
)

// LiftParams returns a copy of g in which each named initializer is a graph input instead (of
// the same name, dtype and fixed shape, appended after g's inputs in the order given), so that
// a trainer can compile a training graph once and feed it new weights every step. g is not
// modified. It returns an error when a name is not an initializer of g or is given twice.
func LiftParams(g *graph.Graph, names []string) (*graph.Graph, error) {
	if g == nil {
		return nil, fmt.Errorf("lift parameters: graph is nil")
	}
	lift := make(map[string]bool, len(names))
	for _, n := range names {
		if lift[n] {
			return nil, fmt.Errorf("lift parameters of graph %s: %q is given twice", g.Name, n)
		}
		lift[n] = true
	}
	out := *g
	out.Inputs = append([]graph.ValueInfo{}, g.Inputs...)
	out.Initializers = nil
	found := map[string]graph.Initializer{}
	for _, in := range g.Initializers {
		if lift[in.Name] {
			found[in.Name] = in
			continue
		}
		out.Initializers = append(out.Initializers, in)
	}
	for _, n := range names {
		in, ok := found[n]
		if !ok {
			return nil, fmt.Errorf("lift parameters of graph %s: %q is not an initializer", g.Name, n)
		}
		out.Inputs = append(out.Inputs, graph.ValueInfo{Name: n, DType: in.Tensor.DType, Shape: fixedShape(in.Tensor.Shape)})
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("lift parameters of graph %s: %w", g.Name, err)
	}
	return &out, nil
}
