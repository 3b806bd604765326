package graph

import (
	"errors"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestLoadStateDict(t *testing.T) {
	f32 := func(shape ...int) *tensor.Tensor {
		x, _ := tensor.New(tensor.Float32, shape...)
		return x
	}
	i64, _ := tensor.New(tensor.Int64, 2)
	mk := func() *Graph {
		return &Graph{Initializers: []Initializer{
			{Name: "a.weight", Tensor: f32(2, 3)}, {Name: "pe", Tensor: f32(4), Buffer: true},
			{Name: "const::shape", Tensor: i64},
		}}
	}
	for _, tc := range []struct {
		name string
		sd   map[string]*tensor.Tensor
		want string // "" = loads
	}{
		{"exact", map[string]*tensor.Tensor{"a.weight": f32(2, 3), "pe": f32(4)}, ""},
		{"missing buffer", map[string]*tensor.Tensor{"a.weight": f32(2, 3)}, "missing tensor pe"},
		{"unexpected", map[string]*tensor.Tensor{"a.weight": f32(2, 3), "pe": f32(4), "b": f32(1), "c": f32(1)}, "unexpected tensor b (and 1 more)"},
		{"constants are not state", map[string]*tensor.Tensor{"a.weight": f32(2, 3), "pe": f32(4), "const::shape": i64}, "unexpected tensor const::shape"},
		{"shape", map[string]*tensor.Tensor{"a.weight": f32(3, 2), "pe": f32(4)}, "misshaped tensor a.weight is float32 (3, 2), the model's is float32 (2, 3)"},
		{"dtype", map[string]*tensor.Tensor{"a.weight": f32(2, 3), "pe": i64}, "misshaped tensor pe is int64 (2), the model's is float32 (4)"},
		{"nil", map[string]*tensor.Tensor{"a.weight": nil, "pe": f32(4)}, "misshaped tensor a.weight is not a valid tensor"},
		{"all three", map[string]*tensor.Tensor{"pe": f32(5), "z": f32(1)}, "missing tensor a.weight; unexpected tensor z; misshaped tensor pe is float32 (5), the model's is float32 (4)"},
	} {
		g := mk()
		before := g.Initializers[0].Tensor
		err := LoadStateDict(g, tc.sd)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if g.Initializer("a.weight") != tc.sd["a.weight"] || g.Initializer("pe") != tc.sd["pe"] {
				t.Errorf("%s: the graph does not hold the loaded tensors", tc.name)
			}
			continue
		}
		var se *StateDictError
		if err == nil || !errors.As(err, &se) || err.Error() != tc.want {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
		if g.Initializers[0].Tensor != before {
			t.Errorf("%s: a refused load changed the graph", tc.name)
		}
	}
}
