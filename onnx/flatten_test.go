package onnx_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestFlattenNegativeAxis imports Flatten with an axis counted from the end over an input of
// symbolic dimensions (so the rank-free lowering is what runs) and checks its shapes.
func TestFlattenNegativeAxis(t *testing.T) {
	for _, c := range []struct {
		axis int64
		want []int
	}{{-1, []int{6, 4}}, {-2, []int{2, 12}}, {-3, []int{1, 24}}} {
		x := valueInfo("x", onnxpb.TensorProto_FLOAT)
		x.Type.GetTensorType().Shape = &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
			{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "a"}},
			{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "b"}},
			{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 4}},
		}}
		y := valueInfo("y", onnxpb.TensorProto_FLOAT)
		y.Type.GetTensorType().Shape = nil
		data := modelOf(t, []*onnxpb.NodeProto{{OpType: "Flatten", Input: []string{"x"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{{Name: "axis", Type: onnxpb.AttributeProto_INT, I: c.axis}}}},
			[]*onnxpb.ValueInfoProto{x}, []*onnxpb.ValueInfoProto{y})
		g, err := onnx.Import(data)
		if err != nil {
			t.Fatal(err)
		}
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := tensor.New(tensor.Float32, 2, 3, 4)
		for i := range in.F32 {
			in.F32[i] = float32(i)
		}
		out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": in})
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := out["y"]; !tensor.SameShape(got.Shape, c.want) || got.F32[23] != 23 {
			t.Errorf("Flatten axis %d of (2, 3, 4): shape %v, want %v", c.axis, got.Shape, c.want)
		}
	}
}

// TestLegacyOpsets imports files before opset 7: Concat-1 without an axis concatenates along
// axis 1 (its default then), and Add-6, which broadcast by attribute, is refused by name.
func TestLegacyOpsets(t *testing.T) {
	m := &onnxpb.ModelProto{IrVersion: 3, OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: 3}},
		Graph: &onnxpb.GraphProto{Name: "g",
			Node:   []*onnxpb.NodeProto{{OpType: "Concat", Input: []string{"a", "b"}, Output: []string{"y"}}},
			Input:  []*onnxpb.ValueInfoProto{valueInfo("a", onnxpb.TensorProto_FLOAT, 1, 2), valueInfo("b", onnxpb.TensorProto_FLOAT, 1, 1)},
			Output: []*onnxpb.ValueInfoProto{valueInfo("y", onnxpb.TensorProto_FLOAT, 1, 3)}}}
	data, _ := proto.Marshal(m)
	g, err := onnx.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, _ := tensor.FromFloat32([]float32{1, 2}, 1, 2)
	b, _ := tensor.FromFloat32([]float32{3}, 1, 1)
	out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"a": a, "b": b})
	if err != nil || !tensor.SameShape(out["y"].Shape, []int{1, 3}) || out["y"].F32[2] != 3 {
		t.Errorf("Concat-1 without axis: %v, %v; want (1, 3) along axis 1", out["y"], err)
	}
	m.OpsetImport[0].Version = 6
	m.Graph.Node[0] = &onnxpb.NodeProto{OpType: "Add", Input: []string{"a", "b"}, Output: []string{"y"},
		Attribute: []*onnxpb.AttributeProto{{Name: "broadcast", Type: onnxpb.AttributeProto_INT, I: 1}}}
	data, _ = proto.Marshal(m)
	if _, err := onnx.Import(data); err == nil || !strings.Contains(err.Error(), "Add is not read before opset 7") {
		t.Errorf("Add-6 with broadcast: %v, want a refusal naming Add", err)
	}
}
