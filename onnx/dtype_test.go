package onnx_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// valueInfo declares a tensor value of ONNX element type dt and fixed dims.
func valueInfo(name string, dt onnxpb.TensorProto_DataType, dims ...int64) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: int32(dt), Shape: shape}}}}
}

// oneNodeModel is a model at opset 17 holding the given nodes.
func modelOf(t *testing.T, nodes []*onnxpb.NodeProto, ins, outs []*onnxpb.ValueInfoProto) []byte {
	t.Helper()
	m := &onnxpb.ModelProto{IrVersion: 8, OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: 17}},
		Graph: &onnxpb.GraphProto{Name: "g", Node: nodes, Input: ins, Output: outs}}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func castNode(in, out string, to onnxpb.TensorProto_DataType) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: "Cast", Input: []string{in}, Output: []string{out},
		Attribute: []*onnxpb.AttributeProto{{Name: "to", Type: onnxpb.AttributeProto_INT, I: int64(to)}}}
}

// TestHalfCastsRound checks that a file's Casts to float16 and bfloat16 round (to nearest,
// ties to even, as ONNX Runtime does) though the graph computes in float32, and that 16-bit
// graph inputs and outputs keep their types.
func TestHalfCastsRound(t *testing.T) {
	x := []float32{0.48033667, 0.47892547, 1.00390625, -3.1415927, 65519, 65520}
	bf := make([]float32, len(x))
	f16 := make([]float32, len(x))
	for i, v := range x {
		bf[i], f16[i] = tensor.RoundBFloat16(v), tensor.RoundFloat16(v)
	}
	// x (float32) → bfloat16 → float32 · 1 → y (float32); x → float16 output h; and a
	// float16 input passed through Mul into a float16 output.
	nodes := []*onnxpb.NodeProto{
		castNode("x", "xb", onnxpb.TensorProto_BFLOAT16),
		castNode("xb", "xbf", onnxpb.TensorProto_FLOAT),
		{OpType: "Mul", Input: []string{"xbf", "one"}, Output: []string{"y"}},
		castNode("x", "h", onnxpb.TensorProto_FLOAT16),
		{OpType: "Mul", Input: []string{"p", "p"}, Output: []string{"q"}},
	}
	data := modelOf(t, append([]*onnxpb.NodeProto{{OpType: "Constant", Output: []string{"one"},
		Attribute: []*onnxpb.AttributeProto{{Name: "value_float", Type: onnxpb.AttributeProto_FLOAT, F: 1}}}}, nodes...),
		[]*onnxpb.ValueInfoProto{valueInfo("x", onnxpb.TensorProto_FLOAT, 6), valueInfo("p", onnxpb.TensorProto_FLOAT16, 2)},
		[]*onnxpb.ValueInfoProto{valueInfo("y", onnxpb.TensorProto_FLOAT, 6), valueInfo("h", onnxpb.TensorProto_FLOAT16, 6), valueInfo("q", onnxpb.TensorProto_FLOAT16, 2)})
	g, err := onnx.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range g.Inputs {
		if v.Name == "p" && v.DType != tensor.Float16 {
			t.Errorf("input p is %v, want float16", v.DType)
		}
	}
	xt, _ := tensor.FromFloat32(x, 6)
	// 1.00390625² = 1.0078278 rounds to the float16 1.0078125; 300² = 90000 overflows to +Inf.
	pt := &tensor.Tensor{DType: tensor.Float16, Shape: []int{2}, F32: []float32{1.00390625, 300}}
	inputs := map[string]*tensor.Tensor{"x": xt, "p": pt}
	ref, err := g.Eval(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Run(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(tensor.Float16FromBits(0x7c00))
	for _, outs := range []struct {
		who string
		m   map[string]*tensor.Tensor
	}{{"reference", ref}, {"cpu", got}} {
		for _, c := range []struct {
			name string
			dt   tensor.DType
			want []float32
		}{{"y", tensor.Float32, bf}, {"h", tensor.Float16, f16}, {"q", tensor.Float16, []float32{1.0078125, inf}}} {
			o := outs.m[c.name]
			if o == nil || o.DType != c.dt {
				t.Fatalf("%s: output %s is %v, want %v", outs.who, c.name, o, c.dt)
			}
			for i, w := range c.want {
				if o.F32[i] != w {
					t.Errorf("%s: %s[%d] = %v, want %v", outs.who, c.name, i, o.F32[i], w)
				}
			}
		}
	}
	if bf[0] != 0.48046875 {
		t.Errorf("bfloat16(0.48033667) = %v, want 0.48046875 (ONNX Runtime's answer)", bf[0])
	}
}
