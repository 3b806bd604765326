package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// maxElements caps the element count of any tensor zoo will read (tensor.New's own limit).
const maxElements = 1 << 31

// littleEndian is true on machines whose memory order is ONNX's raw_data order, where float32
// and int64 data convert to and from raw_data by reinterpreting the slice instead of a loop.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bytesOf returns the memory of s as bytes, without copying: the result aliases s.
func bytesOf[E float32 | int64](s []E) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// sliceOf returns raw as n elements of E without copying when raw is suitably aligned (the
// result then aliases raw); otherwise ok is false.
func sliceOf[E float32 | int64](raw []byte, n int) (s []E, ok bool) {
	var zero E
	if n == 0 || len(raw) != n*int(unsafe.Sizeof(zero)) || uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%unsafe.Alignof(zero) != 0 {
		return nil, false
	}
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(raw))), n), true
}

// encodeTensor converts t into a TensorProto with little-endian raw_data. On little-endian
// machines the raw_data of float32 and int64 tensors aliases t's data (no copy): the proto
// must not outlive a change to t, which Export guarantees by marshalling it at once.
func encodeTensor(name string, t *tensor.Tensor) (*onnxpb.TensorProto, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	tp := &onnxpb.TensorProto{Name: name, DataType: int32(t.DType), Dims: make([]int64, len(t.Shape))}
	for i, d := range t.Shape {
		tp.Dims[i] = int64(d)
	}
	n := t.Len()
	switch t.DType {
	case tensor.Float32:
		if littleEndian {
			tp.RawData = bytesOf(t.F32)
			break
		}
		raw := make([]byte, 4*n)
		for i, v := range t.F32 {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		tp.RawData = raw
	case tensor.Int64:
		if littleEndian {
			tp.RawData = bytesOf(t.I64)
			break
		}
		raw := make([]byte, 8*n)
		for i, v := range t.I64 {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		}
		tp.RawData = raw
	case tensor.Int32:
		raw := make([]byte, 4*n)
		for i, v := range t.I64 {
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("int32 tensor holds %d at index %d, out of int32 range", v, i)
			}
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(v)))
		}
		tp.RawData = raw
	case tensor.Bool:
		raw := make([]byte, n)
		for i, v := range t.Bool {
			if v {
				raw[i] = 1
			}
		}
		tp.RawData = raw
	case tensor.Int8, tensor.Uint8, tensor.Int16, tensor.Uint16, tensor.Float16, tensor.BFloat16:
		if err := encodeSmall(tp, t); err != nil {
			return nil, err
		}
	case tensor.Uint32:
		raw := make([]byte, 4*n)
		for i, v := range t.I64 {
			if v < 0 || v > math.MaxUint32 {
				return nil, fmt.Errorf("uint32 tensor holds %d at index %d, out of range", v, i)
			}
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
		}
		tp.RawData = raw
	case tensor.Uint64:
		raw := make([]byte, 8*n)
		for i, v := range t.I64 {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		}
		tp.RawData = raw
	case tensor.Float64:
		raw := make([]byte, 8*n)
		for i, v := range t.F64 {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
		}
		tp.RawData = raw
	default:
		return nil, fmt.Errorf("unsupported dtype %v", t.DType)
	}
	return tp, nil
}

// dtypeName names an ONNX TensorProto.DataType code for error messages.
func dtypeName(code int32) string {
	if name, ok := onnxpb.TensorProto_DataType_name[code]; ok {
		return strings.ToLower(name)
	}
	return fmt.Sprintf("data type %d", code)
}

// supportedDType maps an ONNX data type code to a zoo dtype, or returns an error naming it.
func supportedDType(code int32) (tensor.DType, error) {
	switch dt := tensor.DType(code); dt {
	case tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16, tensor.Bool,
		tensor.Int64, tensor.Int32, tensor.Int16, tensor.Int8, tensor.Uint64, tensor.Uint32, tensor.Uint16, tensor.Uint8:
		return dt, nil
	}
	return tensor.Invalid, fmt.Errorf("element type %s is not supported (zoo reads float32, float64, float16, bfloat16, the integer types and bool)", dtypeName(code))
}

// tensorLayout is what checkTensor learned about a TensorProto without allocating its data.
type tensorLayout struct {
	dtype tensor.DType
	shape []int
	n     int
	raw   bool // data is in raw_data (else in the typed field)
}

// checkTensor validates a TensorProto's declared type and dims against the bytes it actually
// holds, before anything is allocated for it: dims must be non-negative, their product must
// not overflow or exceed 2^31 elements, external data and segments are refused, and the data
// field must hold exactly the declared number of elements.
func checkTensor(tp *onnxpb.TensorProto) (tensorLayout, error) {
	var lay tensorLayout
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL || len(tp.GetExternalData()) > 0 {
		loc := ""
		for _, e := range tp.GetExternalData() {
			if e.GetKey() == "location" {
				loc = fmt.Sprintf(" (%q)", e.GetValue())
			}
		}
		return lay, fmt.Errorf("data is stored in an external file%s; import the model from its file (onnx.ImportFile, zoo run FILE.onnx) with the data next to it, or re-save it with onnx.save_model(m, path, save_as_external_data=False)", loc)
	}
	if tp.GetSegment() != nil {
		return lay, fmt.Errorf("segmented tensors are not supported")
	}
	dt, err := supportedDType(tp.GetDataType())
	if err != nil {
		return lay, err
	}
	lay.dtype = dt
	lay.shape = make([]int, len(tp.GetDims()))
	n := int64(1)
	for i, d := range tp.GetDims() {
		if d < 0 {
			return lay, fmt.Errorf("negative dimension %d in dims %v", d, tp.GetDims())
		}
		if d > maxElements || (d > 0 && n > maxElements/d) {
			return lay, fmt.Errorf("declared dims %v exceed 2^31 elements", tp.GetDims())
		}
		n *= d
		lay.shape[i] = int(d)
	}
	if n > maxElements {
		return lay, fmt.Errorf("declared dims %v exceed 2^31 elements", tp.GetDims())
	}
	lay.n = int(n)
	size := int64(dt.Size())
	var have int64
	var field string
	switch {
	case len(tp.GetRawData()) > 0:
		lay.raw = true
		field = "raw_data bytes"
		if int64(len(tp.GetRawData())) != n*size {
			return lay, fmt.Errorf("declares %d %v elements (dims %v, %d bytes) but raw_data holds %d bytes", n, dt, tp.GetDims(), n*size, len(tp.GetRawData()))
		}
		return lay, nil
	case dt == tensor.Float32:
		have, field = int64(len(tp.GetFloatData())), "float_data"
	case dt == tensor.Int64:
		have, field = int64(len(tp.GetInt64Data())), "int64_data"
	case dt == tensor.Float64:
		have, field = int64(len(tp.GetDoubleData())), "double_data"
	case dt == tensor.Uint32 || dt == tensor.Uint64:
		have, field = int64(len(tp.GetUint64Data())), "uint64_data"
	default: // int32, int16, int8, uint16, uint8, bool, float16 and bfloat16 live in int32_data
		have, field = int64(len(tp.GetInt32Data())), "int32_data"
	}
	if have != n {
		if have == 0 && n > 0 {
			return lay, fmt.Errorf("declares %d %v elements (dims %v) but holds no data", n, dt, tp.GetDims())
		}
		return lay, fmt.Errorf("declares %d %v elements (dims %v) but %s holds %d", n, dt, tp.GetDims(), field, have)
	}
	return lay, nil
}

// decodeTensor checks tp with checkTensor and then converts it to a zoo tensor. On
// little-endian machines a float32 or int64 tensor in raw_data takes raw_data's memory as its
// own (no copy), so tp's raw_data must not be used afterwards: Import's ModelProto is its own
// (proto.Unmarshal copies bytes fields out of the input) and is dropped after the import.
func decodeTensor(tp *onnxpb.TensorProto) (*tensor.Tensor, error) {
	lay, err := checkTensor(tp)
	if err != nil {
		return nil, err
	}
	if smallDType(lay.dtype) {
		return decodeSmall(tp, lay)
	}
	if lay.raw && littleEndian {
		t := &tensor.Tensor{DType: lay.dtype, Shape: lay.shape}
		ok := false
		switch lay.dtype {
		case tensor.Float32:
			t.F32, ok = sliceOf[float32](tp.GetRawData(), lay.n)
		case tensor.Int64:
			t.I64, ok = sliceOf[int64](tp.GetRawData(), lay.n)
		}
		if ok {
			if err := t.Check(); err != nil {
				return nil, err
			}
			return t, nil
		}
	}
	t, err := tensor.New(lay.dtype, lay.shape...)
	if err != nil {
		return nil, err
	}
	raw := tp.GetRawData()
	switch lay.dtype {
	case tensor.Float32:
		if lay.raw {
			for i := range t.F32 {
				t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		} else {
			copy(t.F32, tp.GetFloatData())
		}
	case tensor.Int64:
		if lay.raw {
			for i := range t.I64 {
				t.I64[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		} else {
			copy(t.I64, tp.GetInt64Data())
		}
	case tensor.Int32:
		if lay.raw {
			for i := range t.I64 {
				t.I64[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			}
		} else {
			for i, v := range tp.GetInt32Data() {
				t.I64[i] = int64(v)
			}
		}
	case tensor.Bool:
		if lay.raw {
			for i := range t.Bool {
				t.Bool[i] = raw[i] != 0
			}
		} else {
			for i, v := range tp.GetInt32Data() {
				t.Bool[i] = v != 0
			}
		}
	case tensor.Float64:
		if lay.raw {
			for i := range t.F64 {
				t.F64[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		} else {
			copy(t.F64, tp.GetDoubleData())
		}
	case tensor.Uint32, tensor.Uint64:
		for i := range t.I64 {
			var v uint64
			switch {
			case !lay.raw:
				v = tp.GetUint64Data()[i]
			case lay.dtype == tensor.Uint32:
				v = uint64(binary.LittleEndian.Uint32(raw[4*i:]))
			default:
				v = binary.LittleEndian.Uint64(raw[8*i:])
			}
			if lay.dtype == tensor.Uint32 && v > math.MaxUint32 {
				return nil, fmt.Errorf("uint32 tensor holds %d in uint64_data, out of range", v)
			}
			t.I64[i] = int64(v)
		}
	}
	return t, nil
}

// DecodeTensor decodes a serialised TensorProto, such as a test_data_set's input_0.pb of
// ONNX's backend tests, checked as Import checks an initializer. Its data must be in the
// proto itself (not external).
func DecodeTensor(data []byte) (*tensor.Tensor, error) {
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(data, &tp); err != nil {
		return nil, fmt.Errorf("not a TensorProto: %v", err)
	}
	return decodeTensor(&tp)
}
