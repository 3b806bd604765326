package onnx

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	gtensor "gorgonia.org/tensor"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Oldest and newest IR versions Import reads. Files newer than IR 8 are read as far as the IR-8
// schema goes; anything they use that zoo cannot run (new element types, functions in other
// domains) is rejected by the checks on types and domains.
const (
	minIRVersion = 3
	maxIRVersion = 10
)

// Import decodes an ONNX model into zoo's graph IR.
//
// It works in three steps. A pre-pass over the raw ModelProto (package onnxpb) reads what
// onnx-go drops (opset imports, node names and domains, symbolic dimensions, typed and bool
// tensors, metadata) and rejects what zoo cannot run, before allocating anything large. Then
// onnx-go (github.com/owulveryck/onnx-go) walks the graph: zoo receives every operator's type,
// its wiring (inputs recovered from onnx-go's weighted edges) and its decoded attributes
// (including Constant tensors) through an onnx-go Backend, and cross-checks them against the
// pre-pass. Finally the nodes are sorted topologically and the graph is validated.
//
// Nodes of older opsets are first rewritten into the forms the op table holds (opset.go); the
// graph's Opset is then the file's, or MinOpset for a file older than that.
//
// It returns a one-line error (wrapped, starting with "import onnx:") for a file that is
// empty, truncated, not ONNX or a Git LFS pointer; an ai.onnx opset outside [MinImportOpset,
// MaxOpset]; ops the IR does not know in any domain (all of them, each with its first node);
// unsupported element types or attribute kinds; external tensor data (ImportFile reads it) or
// segmented tensors; declared sizes that the bytes present do not back; missing
// initializers; duplicate definitions; and cycles.
func Import(data []byte) (*graph.Graph, error) {
	g, err := importModel(data)
	if err != nil {
		return nil, fmt.Errorf("import onnx: %w", err)
	}
	return g, nil
}

// nodeWhere names a node in errors: "node 3 (MatMul "/layers.0/MatMul")".
func nodeWhere(i int, np *onnxpb.NodeProto) string {
	return fmt.Sprintf("node %d (%s %q)", i, np.GetOpType(), np.GetName())
}

func importModel(data []byte) (*graph.Graph, error) { return importModelIn(data, "") }

// importModelIn imports data, reading external tensor data from dir (none when dir is "").
func importModelIn(data []byte, dir string) (*graph.Graph, error) {
	if len(data) == 0 {
		return nil, errors.New("file is empty")
	}
	if err := lfsPointer(data); err != nil {
		return nil, err
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a valid ONNX model (truncated or not a .onnx file?): %v", err)
	}
	gp := m.GetGraph()
	if gp == nil || m.GetIrVersion() == 0 {
		return nil, errors.New("not an ONNX model: no ir_version or graph (truncated or not a .onnx file?)")
	}
	if v := m.GetIrVersion(); v < minIRVersion || v > maxIRVersion {
		return nil, fmt.Errorf("IR version %d is not supported (zoo reads IR %d to %d)", v, minIRVersion, maxIRVersion)
	}
	opset := 0
	for _, os := range m.GetOpsetImport() {
		if os.GetDomain() == "" || os.GetDomain() == "ai.onnx" {
			opset = int(os.GetVersion())
		}
	}
	if opset == 0 {
		return nil, errors.New("model imports no ai.onnx opset")
	}
	if opset < MinImportOpset || opset > MaxOpset {
		return nil, fmt.Errorf("ai.onnx opset %d is not supported (zoo reads opsets %d to %d; re-export with opset_version=17)", opset, MinImportOpset, MaxOpset)
	}
	if err := loadExternalData(&m, dir); err != nil {
		return nil, err
	}
	if len(gp.GetSparseInitializer()) > 0 {
		return nil, fmt.Errorf("sparse initializer %q is not supported", gp.GetSparseInitializer()[0].GetValues().GetName())
	}
	if len(gp.GetNode()) == 0 {
		return nil, errors.New("graph has no nodes")
	}
	if len(gp.GetOutput()) == 0 {
		return nil, errors.New("graph has no outputs")
	}

	coerced, err := upgradeNodes(gp, opset)
	if err != nil {
		return nil, err
	}

	// After the adapters a file older than MinOpset holds opset-MinOpset forms.
	g := &graph.Graph{Name: gp.GetName(), Opset: max(opset, MinOpset), Meta: map[string]string{}}
	defined := map[string]string{}
	define := func(name, what string) error {
		if prev, ok := defined[name]; ok {
			return fmt.Errorf("value %q is defined twice (%s and %s)", name, prev, what)
		}
		defined[name] = what
		return nil
	}

	// Initializers: sizes are checked against the bytes present before allocating.
	for _, tp := range gp.GetInitializer() {
		name := tp.GetName()
		if name == "" {
			return nil, errors.New("an initializer has no name")
		}
		if err := define(name, "initializer"); err != nil {
			return nil, err
		}
		t, err := decodeTensor(tp)
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", name, err)
		}
		g.Initializers = append(g.Initializers, graph.Initializer{Name: name, Tensor: t})
	}
	isInit := func(name string) bool { return defined[name] == "initializer" }

	// Graph inputs (IR < 4 models also list initializers as inputs: those are skipped).
	for _, vi := range gp.GetInput() {
		if isInit(vi.GetName()) {
			continue
		}
		v, err := valueInfo(vi, true)
		if err != nil {
			return nil, fmt.Errorf("graph input %q: %w", vi.GetName(), err)
		}
		if err := define(v.Name, "graph input"); err != nil {
			return nil, err
		}
		g.Inputs = append(g.Inputs, v)
	}
	for _, vi := range gp.GetOutput() {
		v, err := valueInfo(vi, false)
		if err != nil {
			return nil, fmt.Errorf("graph output %q: %w", vi.GetName(), err)
		}
		g.Outputs = append(g.Outputs, v)
	}
	for _, vi := range gp.GetValueInfo() {
		if v, err := valueInfo(vi, true); err == nil && v.Name != "" {
			if g.ValueInfo == nil {
				g.ValueInfo = map[string]graph.ValueInfo{}
			}
			g.ValueInfo[v.Name] = v
		}
	}

	// Nodes: domain, op, arity, attribute kinds and tensor sizes; build the skeleton model
	// that onnx-go walks (no initializers, untyped inputs and outputs: see doc.go).
	skel := &onnxpb.GraphProto{Name: gp.GetName()}
	layouts := make([]map[string]tensorLayout, len(gp.GetNode()))
	if err := unsupportedOps(gp); err != nil {
		return nil, err
	}
	for i, np := range gp.GetNode() {
		where := nodeWhere(i, np)
		spec, ok := graph.LookupOp(graph.OpKey(np.GetDomain(), np.GetOpType()))
		if !ok {
			return nil, fmt.Errorf("%s: op %s is not supported by zoo's IR", where, np.GetOpType())
		}
		if len(np.GetOutput()) < spec.MinOut || (spec.MaxOut >= 0 && len(np.GetOutput()) > spec.MaxOut) || np.GetOutput()[0] == "" {
			return nil, fmt.Errorf("%s: has %d outputs %q, which %s does not allow", where, len(np.GetOutput()), np.GetOutput(), np.GetOpType())
		}
		for _, out := range np.GetOutput() {
			if out == "" {
				continue
			}
			if err := define(out, where); err != nil {
				return nil, err
			}
		}
		sn := &onnxpb.NodeProto{Name: np.GetName(), OpType: np.GetOpType(), Input: np.GetInput(), Output: np.GetOutput()}
		seen := map[string]bool{}
		for _, ap := range np.GetAttribute() {
			if seen[ap.GetName()] {
				return nil, fmt.Errorf("%s: attribute %q is given twice", where, ap.GetName())
			}
			seen[ap.GetName()] = true
			if ap.GetRefAttrName() != "" {
				return nil, fmt.Errorf("%s: attribute %q refers to a function attribute, which zoo does not support", where, ap.GetName())
			}
			switch ap.GetType() {
			case onnxpb.AttributeProto_INT, onnxpb.AttributeProto_FLOAT, onnxpb.AttributeProto_STRING,
				onnxpb.AttributeProto_INTS, onnxpb.AttributeProto_FLOATS:
				sn.Attribute = append(sn.Attribute, ap)
			case onnxpb.AttributeProto_TENSOR:
				lay, err := checkTensor(ap.GetT())
				if err != nil {
					return nil, fmt.Errorf("%s: tensor attribute %q: %w", where, ap.GetName(), err)
				}
				if layouts[i] == nil {
					layouts[i] = map[string]tensorLayout{}
				}
				layouts[i][ap.GetName()] = lay
				if lay.n == 0 || !walkable(lay.dtype) {
					continue // onnx-go cannot decode empty or 8/16-bit tensors; filled from the pre-pass
				}
				sn.Attribute = append(sn.Attribute, &onnxpb.AttributeProto{Name: ap.GetName(), Type: ap.GetType(), T: walkableTensor(ap.GetT(), lay)})
			default:
				return nil, fmt.Errorf("%s: attribute %q has kind %s, which zoo does not support", where, ap.GetName(), ap.GetType())
			}
		}
		skel.Node = append(skel.Node, sn)
	}
	for _, vi := range gp.GetInput() {
		skel.Input = append(skel.Input, &onnxpb.ValueInfoProto{Name: vi.GetName()})
	}
	for _, vi := range gp.GetOutput() {
		skel.Output = append(skel.Output, &onnxpb.ValueInfoProto{Name: vi.GetName()})
	}
	skelBytes, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: m.GetIrVersion(), OpsetImport: m.GetOpsetImport(), Graph: skel})
	if err != nil {
		return nil, fmt.Errorf("re-encode graph for onnx-go: %w", err)
	}

	// The graph walk, through onnx-go.
	ops, err := walk(skelBytes)
	if err != nil {
		return nil, err
	}
	if len(ops) != len(gp.GetNode()) {
		return nil, fmt.Errorf("onnx-go reported %d operators, the model has %d nodes", len(ops), len(gp.GetNode()))
	}
	for i, np := range gp.GetNode() {
		n, err := convertNode(i, np, ops[i], layouts[i])
		if err != nil {
			return nil, err
		}
		g.Nodes = append(g.Nodes, n)
	}

	// Metadata and buffer flags.
	var buffers []string
	for _, kv := range m.GetMetadataProps() {
		if kv.GetKey() == BuffersKey {
			if err := json.Unmarshal([]byte(kv.GetValue()), &buffers); err != nil {
				return nil, fmt.Errorf("metadata %q is not a JSON list of names: %v", BuffersKey, err)
			}
			continue
		}
		if kv.GetKey() == MetaStandard || kv.GetKey() == MetaDecomposed {
			continue // written afresh by every Export
		}
		g.Meta[kv.GetKey()] = kv.GetValue()
	}
	if len(buffers) > 0 {
		isBuf := map[string]bool{}
		for _, b := range buffers {
			isBuf[b] = true
		}
		for i := range g.Initializers {
			g.Initializers[i].Buffer = isBuf[g.Initializers[i].Name]
		}
	}

	computeInFloat32(g)
	if err := g.TopoSort(); err != nil {
		return nil, fmt.Errorf("%w (missing initializer or cycle?)", err)
	}
	if err := fixCoercedSoftmax(g, coerced); err != nil {
		return nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

// walkableTensor returns tp in a form onnx-go decodes correctly: its reader takes 8 bytes per
// bool in raw_data (the spec says 1), so bool tensors are passed as int32_data.
func walkableTensor(tp *onnxpb.TensorProto, lay tensorLayout) *onnxpb.TensorProto {
	if lay.dtype != tensor.Bool || !lay.raw {
		return tp
	}
	c := &onnxpb.TensorProto{Dims: tp.GetDims(), DataType: tp.GetDataType(), Name: tp.GetName(), Int32Data: make([]int32, lay.n)}
	for i, b := range tp.GetRawData() {
		if b != 0 {
			c.Int32Data[i] = 1
		}
	}
	return c
}

// valueInfo converts a ValueInfoProto. Only tensor types are accepted; when strict, the
// element type must be one zoo computes with.
func valueInfo(vi *onnxpb.ValueInfoProto, strict bool) (graph.ValueInfo, error) {
	v := graph.ValueInfo{Name: vi.GetName()}
	if v.Name == "" {
		return v, errors.New("value has no name")
	}
	if vi.GetType() == nil {
		if strict {
			return v, errors.New("has no type")
		}
		return v, nil
	}
	tt := vi.GetType().GetTensorType()
	if tt == nil {
		return v, errors.New("is not a tensor (sequence, map and optional types are not supported)")
	}
	if tt.GetElemType() != 0 || strict {
		dt, err := supportedDType(tt.GetElemType())
		if err != nil {
			return v, err
		}
		v.DType = dt
	}
	if sh := tt.GetShape(); sh != nil {
		v.Shape = make(graph.Shape, len(sh.GetDim()))
		for i, d := range sh.GetDim() {
			switch x := d.GetValue().(type) {
			case *onnxpb.TensorShapeProto_Dimension_DimValue:
				if x.DimValue < 0 {
					return v, fmt.Errorf("dimension %d is negative (%d)", i, x.DimValue)
				}
				v.Shape[i] = graph.Fixed(x.DimValue)
			case *onnxpb.TensorShapeProto_Dimension_DimParam:
				v.Shape[i] = graph.Sym(x.DimParam)
			default:
				v.Shape[i] = graph.Dim{Size: -1}
			}
		}
	}
	return v, nil
}

// convertNode builds a graph node from the raw NodeProto (name, domain) and onnx-go's decoding
// of it (op type, wiring, attribute values), checking that the two agree.
func convertNode(i int, np *onnxpb.NodeProto, op walkedOp, layouts map[string]tensorLayout) (*graph.Node, error) {
	where := nodeWhere(i, np)
	inputs := op.inputs
	if len(np.GetInput()) == 0 && len(inputs) == 1 && inputs[0] == np.GetName()+"/input" {
		inputs = nil // onnx-go's placeholder input for input-less operators
	}
	if op.opType != np.GetOpType() || !slices.Equal(op.outputs, np.GetOutput()) || !slices.Equal(inputs, np.GetInput()) {
		return nil, fmt.Errorf("%s: onnx-go decoded it as %s %q -> %q, the model says %q -> %q",
			where, op.opType, inputs, op.outputs, np.GetInput(), np.GetOutput())
	}
	n := &graph.Node{
		Name:    np.GetName(),
		Op:      np.GetOpType(),
		Domain:  strings.TrimPrefix(np.GetDomain(), "ai.onnx"),
		Inputs:  append([]string{}, inputs...),
		Outputs: append([]string{}, op.outputs...),
	}
	for _, ap := range np.GetAttribute() {
		name := ap.GetName()
		var a graph.Attr
		if lay, ok := layouts[name]; ok && (lay.n == 0 || !walkable(lay.dtype)) {
			t, err := decodeTensor(ap.GetT())
			if err != nil {
				return nil, fmt.Errorf("%s: tensor attribute %q: %w", where, name, err)
			}
			a = graph.TensorAttr(t)
		} else {
			v, ok := op.attrs[name]
			if !ok {
				return nil, fmt.Errorf("%s: onnx-go did not report attribute %q", where, name)
			}
			var err error
			a, err = convertAttr(v, layouts[name])
			if err != nil {
				return nil, fmt.Errorf("%s: attribute %q: %w", where, name, err)
			}
		}
		if n.Attrs == nil {
			n.Attrs = graph.Attrs{}
		}
		n.Attrs[name] = a
	}
	if n.Op == "Constant" {
		if err := normalizeConstant(n); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if n.Op == "Cast" {
		if _, err := supportedDType(int32(n.Int("to", 0))); err != nil {
			return nil, fmt.Errorf("%s: cast target: %w", where, err)
		}
	}
	return n, nil
}

// convertAttr converts one attribute value as onnx-go decoded it.
func convertAttr(v interface{}, lay tensorLayout) (graph.Attr, error) {
	switch x := v.(type) {
	case int64:
		return graph.Int(x), nil
	case float32:
		return graph.Float(x), nil
	case string:
		return graph.String(x), nil
	case []int64:
		return graph.Ints(append([]int64{}, x...)...), nil
	case []float32:
		return graph.Floats(append([]float32{}, x...)...), nil
	case gtensor.Tensor:
		data, err := fromGorgonia(x)
		if err != nil {
			return graph.Attr{}, err
		}
		t := &tensor.Tensor{DType: lay.dtype, Shape: append([]int{}, lay.shape...)}
		switch d := data.(type) {
		case []float32:
			if lay.dtype == tensor.Float32 {
				t.F32 = append([]float32{}, d...)
			}
		case []int64:
			if lay.dtype == tensor.Int64 {
				t.I64 = append([]int64{}, d...)
			}
		case []int32:
			if lay.dtype == tensor.Int32 {
				t.I64 = make([]int64, len(d))
				for i, v := range d {
					t.I64[i] = int64(v)
				}
			}
		case []bool:
			if lay.dtype == tensor.Bool {
				t.Bool = append([]bool{}, d...)
			}
		}
		if err := t.Check(); err != nil {
			return graph.Attr{}, fmt.Errorf("onnx-go decoded the tensor as %T (%d values) for %v%v: %w", data, lenOf(data), lay.dtype, lay.shape, err)
		}
		return graph.TensorAttr(t), nil
	}
	return graph.Attr{}, fmt.Errorf("value of Go type %T is not supported", v)
}

func lenOf(v interface{}) int {
	switch d := v.(type) {
	case []float32:
		return len(d)
	case []int64:
		return len(d)
	case []int32:
		return len(d)
	case []bool:
		return len(d)
	}
	return -1
}

// normalizeConstant rewrites Constant's value_float, value_int, value_floats and value_ints
// forms into the tensor attribute "value" that zoo's backends read.
func normalizeConstant(n *graph.Node) error {
	if len(n.Attrs) != 1 {
		return fmt.Errorf("Constant needs exactly one value attribute, has %d", len(n.Attrs))
	}
	for k, a := range n.Attrs {
		var t *tensor.Tensor
		switch {
		case k == "value" && a.Kind == graph.AttrTensor:
			return nil
		case k == "value_float" && a.Kind == graph.AttrFloat:
			t = tensor.ScalarF(a.F)
		case k == "value_int" && a.Kind == graph.AttrInt:
			t = tensor.Scalar64(a.I)
		case k == "value_floats" && a.Kind == graph.AttrFloats:
			t, _ = tensor.FromFloat32(append([]float32{}, a.Floats...), len(a.Floats))
		case k == "value_ints" && a.Kind == graph.AttrInts:
			t, _ = tensor.FromInt64(append([]int64{}, a.Ints...), len(a.Ints))
		default:
			return fmt.Errorf("Constant attribute %q is not supported (zoo reads value, value_float(s), value_int(s))", k)
		}
		n.Attrs = graph.Attrs{"value": graph.TensorAttr(t)}
	}
	return nil
}
