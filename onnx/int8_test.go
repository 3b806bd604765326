package onnx_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/quant"
)

// TestQuantizeDynamicMatchesORTsForm checks zoo's int8 export transform (zoo/quant) against
// testdata/gen_int8.py's independent numpy re-implementation of ONNX Runtime's
// quantize_dynamic: the same float model (int8/float.onnx) quantized per tensor and per
// channel gives the same nodes and the same quantized weights, scales and zero points.
func TestQuantizeDynamicMatchesORTsForm(t *testing.T) {
	float, err := onnx.ImportFile(filepath.Join("testdata", "int8", "float.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file      string
		perTensor bool
	}{{"dyn_tensor.onnx", true}, {"dyn_channel.onnx", false}} {
		t.Run(c.file, func(t *testing.T) {
			want, err := onnx.ImportFile(filepath.Join("testdata", "int8", c.file))
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := quant.Dynamic(float, quant.Options{PerTensor: c.perTensor})
			if err != nil {
				t.Fatal(err)
			}
			if st.Layers != 2 {
				t.Errorf("%d layers rewritten, want 2", st.Layers)
			}
			if g, w := ops(got), ops(want); !slices.Equal(g, w) {
				t.Errorf("ops %v, want ONNX Runtime's %v", g, w)
			}
			for _, in := range want.Initializers {
				g := got.Initializer(in.Name)
				if g == nil {
					t.Errorf("no initializer %s", in.Name)
					continue
				}
				if g.DType != in.Tensor.DType || !slices.Equal(g.Shape, in.Tensor.Shape) || !slices.Equal(g.I64, in.Tensor.I64) || !slices.Equal(g.F32, in.Tensor.F32) {
					t.Errorf("initializer %s: %v %v differs from ONNX Runtime's form %v %v", in.Name, g.DType, g.Shape, in.Tensor.DType, in.Tensor.Shape)
				}
			}
			if len(got.Initializers) != len(want.Initializers) {
				t.Errorf("%d initializers, want %d", len(got.Initializers), len(want.Initializers))
			}
		})
	}
}

func ops(g *graph.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.Op)
	}
	return out
}
