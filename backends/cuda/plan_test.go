//go:build cgo && linux

package cuda

import (
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestPlanConfig compiles a graph with the CUDA backend's part of the shared compile step,
// which needs no device: the shape arithmetic of a static input folds on the host, device
// ops keep their kernel and host ops run without one.
func TestPlanConfig(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(2), graph.Fixed(6))
	ids := b.Input("ids", tensor.Int64, graph.Sym("n"))
	d0 := b.Unsqueeze(b.Gather(b.Shape(x), b.Const(tensor.Scalar64(0)), 0), 0)
	target := b.Op("Concat", []string{d0, b.Add(b.ConstInts(1, 1), b.ConstInts(2, 1))}, graph.Attrs{"axis": graph.Int(0)})
	b.Output("y", b.Op("Reshape", []string{x, target}, nil), tensor.Float32)
	b.Output("m", b.Op("Equal", []string{ids, b.Const(tensor.Scalar64(0))}, nil), tensor.Bool)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compile.Compile(g, planConfig(backends.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, st := range p.Steps {
		ops = append(ops, st.Node.Op)
		if device := st.Kernel != nil; device != (st.Node.Op != "Equal") {
			t.Errorf("%s: device kernel %v", st.Node.Op, device)
		}
		if st.Node.Op == "Reshape" {
			if c := p.Consts[st.In[1]]; c == nil || !slices.Equal(c.I64, []int64{2, 3, 2}) {
				t.Errorf("folded Reshape target = %v, want [2 3 2]", c)
			}
		}
	}
	if !slices.Equal(ops, []string{"Reshape", "Identity", "Equal", "Identity"}) {
		t.Errorf("run-time steps %v, want Reshape and Equal, each with its output Identity", ops)
	}
}
