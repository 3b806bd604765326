package graph_test

import (
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Extend adds to a copy: the original keeps its nodes and initializers, constants are shared
// where equal and new ones never take a name the graph already uses.
func TestExtend(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(2))
	y := b.Mul(b.Add(x, b.ConstFloat(1)), b.ConstFloat(2))
	b.Output("y", y, tensor.Float32, graph.Fixed(2))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// An imported graph may hold constant names out of order.
	g.Initializers = append(g.Initializers, graph.Initializer{Name: "const::7", Tensor: tensor.ScalarF(9)})
	nodes, inits := len(g.Nodes), len(g.Initializers)
	e := g.Extend("more")
	one := e.ConstFloat(1)
	names := map[string]bool{}
	for i := 0; i < 10; i++ {
		names[e.ConstFloat(float32(100+i))] = true
	}
	z := e.Add(y, one)
	e.Output("z", z, tensor.Float32, graph.Fixed(2))
	ext, err := e.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes) != nodes || len(g.Initializers) != inits {
		t.Error("Extend changed the original graph")
	}
	if one != "const::0" {
		t.Errorf("the constant 1 is %s, want the existing const::0", one)
	}
	if names["const::7"] || len(names) != 10 {
		t.Errorf("new constants %v reuse a taken name", names)
	}
	if len(ext.Outputs) != 2 || ext.Initializer("const::7") == nil {
		t.Errorf("extended graph: outputs %v", ext.Outputs)
	}
}
