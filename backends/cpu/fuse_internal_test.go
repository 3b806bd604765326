package cpu

import (
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestFuseOrNotKeepsProgramOnPanic checks the safety net around the fusion passes: when a
// pass panics, the program keeps its unfused steps and reports no fusions.
func TestFuseOrNotKeepsProgramOnPanic(t *testing.T) {
	b := graph.NewBuilder("mm")
	x := b.Input("x", tensor.Float32, graph.Sym("m"), graph.Fixed(4))
	w, _ := tensor.FromFloat32(make([]float32, 12), 4, 3)
	bias, _ := tensor.FromFloat32(make([]float32, 3), 3)
	b.Output("y", b.Add(b.MatMul(x, b.Const(w)), b.Const(bias)), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compile(g, backends.Options{NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	// A step with no node makes the first pass dereference nil.
	p.steps = append(p.steps, step{})
	want := len(p.steps)
	p.fuseOrNot()
	if len(p.steps) != want || p.steps[0].node.Op != "MatMul" || len(p.Fusions()) != 0 {
		t.Fatalf("after a panicking pass: %d steps (want %d), first %v, fusions %v", len(p.steps), want, p.steps[0].node, p.Fusions())
	}
	// Without the bogus step the same program fuses.
	p.steps = p.steps[:want-1]
	p.fuseOrNot()
	if p.Fusions()["linear"] != 1 {
		t.Fatalf("fusions %v, want one linear", p.Fusions())
	}
}
