package cpu

import (
	"context"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestFloat64Graph runs a float64 linear layer with a residual, softmax-free (the shapes the
// fusions look for), and checks that the CPU leaves it to the reference evaluation and
// computes it in float64: a value float32 cannot hold survives.
func TestFloat64Graph(t *testing.T) {
	const eps = 1.0 / (1 << 40)
	f64 := func(shape []int, v ...float64) *tensor.Tensor {
		return &tensor.Tensor{DType: tensor.Float64, Shape: shape, F64: v}
	}
	b := graph.NewBuilder("wide")
	x := b.Input("x", tensor.Float64, graph.Sym("batch"), graph.Fixed(2))
	w := b.Param("w", f64([]int{2, 2}, 1, 0, 0, 1))
	bias := b.Param("b", f64([]int{2}, eps, 0))
	y := b.Op("Add", []string{b.Op("Add", []string{b.Op("MatMul", []string{x, w}, nil), bias}, nil), x}, nil)
	b.Output("y", b.Op("Relu", []string{y}, nil), tensor.Float64)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, nofuse := range []bool{false, true} {
		p, err := Backend{}.Compile(g, backends.Options{Threads: 1, NoFusion: nofuse})
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": f64([]int{1, 2}, 0.5, -1)})
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := out["y"]
		if got.DType != tensor.Float64 || got.F64[0] != 1+eps || got.F64[1] != 0 {
			t.Errorf("NoFusion %v: y = %v %v, want float64 [1+2^-40 0]", nofuse, got.DType, got.F64)
		}
	}
}
