package onnx

import (
	"encoding/binary"
	"fmt"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The 8- and 16-bit element types: int8 and uint8 (quantized graphs) and float16 and
// bfloat16 (half-precision weights and data). In a TensorProto they sit in raw_data (1 or 2
// little-endian bytes each) or one per int32_data entry (the 16-bit floats as their bit
// patterns), as the ONNX spec says.

// smallDType reports whether dt is one of the 8- and 16-bit types this file decodes.
func smallDType(dt tensor.DType) bool {
	switch dt {
	case tensor.Int8, tensor.Uint8, tensor.Float16, tensor.BFloat16:
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
	case tensor.Int8, tensor.Uint8:
		lo, hi := int64(-128), int64(127)
		if t.DType == tensor.Uint8 {
			lo, hi = 0, 255
		}
		raw := make([]byte, len(t.I64))
		for i, v := range t.I64 {
			if v < lo || v > hi {
				return fmt.Errorf("%v tensor holds %d at index %d, out of range", t.DType, v, i)
			}
			raw[i] = byte(v)
		}
		tp.RawData = raw
	default:
		return fmt.Errorf("unsupported dtype %v", t.DType)
	}
	return nil
}

// walkable reports whether onnx-go decodes tensors of dt (it does not know the small
// types; those tensor attributes are decoded from the pre-pass instead).
func walkable(dt tensor.DType) bool { return !smallDType(dt) }

// half16 reports whether dt is a 16-bit float type.
func half16(dt tensor.DType) bool { return dt == tensor.Float16 || dt == tensor.BFloat16 }

// computeInFloat32 makes a graph with float16 or bfloat16 weights and values compute in
// float32: initializers and constants are widened once here (exactly: every 16-bit value is
// a float32), value types become float32 and a Cast to a 16-bit float becomes a Cast to
// float32. The graph's results are then float32, within 16-bit rounding of the native ones.
// It returns the number of values it retyped, which Import records in the metadata.
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
	for _, vs := range [][]graph.ValueInfo{g.Inputs, g.Outputs} {
		for i := range vs {
			if half16(vs[i].DType) {
				vs[i].DType = tensor.Float32
				count++
			}
		}
	}
	for k, v := range g.ValueInfo {
		if half16(v.DType) {
			v.DType = tensor.Float32
			g.ValueInfo[k] = v
			count++
		}
	}
	for _, n := range g.Nodes {
		for _, a := range n.Attrs {
			if a.Kind == graph.AttrTensor {
				widen(a.T)
			}
		}
		if n.Op == "Cast" && n.Domain == "" {
			if to := tensor.DType(n.Int("to", 0)); half16(to) {
				n.Attrs["to"] = graph.Int(int64(tensor.Float32))
				count++
			}
		}
	}
	return count
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
