package onnx

import (
	"encoding/json"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/quant"
)

// IRVersion is the ONNX IR version that Export writes (ONNX 1.12, the newest that PyTorch
// 1.13 and Debian's onnx checker accept).
const IRVersion = 8

// MinOpset and MaxOpset bound the ai.onnx opsets that Export writes; Import reads
// MinImportOpset to MaxOpset. Export writes each node in its form at the opset
// (opset_export.go: LayerNormalization, Gelu and RMSNormalization as basic ops below the
// opset that defines them) and refuses an op it cannot lower below its SinceVersion.
const (
	MinOpset = 13
	MaxOpset = 23
)

// UnsupportedOps returns the ops of graph's op table that Export or Import cannot carry at
// any opset, each with the reason (none today): the op-table coverage test
// (backends/optable_test.go) round-trips every other op and accepts only these gaps.
func UnsupportedOps() map[string]string { return map[string]string{} }

// Producer is the producer_name Export writes.
const Producer = "zoo"

// BuffersKey is the metadata_props key under which Export records, as a JSON list, the names
// of initializers that are buffers (graph.Initializer.Buffer); Import restores the flag from
// it and does not copy it into Graph.Meta.
const BuffersKey = "zoo.buffers"

// ExportOptions tune Export. The zero value exports at the graph's own opset.
type ExportOptions struct {
	// Opset is the ai.onnx opset to declare; 0 means g.Opset, or graph.DefaultOpset when
	// that is 0 too. It must lie in [MinOpset, MaxOpset].
	Opset int
	// ProducerVersion is written as producer_version (e.g. zoo's version); may be empty.
	ProducerVersion string
	// DocString is written as the model's doc_string; may be empty.
	DocString string
	// Precision "int8" writes the linear layers in ONNX Runtime's dynamic-quantization form
	// (quant.Dynamic: int8 weights per output column, DynamicQuantizeLinear, MatMulInteger and
	// the scale Muls); "", "fp32" and "bf16" (a run-time precision: the file stays fp32) write
	// the float graph. Anything else is an error.
	Precision string
}

// Export serialises g as an ONNX ModelProto: IR version 8, one ai.onnx opset import, producer
// "zoo", graph inputs and outputs with fixed (dim_value) and symbolic (dim_param) dimensions,
// initializers as little-endian raw_data, node names, domains and attributes, g.ValueInfo as
// value_info and g.Meta as metadata_props (plus BuffersKey). The same graph always gives the
// same bytes. It returns an error, and no bytes, when g fails graph.Validate, the opset is
// outside [MinOpset, MaxOpset] or an op does not exist at that opset, or a tensor or
// attribute cannot be represented; with Precision "int8", also when g has no linear layer to
// quantize or a weight holds a NaN or an infinity.
func Export(g *graph.Graph, opts ExportOptions) ([]byte, error) {
	m, err := toModelProto(g, opts)
	if err != nil {
		return nil, err
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("export onnx: marshal model: %w", err)
	}
	return data, nil
}

func toModelProto(g *graph.Graph, opts ExportOptions) (*onnxpb.ModelProto, error) {
	if g == nil {
		return nil, fmt.Errorf("export onnx: graph is nil")
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("export onnx: graph %q is invalid: %w", g.Name, err)
	}
	opset := opts.Opset
	if opset == 0 {
		opset = g.Opset
	}
	if opset == 0 {
		opset = graph.DefaultOpset
	}
	if opset < MinOpset || opset > MaxOpset {
		return nil, fmt.Errorf("export onnx: opset %d is not supported (zoo writes ai.onnx opsets %d to %d)", opset, MinOpset, MaxOpset)
	}
	switch opts.Precision {
	case "", "fp32", "bf16":
	case "int8":
		q, _, err := quant.Dynamic(g, quant.Options{})
		if err != nil {
			return nil, fmt.Errorf("export onnx: %w", err)
		}
		g = q
	default:
		return nil, fmt.Errorf("export onnx: precision %q: zoo writes fp32 or int8 files", opts.Precision)
	}
	g, err := lowerForOpset(g, opset)
	if err != nil {
		return nil, fmt.Errorf("export onnx: %w", err)
	}
	gp := &onnxpb.GraphProto{Name: g.Name}
	for _, v := range g.Inputs {
		gp.Input = append(gp.Input, valueInfoProto(v))
	}
	for _, v := range g.Outputs {
		gp.Output = append(gp.Output, valueInfoProto(v))
	}
	if len(g.ValueInfo) > 0 {
		names := make([]string, 0, len(g.ValueInfo))
		for name := range g.ValueInfo {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			v := g.ValueInfo[name]
			v.Name = name
			gp.ValueInfo = append(gp.ValueInfo, valueInfoProto(v))
		}
	}
	var buffers []string
	for _, in := range g.Initializers {
		tp, err := encodeTensor(in.Name, in.Tensor)
		if err != nil {
			return nil, fmt.Errorf("export onnx: initializer %q: %w", in.Name, err)
		}
		gp.Initializer = append(gp.Initializer, tp)
		if in.Buffer {
			buffers = append(buffers, in.Name)
		}
	}
	for i, n := range g.Nodes {
		if d, ok := graph.LookupNodeOp(n); ok && d.Domain == "" && opset < d.SinceVersion {
			// Below the op table's SinceVersion the op is missing or means something else.
			return nil, fmt.Errorf("export onnx: node %d (%s %q): %s needs opset %d, asked for %d", i, n.Op, n.Name, n.Op, d.SinceVersion, opset)
		}
		np := &onnxpb.NodeProto{
			Name:   n.Name,
			OpType: n.Op,
			Input:  append([]string(nil), n.Inputs...),
			Output: append([]string(nil), n.Outputs...),
		}
		if n.Domain != "ai.onnx" {
			np.Domain = n.Domain
		}
		keys := make([]string, 0, len(n.Attrs))
		for k := range n.Attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ap, err := attrProto(k, n.Attrs[k])
			if err != nil {
				return nil, fmt.Errorf("export onnx: node %d (%s %q): attribute %q: %w", i, n.Op, n.Name, k, err)
			}
			np.Attribute = append(np.Attribute, ap)
		}
		gp.Node = append(gp.Node, np)
	}
	m := &onnxpb.ModelProto{
		IrVersion:       IRVersion,
		OpsetImport:     opsetImports(g, opset),
		ProducerName:    Producer,
		ProducerVersion: opts.ProducerVersion,
		DocString:       opts.DocString,
		Graph:           gp,
	}
	keys := make([]string, 0, len(g.Meta))
	for k := range g.Meta {
		if k == BuffersKey {
			return nil, fmt.Errorf("export onnx: metadata key %q is reserved for zoo's buffer list", BuffersKey)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m.MetadataProps = append(m.MetadataProps, &onnxpb.StringStringEntryProto{Key: k, Value: g.Meta[k]})
	}
	if len(buffers) > 0 {
		js, err := json.Marshal(buffers)
		if err != nil {
			return nil, fmt.Errorf("export onnx: buffer list: %w", err)
		}
		m.MetadataProps = append(m.MetadataProps, &onnxpb.StringStringEntryProto{Key: BuffersKey, Value: string(js)})
	}
	return m, nil
}

// valueInfoProto converts a typed value; a nil Shape leaves the rank unknown.
func valueInfoProto(v graph.ValueInfo) *onnxpb.ValueInfoProto {
	tt := &onnxpb.TypeProto_Tensor{ElemType: int32(v.DType)}
	if v.Shape != nil {
		tt.Shape = &onnxpb.TensorShapeProto{Dim: make([]*onnxpb.TensorShapeProto_Dimension, len(v.Shape))}
		for i, d := range v.Shape {
			dim := &onnxpb.TensorShapeProto_Dimension{}
			switch {
			case d.Known():
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d.Size}
			case d.Param != "":
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d.Param}
			}
			tt.Shape.Dim[i] = dim
		}
	}
	return &onnxpb.ValueInfoProto{Name: v.Name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: tt}}}
}

func attrProto(name string, a graph.Attr) (*onnxpb.AttributeProto, error) {
	ap := &onnxpb.AttributeProto{Name: name}
	switch a.Kind {
	case graph.AttrInt:
		ap.Type, ap.I = onnxpb.AttributeProto_INT, a.I
	case graph.AttrFloat:
		ap.Type, ap.F = onnxpb.AttributeProto_FLOAT, a.F
	case graph.AttrString:
		ap.Type, ap.S = onnxpb.AttributeProto_STRING, []byte(a.S)
	case graph.AttrInts:
		ap.Type, ap.Ints = onnxpb.AttributeProto_INTS, append([]int64(nil), a.Ints...)
	case graph.AttrFloats:
		ap.Type, ap.Floats = onnxpb.AttributeProto_FLOATS, append([]float32(nil), a.Floats...)
	case graph.AttrTensor:
		if a.T == nil {
			return nil, fmt.Errorf("tensor attribute is nil")
		}
		tp, err := encodeTensor("", a.T)
		if err != nil {
			return nil, err
		}
		ap.Type, ap.T = onnxpb.AttributeProto_TENSOR, tp
	default:
		return nil, fmt.Errorf("unknown attribute kind %d", a.Kind)
	}
	return ap, nil
}
