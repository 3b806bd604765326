package cpu

import (
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestFuseOrNotKeepsProgramOnPanic checks the safety net around the fusion passes: when a
// pass panics after an earlier one changed the steps, the program gets its unfused steps
// back and reports no fusions.
func TestFuseOrNotKeepsProgramOnPanic(t *testing.T) {
	b := graph.NewBuilder("shape")
	x := b.Input("x", tensor.Float32, graph.Sym("a"), graph.Sym("b"))
	b.Output("s", b.Shape(b.Transpose(x, 1, 0)), tensor.Int64)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProgram(g, backends.Options{NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	ops := func() (s []string) {
		for _, st := range p.plan.Steps {
			s = append(s, st.Node.Op)
		}
		return s
	}
	want := append(ops(), "Identity")
	// The first pass drops the Transpose (only Shape reads it); the next one indexes its
	// tables by this step's output slot, which does not exist, and panics.
	p.plan.Steps = append(p.plan.Steps, step{Node: &graph.Node{Op: "Identity"}, Out: []int{len(p.plan.Slots) + 7}})
	p.fuseOrNot()
	if got := ops(); len(got) != len(want) || got[0] != want[0] || len(p.Fusions()) != 0 {
		t.Fatalf("after a panicking pass: steps %v, fusions %v; want steps %v and no fusions", got, p.Fusions(), want)
	}
}
