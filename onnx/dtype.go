package onnx

import (
	"encoding/binary"
	"fmt"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The 8- and 16-bit element types: int8 and uint8 (quantized graphs), int16 and uint16, and
// float16 and bfloat16 (half-precision weights and data). In a TensorProto they sit in
// raw_data (1 or 2 little-endian bytes each) or one per int32_data entry (the 16-bit floats as
// their bit patterns), as the ONNX spec says.

// smallDType reports whether dt is one of the 8- and 16-bit types this file decodes.
func smallDType(dt tensor.DType) bool {
	switch dt {
	case tensor.Int8, tensor.Uint8, tensor.Int16, tensor.Uint16, tensor.Float16, tensor.BFloat16:
		return true
	}
	return false
}

// decodeSmall converts a checked TensorProto of a small dtype into a tensor (16-bit floats
// widened to their exact float32 values, integers into I64).
func decodeSmall(tp *onnxpb.TensorProto, lay tensorLayout) (*tensor.Tensor, error) {
	t, err := tensor.New(lay.dtype, lay.shape...)
	if err != nil {
		return nil, err
	}
	raw, typed := tp.GetRawData(), tp.GetInt32Data()
	elem := func(i int) uint32 {
		if !lay.raw {
			return uint32(typed[i])
		}
		if lay.dtype.Size() == 2 {
			return uint32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
		return uint32(raw[i])
	}
	for i := 0; i < lay.n; i++ {
		v := elem(i)
		switch lay.dtype {
		case tensor.Float16:
			t.F32[i] = tensor.Float16FromBits(uint16(v))
		case tensor.BFloat16:
			t.F32[i] = tensor.BFloat16FromBits(uint16(v))
		case tensor.Int8:
			t.I64[i] = int64(int8(uint8(v)))
		case tensor.Uint8:
			t.I64[i] = int64(uint8(v))
		case tensor.Int16:
			t.I64[i] = int64(int16(uint16(v)))
		case tensor.Uint16:
			t.I64[i] = int64(uint16(v))
		}
	}
	return t, nil
}

// encodeSmall writes t's data as raw_data of its small dtype: 16-bit floats rounded to
// nearest even (exact for values already on their grid), integers checked against the
// type's range.
func encodeSmall(tp *onnxpb.TensorProto, t *tensor.Tensor) error {
	switch t.DType {
	case tensor.Float16, tensor.BFloat16:
		raw := make([]byte, 2*len(t.F32))
		for i, v := range t.F32 {
			b := tensor.Float16Bits(v)
			if t.DType == tensor.BFloat16 {
				b = tensor.BFloat16Bits(v)
			}
			binary.LittleEndian.PutUint16(raw[2*i:], b)
		}
		tp.RawData = raw
	case tensor.Int8, tensor.Uint8, tensor.Int16, tensor.Uint16:
		lo, hi := t.DType.IntRange()
		size := t.DType.Size()
		raw := make([]byte, size*len(t.I64))
		for i, v := range t.I64 {
			if v < lo || v > hi {
				return fmt.Errorf("%v tensor holds %d at index %d, out of range", t.DType, v, i)
			}
			if size == 1 {
				raw[i] = byte(v)
			} else {
				binary.LittleEndian.PutUint16(raw[2*i:], uint16(v))
			}
		}
		tp.RawData = raw
	default:
		return fmt.Errorf("unsupported dtype %v", t.DType)
	}
	return nil
}

// walkable reports whether onnx-go decodes tensors of dt (float32, int32, int64 and bool; the
// other types' tensor attributes are decoded from the pre-pass instead).
func walkable(dt tensor.DType) bool {
	switch dt {
	case tensor.Float32, tensor.Int32, tensor.Int64, tensor.Bool:
		return true
	}
	return false
}

// half16 reports whether dt is a 16-bit float type.
func half16(dt tensor.DType) bool { return dt == tensor.Float16 || dt == tensor.BFloat16 }

// computeInFloat32 makes a graph with float16 or bfloat16 weights and values compute in
// float32: initializers, constants and inner value types are widened once here (exactly:
// every 16-bit value is a float32). What the file declares at its edges and what its Casts
// round to stays as the file says:
//
//   - a 16-bit graph input keeps its type (a run is fed 16-bit values) and is widened by a
//     Cast to float32 before its first use;
//   - a 16-bit graph output keeps its type: its value is computed in float32 and rounded by
//     a final Cast to the declared type (to nearest, ties to even, as ONNX Runtime does);
//   - a Cast to a 16-bit float still rounds: it stays a Cast to that type, followed by a Cast
//     back to float32 for the float32 ops after it.
//
// The graph's results are then the file's types, within 16-bit rounding of the native ones
// (closer: the arithmetic between the Casts is float32). It returns the number of values it
// retyped or rewrote, which Import records in the metadata.
func computeInFloat32(g *graph.Graph) int {
	count := 0
	widen := func(t *tensor.Tensor) {
		if t != nil && half16(t.DType) {
			t.DType = tensor.Float32
			count++
		}
	}
	for i := range g.Initializers {
		widen(g.Initializers[i].Tensor)
	}
	for k, v := range g.ValueInfo {
		if half16(v.DType) {
			v.DType = tensor.Float32
			g.ValueInfo[k] = v
			count++
		}
	}
	used := map[string]bool{}
	for _, vs := range [][]graph.ValueInfo{g.Inputs, g.Outputs} {
		for _, v := range vs {
			used[v.Name] = true
		}
	}
	for _, in := range g.Initializers {
		used[in.Name] = true
	}
	producer := map[string]*graph.Node{}
	for _, n := range g.Nodes {
		for _, v := range append(append([]string(nil), n.Inputs...), n.Outputs...) {
			used[v] = true
		}
		for _, o := range n.Outputs {
			producer[o] = n
		}
	}
	fresh := func(base string) string {
		name := base
		for i := 2; used[name]; i++ {
			name = fmt.Sprintf("%s_%d", base, i)
		}
		used[name] = true
		return name
	}
	castNode := func(name, in, out string, to tensor.DType) *graph.Node {
		return &graph.Node{Name: name, Op: "Cast", Inputs: []string{in}, Outputs: []string{out}, Attrs: graph.Attrs{"to": graph.Int(int64(to))}}
	}
	isCastTo := func(n *graph.Node, to tensor.DType) bool {
		return n != nil && n.Op == "Cast" && n.Domain == "" && tensor.DType(n.Int("to", 0)) == to
	}
	// Values whose producing Cast already gives the declared 16-bit output type.
	keep := map[*graph.Node]bool{}
	var tail []*graph.Node
	isInput := map[string]bool{}
	for _, in := range g.Inputs {
		isInput[in.Name] = true
	}
	for _, out := range g.Outputs {
		if !half16(out.DType) || isInput[out.Name] {
			continue
		}
		if p := producer[out.Name]; isCastTo(p, out.DType) {
			keep[p] = true
			continue
		}
		wide := fresh(out.Name + "/float32")
		renameValue(g, out.Name, wide)
		tail = append(tail, castNode(wide+"/round", wide, out.Name, out.DType))
		count++
	}
	var nodes []*graph.Node
	for _, in := range g.Inputs {
		if !half16(in.DType) {
			continue
		}
		wide := fresh(in.Name + "/float32")
		for _, n := range g.Nodes {
			for i, v := range n.Inputs {
				if v == in.Name {
					n.Inputs[i] = wide
				}
			}
		}
		nodes = append(nodes, castNode(wide+"/widen", in.Name, wide, tensor.Float32))
		count++
	}
	for _, n := range g.Nodes {
		for _, a := range n.Attrs {
			if a.Kind == graph.AttrTensor {
				widen(a.T)
			}
		}
		nodes = append(nodes, n)
		if n.Op != "Cast" || n.Domain != "" || keep[n] {
			continue
		}
		if to := tensor.DType(n.Int("to", 0)); half16(to) {
			y := n.Outputs[0]
			rounded := fresh(y + "/" + to.String())
			n.Outputs[0] = rounded
			nodes = append(nodes, castNode(rounded+"/widen", rounded, y, tensor.Float32))
			count++
		}
	}
	g.Nodes = append(nodes, tail...)
	return count
}

// renameValue renames value old to new wherever the graph defines or uses it (node inputs
// and outputs, initializers, value infos); graph inputs and outputs keep their names.
func renameValue(g *graph.Graph, old, new string) {
	for _, n := range g.Nodes {
		for i, v := range n.Inputs {
			if v == old {
				n.Inputs[i] = new
			}
		}
		for i, v := range n.Outputs {
			if v == old {
				n.Outputs[i] = new
			}
		}
	}
	for i := range g.Initializers {
		if g.Initializers[i].Name == old {
			g.Initializers[i].Name = new
		}
	}
	if v, ok := g.ValueInfo[old]; ok {
		delete(g.ValueInfo, old)
		v.Name = new
		g.ValueInfo[new] = v
	}
}

// opsetImports is the model's opset_import: ai.onnx at opset, and com.microsoft version 1
// when a node uses ONNX Runtime's contrib ops.
func opsetImports(g *graph.Graph, opset int) []*onnxpb.OperatorSetIdProto {
	imps := []*onnxpb.OperatorSetIdProto{{Domain: "", Version: int64(opset)}}
	for _, n := range g.Nodes {
		if n.Domain == graph.MicrosoftDomain {
			return append(imps, &onnxpb.OperatorSetIdProto{Domain: graph.MicrosoftDomain, Version: 1})
		}
	}
	return imps
}
