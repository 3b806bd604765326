package onnx

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// testGraph builds a small attention-like graph that exercises every attribute kind, every
// dtype, symbolic and fixed dims, buffers, builder constants and Constant nodes.
func testGraph(t testing.TB) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("test")
	b.SetMeta("variant", "vanilla")
	b.SetMeta("config", `{"d_model":8}`)
	tokens := b.Input("tokens", tensor.Int64, graph.Sym("batch"), graph.Sym("seq"))
	mask := b.Input("key_padding_mask", tensor.Bool, graph.Sym("batch"), graph.Sym("seq"))
	w := make([]float32, 16*8)
	for i := range w {
		w[i] = float32(math.Sin(float64(i))) * 0.1
	}
	w[3] = float32(math.Copysign(0, -1)) // -0 must survive bit for bit
	w[5] = math.Float32frombits(0x7fc00001)
	emb, _ := tensor.FromFloat32(w, 16, 8)
	e := b.Param("embedding.weight", emb)
	pe, _ := tensor.FromFloat32(make([]float32, 64*8), 64, 8)
	b.Buffer("pe", pe)
	x := b.Gather(e, tokens, 0)
	lnw, _ := tensor.FromFloat32([]float32{1, 1, 1, 1, 1, 1, 1, 1}, 8)
	lnb, _ := tensor.New(tensor.Float32, 8)
	y := b.LayerNorm(x, b.Param("norm.weight", lnw), b.Param("norm.bias", lnb), 1e-5)
	y = b.Softmax(y, -1)
	y = b.Transpose(y, 1, 0, 2)
	y = b.Transpose(y, 1, 0, 2)
	bt, _ := tensor.FromBool([]bool{true, false, true}, 3)
	c1 := b.Op("Constant", nil, graph.Attrs{"value": graph.TensorAttr(bt)})
	c2 := b.Op("Constant", nil, graph.Attrs{"value": graph.TensorAttr(tensor.ScalarF(2.5))})
	empty, _ := tensor.New(tensor.Int64, 0)
	c3 := b.Op("Constant", nil, graph.Attrs{"value": graph.TensorAttr(empty)})
	i32 := &tensor.Tensor{DType: tensor.Int32, Shape: []int{2}, I64: []int64{-7, 1 << 30}}
	c4 := b.Op("Constant", nil, graph.Attrs{"value": graph.TensorAttr(i32)})
	_, _, _ = c1, c3, c4
	y = b.Mul(y, c2)
	y = b.Mul(y, y) // the same input twice
	m := b.Unsqueeze(mask, 2)
	y = b.Where(m, b.ConstFloat(0), y)
	y = b.Op("Identity", []string{y}, graph.Attrs{
		"f": graph.Float(0.25), "s": graph.String("x"), "fs": graph.Floats(1, 2), "is": graph.Ints(3, -4), "i": graph.Int(0),
	})
	b.Output("hidden", y, tensor.Float32, graph.Sym("batch"), graph.Sym("seq"), graph.Fixed(8))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	g.ValueInfo = map[string]graph.ValueInfo{y: {Name: y, DType: tensor.Float32, Shape: graph.Shape{graph.Sym("batch"), {Size: -1}, graph.Fixed(8)}}}
	return g
}

// diffGraphs returns a description of the first difference, or "".
func diffGraphs(a, b *graph.Graph) string {
	if a.Name != b.Name || a.Opset != b.Opset {
		return fmt.Sprintf("name/opset %q/%d vs %q/%d", a.Name, a.Opset, b.Name, b.Opset)
	}
	if !reflect.DeepEqual(a.Inputs, b.Inputs) {
		return fmt.Sprintf("inputs %v vs %v", a.Inputs, b.Inputs)
	}
	if !reflect.DeepEqual(a.Outputs, b.Outputs) {
		return fmt.Sprintf("outputs %v vs %v", a.Outputs, b.Outputs)
	}
	if len(a.Meta)+len(b.Meta) > 0 && !reflect.DeepEqual(a.Meta, b.Meta) {
		return fmt.Sprintf("meta %v vs %v", a.Meta, b.Meta)
	}
	if len(a.ValueInfo)+len(b.ValueInfo) > 0 && !reflect.DeepEqual(a.ValueInfo, b.ValueInfo) {
		return fmt.Sprintf("value info %v vs %v", a.ValueInfo, b.ValueInfo)
	}
	if len(a.Initializers) != len(b.Initializers) {
		return fmt.Sprintf("%d vs %d initializers", len(a.Initializers), len(b.Initializers))
	}
	for i := range a.Initializers {
		x, y := a.Initializers[i], b.Initializers[i]
		if x.Name != y.Name || x.Buffer != y.Buffer || !tensor.Equal(x.Tensor, y.Tensor) {
			return fmt.Sprintf("initializer %d: %q buffer=%v vs %q buffer=%v (or data differs)", i, x.Name, x.Buffer, y.Name, y.Buffer)
		}
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Sprintf("%d vs %d nodes", len(a.Nodes), len(b.Nodes))
	}
	for i := range a.Nodes {
		x, y := a.Nodes[i], b.Nodes[i]
		if x.Name != y.Name || x.Op != y.Op || x.Domain != y.Domain || !reflect.DeepEqual(x.Inputs, y.Inputs) || !reflect.DeepEqual(x.Outputs, y.Outputs) || len(x.Attrs) != len(y.Attrs) {
			return fmt.Sprintf("node %d: %+v vs %+v", i, *x, *y)
		}
		for k, xa := range x.Attrs {
			ya, ok := y.Attrs[k]
			if !ok {
				return fmt.Sprintf("node %d: attribute %q missing", i, k)
			}
			if xa.Kind == graph.AttrTensor {
				if ya.Kind != graph.AttrTensor || !tensor.Equal(xa.T, ya.T) {
					return fmt.Sprintf("node %d: tensor attribute %q: %+v vs %+v", i, k, xa.T, ya.T)
				}
				continue
			}
			if !reflect.DeepEqual(xa, ya) {
				return fmt.Sprintf("node %d: attribute %q: %+v vs %+v", i, k, xa, ya)
			}
		}
	}
	return ""
}

func TestRoundTrip(t *testing.T) {
	g := testGraph(t)
	data, err := Export(g, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Export(testGraph(t), ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Fatal("Export is not deterministic")
	}
	back, err := Import(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffGraphs(g, back); d != "" {
		t.Fatalf("round trip differs: %s", d)
	}
	// And the re-export is byte-identical.
	data2, err := Export(back, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, data2) {
		t.Fatal("export(import(export(g))) differs from export(g)")
	}
}

func TestExportModelFields(t *testing.T) {
	data, err := Export(testGraph(t), ExportOptions{ProducerVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.IrVersion != 8 || m.ProducerName != "zoo" || m.ProducerVersion != "1.2.3" {
		t.Errorf("ir %d producer %q %q", m.IrVersion, m.ProducerName, m.ProducerVersion)
	}
	if len(m.OpsetImport) != 1 || m.OpsetImport[0].Domain != "" || m.OpsetImport[0].Version != 17 {
		t.Errorf("opset import %v", m.OpsetImport)
	}
	in := m.Graph.Input[0].Type.GetTensorType()
	if in.ElemType != int32(onnxpb.TensorProto_INT64) || in.Shape.Dim[0].GetDimParam() != "batch" || in.Shape.Dim[1].GetDimParam() != "seq" {
		t.Errorf("tokens input type %v", in)
	}
	out := m.Graph.Output[0].Type.GetTensorType()
	if out.Shape.Dim[2].GetDimValue() != 8 {
		t.Errorf("hidden output type %v", out)
	}
	for _, init := range m.Graph.Initializer {
		if len(init.RawData) == 0 && len(init.Dims) > 0 && init.Dims[0] > 0 {
			t.Errorf("initializer %s has no raw_data", init.Name)
		}
	}
	if m.Graph.Initializer[0].Name != "embedding.weight" || len(m.Graph.Initializer[0].RawData) != 16*8*4 {
		t.Errorf("first initializer %s, %d bytes", m.Graph.Initializer[0].Name, len(m.Graph.Initializer[0].RawData))
	}
	var keys []string
	for _, kv := range m.MetadataProps {
		keys = append(keys, kv.Key+"="+kv.Value)
	}
	if got := strings.Join(keys, ";"); got != `config={"d_model":8};variant=vanilla;zoo.onnx.standard=["LayerNormalization"];zoo.buffers=["pe"]` {
		t.Errorf("metadata %s", got)
	}
}

func TestExportErrors(t *testing.T) {
	g := testGraph(t)
	for _, tc := range []struct {
		opset int
		want  string
	}{
		{12, "opset 12 is not supported"},
		{24, "opset 24 is not supported"},
	} {
		if _, err := Export(g, ExportOptions{Opset: tc.opset}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("opset %d: err %v, want %q", tc.opset, err, tc.want)
		}
	}
	ab := graph.NewBuilder("attention")
	q := ab.Input("q", tensor.Float32, graph.Fixed(1), graph.Fixed(1), graph.Fixed(2), graph.Fixed(2))
	ab.Output("y", ab.Op("Attention", []string{q, q, q}, nil), tensor.Float32)
	ag, err := ab.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Export(ag, ExportOptions{Opset: 22}); err == nil || !strings.Contains(err.Error(), "Attention needs opset 23") {
		t.Errorf("Attention at opset 22: %v", err)
	}
	bad := testGraph(t)
	bad.Nodes = bad.Nodes[1:]
	if _, err := Export(bad, ExportOptions{}); err == nil || !strings.Contains(err.Error(), "invalid") {
		t.Errorf("invalid graph: %v", err)
	}
	if _, err := Export(nil, ExportOptions{}); err == nil {
		t.Error("nil graph exported")
	}
	res := testGraph(t)
	res.Meta[BuffersKey] = "x"
	if _, err := Export(res, ExportOptions{}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("reserved key: %v", err)
	}
}

// mutate exports the test graph, applies f to the ModelProto and re-marshals it.
func mutate(t *testing.T, f func(m *onnxpb.ModelProto)) []byte {
	t.Helper()
	data, err := Export(testGraph(t), ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	f(&m)
	out, err := proto.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func findNode(m *onnxpb.ModelProto, op string) *onnxpb.NodeProto {
	for _, n := range m.Graph.Node {
		if n.OpType == op {
			return n
		}
	}
	return nil
}

func TestImportErrors(t *testing.T) {
	good, err := Export(testGraph(t), ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "file is empty"},
		{"garbage", []byte("this is not an onnx file at all, just text"), "not"},
		{"truncated", good[:len(good)/2], "truncated"},
		{"opset 6", mutate(t, func(m *onnxpb.ModelProto) { m.OpsetImport[0].Version = 6 }), "at opset 6: LayerNormalization is not read before opset 7"},
		{"opset 24", mutate(t, func(m *onnxpb.ModelProto) { m.OpsetImport[0].Version = 24 }), "opset 24 is not supported"},
		{"no opset", mutate(t, func(m *onnxpb.ModelProto) { m.OpsetImport[0].Domain = "com.example" }), "no ai.onnx opset"},
		{"ir 11", mutate(t, func(m *onnxpb.ModelProto) { m.IrVersion = 11 }), "IR version 11"},
		{"domain", mutate(t, func(m *onnxpb.ModelProto) { findNode(m, "Softmax").Domain = "com.microsoft" }), `zoo cannot run: com.microsoft.Softmax (1 node 2 "Softmax")`},
		{"unknown op", mutate(t, func(m *onnxpb.ModelProto) { findNode(m, "Softmax").OpType = "FancyAttention" }), `uses an op that zoo cannot run: FancyAttention (1 node 2 "Softmax")`},
		{"every unknown op", mutate(t, func(m *onnxpb.ModelProto) {
			findNode(m, "Softmax").OpType = "FancyAttention"
			for _, n := range m.Graph.Node[:2] {
				n.OpType, n.Domain = "FusedMatMul", "com.microsoft"
			}
		}), `uses 2 ops that zoo cannot run: com.microsoft.FusedMatMul (2 nodes, first 0 `},
		{"external data", mutate(t, func(m *onnxpb.ModelProto) {
			m.Graph.Initializer[0].DataLocation = onnxpb.TensorProto_EXTERNAL
			m.Graph.Initializer[0].ExternalData = []*onnxpb.StringStringEntryProto{{Key: "location", Value: "weights.bin"}}
		}), `initializer "embedding.weight": data is stored in an external file ("weights.bin")`},
		{"missing initializer", mutate(t, func(m *onnxpb.ModelProto) { m.Graph.Initializer = m.Graph.Initializer[1:] }), `input "embedding.weight" is not produced`},
		{"huge dims", mutate(t, func(m *onnxpb.ModelProto) { m.Graph.Initializer[0].Dims = []int64{1 << 40, 1 << 40} }), "exceed 2^31 elements"},
		{"dims vs bytes", mutate(t, func(m *onnxpb.ModelProto) { m.Graph.Initializer[0].Dims = []int64{1 << 20, 8} }), "raw_data holds 512 bytes"},
		{"negative dim", mutate(t, func(m *onnxpb.ModelProto) { m.Graph.Initializer[0].Dims = []int64{-1, 8} }), "negative dimension"},
		{"complex64", mutate(t, func(m *onnxpb.ModelProto) { m.Graph.Initializer[0].DataType = int32(onnxpb.TensorProto_COMPLEX64) }), "element type complex64 is not supported"},
		{"fp16 size", mutate(t, func(m *onnxpb.ModelProto) { m.Graph.Initializer[0].DataType = int32(onnxpb.TensorProto_FLOAT16) }), "float16 elements"},
		{"constant size", mutate(t, func(m *onnxpb.ModelProto) { findNode(m, "Constant").Attribute[0].T.Dims = []int64{1000} }), `tensor attribute "value": declares 1000 bool elements`},
		{"graph attr", mutate(t, func(m *onnxpb.ModelProto) {
			findNode(m, "Softmax").Attribute = append(findNode(m, "Softmax").Attribute, &onnxpb.AttributeProto{Name: "body", Type: onnxpb.AttributeProto_GRAPH, G: &onnxpb.GraphProto{}})
		}), `attribute "body" has kind GRAPH`},
		{"cycle", mutate(t, func(m *onnxpb.ModelProto) {
			sm := findNode(m, "Softmax")
			tr := findNode(m, "Transpose")
			sm.Input[0] = tr.Output[0]
		}), "cycle"},
		{"duplicate output", mutate(t, func(m *onnxpb.ModelProto) {
			findNode(m, "Transpose").Output[0] = findNode(m, "Softmax").Output[0]
		}), "defined twice"},
		{"no nodes", mutate(t, func(m *onnxpb.ModelProto) { m.Graph.Node = nil }), "no nodes"},
		{"sequence input", mutate(t, func(m *onnxpb.ModelProto) {
			m.Graph.Input[0].Type = &onnxpb.TypeProto{Value: &onnxpb.TypeProto_SequenceType{SequenceType: &onnxpb.TypeProto_Sequence{}}}
		}), `graph input "tokens": is not a tensor`},
		{"cast to string", mutate(t, func(m *onnxpb.ModelProto) {
			n := findNode(m, "Identity")
			n.OpType = "Cast"
			n.Attribute = []*onnxpb.AttributeProto{{Name: "to", Type: onnxpb.AttributeProto_INT, I: 8}}
		}), "element type string is not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Import(tc.data)
			if err == nil {
				t.Fatalf("imported: %v", g.OpTypes())
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "import onnx: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}

func TestImportConstantForms(t *testing.T) {
	data := mutate(t, func(m *onnxpb.ModelProto) {
		var extra []*onnxpb.NodeProto
		for i, a := range []*onnxpb.AttributeProto{
			{Name: "value_float", Type: onnxpb.AttributeProto_FLOAT, F: 1.5},
			{Name: "value_int", Type: onnxpb.AttributeProto_INT, I: 7},
			{Name: "value_floats", Type: onnxpb.AttributeProto_FLOATS, Floats: []float32{1, 2}},
			{Name: "value_ints", Type: onnxpb.AttributeProto_INTS, Ints: []int64{3, 4, 5}},
		} {
			extra = append(extra, &onnxpb.NodeProto{Name: fmt.Sprint("c", i), OpType: "Constant", Output: []string{fmt.Sprint("cv", i)}, Attribute: []*onnxpb.AttributeProto{a}})
		}
		m.Graph.Node = append(extra, m.Graph.Node...)
	})
	g, err := Import(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*tensor.Tensor{
		"c0": tensor.ScalarF(1.5), "c1": tensor.Scalar64(7),
		"c2": {DType: tensor.Float32, Shape: []int{2}, F32: []float32{1, 2}},
		"c3": {DType: tensor.Int64, Shape: []int{3}, I64: []int64{3, 4, 5}},
	}
	for _, n := range g.Nodes {
		if w, ok := want[n.Name]; ok {
			if a := n.Attrs["value"]; a.Kind != graph.AttrTensor || !tensor.Equal(a.T, w) {
				t.Errorf("%s: value %+v, want %+v", n.Name, a.T, w)
			}
			delete(want, n.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("constants not found: %v", want)
	}
}

// TestImportSortsNodes checks that a file whose nodes are out of order imports sorted.
func TestImportSortsNodes(t *testing.T) {
	data := mutate(t, func(m *onnxpb.ModelProto) {
		n := m.Graph.Node
		for i, j := 0, len(n)-1; i < j; i, j = i+1, j-1 {
			n[i], n[j] = n[j], n[i]
		}
	})
	g, err := Import(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
}
