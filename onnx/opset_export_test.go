package onnx_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// compositeGraph holds LayerNormalization, Gelu and RMSNormalization nodes and one scaled
// dot-product attention block in zoo's decomposed form (q = k = v = the normalised x, a
// (B, 1, 1, n) additive mask).
func compositeGraph(t *testing.T) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("composite")
	bs, n := graph.Sym("batch"), graph.Sym("seq")
	x := b.Input("x", tensor.Float32, bs, graph.Fixed(2), n, graph.Fixed(4))
	mask := b.Input("mask", tensor.Float32, bs, graph.Fixed(1), graph.Fixed(1), n)
	w, _ := tensor.FromFloat32([]float32{1, 0.5, 2, -1}, 4)
	bias, _ := tensor.FromFloat32([]float32{0.1, 0, -0.2, 0.3}, 4)
	h := b.LayerNorm(x, b.Param("ln.weight", w), b.Param("ln.bias", bias), 1e-5)
	h = b.Op("Gelu", []string{h}, graph.Attrs{"approximate": graph.String("tanh")})
	h = b.Op("RMSNormalization", []string{h, b.Param("rms.weight", w)}, graph.Attrs{"epsilon": graph.Float(1e-6)})
	scores := b.Div(b.MatMul(h, b.Transpose(h, 0, 1, 3, 2)), b.ConstFloat(2))
	y := b.MatMul(b.Softmax(b.Add(scores, mask), -1), h)
	b.Output("y", y, tensor.Float32, bs, graph.Fixed(2), n, graph.Fixed(4))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func runCPU(t *testing.T, g *graph.Graph, in map[string]*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	be, _ := backends.Lookup("cpu")
	p, err := be.Compile(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out["y"]
}

// TestExportOpsetForms exports one graph at every opset from 13 to 23 and checks which ops
// the file holds, what its metadata says about each composite node, and that every file
// computes the same values when imported again.
func TestExportOpsetForms(t *testing.T) {
	g := compositeGraph(t)
	xs := make([]float32, 2*2*3*4)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i) * 0.7))
	}
	x, _ := tensor.FromFloat32(xs, 2, 2, 3, 4)
	mask, _ := tensor.FromFloat32([]float32{0, 0, 0, 0, 0, float32(math.Inf(-1))}, 2, 1, 1, 3)
	in := map[string]*tensor.Tensor{"x": x, "mask": mask}
	want := runCPU(t, g, in)
	for opset := onnx.MinOpset; opset <= onnx.MaxOpset; opset++ {
		data, err := onnx.Export(g, onnx.ExportOptions{Opset: opset})
		if err != nil {
			t.Fatalf("opset %d: %v", opset, err)
		}
		var m onnxpb.ModelProto
		if err := proto.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if c, err := onnx.NodeCount(data); err != nil || c != len(m.GetGraph().GetNode()) {
			t.Errorf("opset %d: NodeCount %d, %v; the file has %d nodes", opset, c, err, len(m.GetGraph().GetNode()))
		}
		ops := map[string]bool{}
		for _, n := range m.GetGraph().GetNode() {
			ops[n.GetOpType()] = true
		}
		var std []string
		dec := map[string]string{}
		for _, kv := range m.GetMetadataProps() {
			switch kv.GetKey() {
			case onnx.MetaStandard:
				_ = json.Unmarshal([]byte(kv.GetValue()), &std)
			case onnx.MetaDecomposed:
				_ = json.Unmarshal([]byte(kv.GetValue()), &dec)
			}
		}
		for op, since := range map[string]int{"LayerNormalization": 17, "Gelu": 20, "RMSNormalization": 23, "Attention": 23} {
			var node string
			for _, n := range g.Nodes {
				if n.Op == op {
					node = n.Name
				}
			}
			if op == "Attention" {
				node = "MatMul_1/Attention" // the block is named after its last MatMul
			}
			standard := slices.Contains(std, node)
			if opset >= since {
				if !ops[op] || !standard || dec[node] != "" {
					t.Errorf("opset %d: %s: in file %v, standard %v, decomposed %q; want it written as itself", opset, op, ops[op], standard, dec[node])
				}
			} else if ops[op] || standard || dec[node] != op {
				t.Errorf("opset %d: %s: in file %v, standard %v, decomposed %q; want it written out as basic ops", opset, op, ops[op], standard, dec[node])
			}
		}
		back, err := onnx.Import(data)
		if err != nil {
			t.Fatalf("opset %d: import: %v", opset, err)
		}
		got := runCPU(t, back, in)
		for i := range want.F32 {
			if d := math.Abs(float64(got.F32[i] - want.F32[i])); d > 1e-5 || math.IsNaN(float64(got.F32[i])) != math.IsNaN(float64(want.F32[i])) {
				t.Fatalf("opset %d: element %d is %v, want %v", opset, i, got.F32[i], want.F32[i])
			}
		}
		if _, ok := back.Meta[onnx.MetaStandard]; ok {
			t.Errorf("opset %d: Import keeps %s in Graph.Meta", opset, onnx.MetaStandard)
		}
	}
}
