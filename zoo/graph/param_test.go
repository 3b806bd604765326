package graph

import (
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestIsParam: what ParamCount counts. A quantized file's int8 and uint8 weights (and their
// zero points) are parameters as float ones are; int64 shape vectors, buffers, builder
// constants and scalars are not.
func TestIsParam(t *testing.T) {
	mat := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		x, err := tensor.New(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, c := range []struct {
		in   Initializer
		want bool
	}{
		{Initializer{Name: "w", Tensor: mat(tensor.Float32, 4, 3)}, true},
		{Initializer{Name: "w_quantized", Tensor: mat(tensor.Int8, 4, 3)}, true},
		{Initializer{Name: "w_zero_point", Tensor: mat(tensor.Uint8, 3)}, true},
		{Initializer{Name: "shape", Tensor: mat(tensor.Int64, 2)}, false},
		{Initializer{Name: "pe", Tensor: mat(tensor.Float32, 5, 3), Buffer: true}, false},
		{Initializer{Name: constPrefix + "0", Tensor: mat(tensor.Float32, 3)}, false},
		{Initializer{Name: "eps", Tensor: mat(tensor.Float32)}, false},
		{Initializer{Name: "mask", Tensor: mat(tensor.Bool, 3)}, false},
	} {
		if got := c.in.IsParam(); got != c.want {
			t.Errorf("%s (%v %v, buffer %v): IsParam = %v, want %v", c.in.Name, c.in.Tensor.DType, c.in.Tensor.Shape, c.in.Buffer, got, c.want)
		}
	}
	g := &Graph{Initializers: []Initializer{
		{Name: "w_quantized", Tensor: mat(tensor.Int8, 4, 3)},
		{Name: "w_scale", Tensor: mat(tensor.Float32, 3)},
		{Name: "shape", Tensor: mat(tensor.Int64, 2)},
	}}
	if n := g.ParamCount(); n != 15 {
		t.Errorf("ParamCount = %d, want 15 (12 int8 weights, 3 scales)", n)
	}
}
