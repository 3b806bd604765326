// Package tensor holds the dense, row-major host tensors that flow between the graph IR,
// the backends, weight files and output writers.
package tensor

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// DType is an element type. The values equal ONNX TensorProto.DataType so that export and
// import need no mapping table.
type DType int32

// The element types zoo computes with. Float16 and BFloat16 values are held in F32 (each
// value exactly on the 16-bit type's grid: see RoundFloat16 and RoundBFloat16), the integer
// types up to 32 bits and Int64 in I64, so that kernels handle one float and one integer
// representation. Float64 values are held in F64 (computed in float64, never through float32),
// and Uint64 values in I64 as their bit patterns (a value of 2^63 or more reads as negative
// there: only ops that handle it as unsigned accept Uint64; IsInt is false for it).
const (
	Invalid  DType = 0
	Float32  DType = 1
	Uint8    DType = 2
	Int8     DType = 3
	Uint16   DType = 4
	Int16    DType = 5
	Int32    DType = 6
	Int64    DType = 7
	Bool     DType = 9
	Float16  DType = 10
	Float64  DType = 11
	Uint32   DType = 12
	Uint64   DType = 13
	BFloat16 DType = 16
)

// String returns the lower-case ONNX-style name ("float32", "int64", ...).
func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Bool:
		return "bool"
	case Uint8:
		return "uint8"
	case Int8:
		return "int8"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	case Float64:
		return "float64"
	case Int16:
		return "int16"
	case Uint16:
		return "uint16"
	case Uint32:
		return "uint32"
	case Uint64:
		return "uint64"
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Size returns the element size in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Float32, Int32, Uint32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	case Bool, Int8, Uint8:
		return 1
	case Float16, BFloat16, Int16, Uint16:
		return 2
	}
	return 0
}

// IsFloat reports whether d is a floating-point type (held in F32).
func (d DType) IsFloat() bool { return d == Float32 || d == Float16 || d == BFloat16 }

// IsInt reports whether d is an integer type whose values int64 holds exactly (held in I64):
// every integer type but Uint64.
func (d DType) IsInt() bool {
	switch d {
	case Int64, Int32, Int16, Int8, Uint32, Uint16, Uint8:
		return true
	}
	return false
}

// HeldInI64 reports whether d's values are held in I64: the IsInt types and Uint64.
func (d DType) HeldInI64() bool { return d.IsInt() || d == Uint64 }

// IntRange returns the range of an IsInt type (that of int64 for Int64).
func (d DType) IntRange() (lo, hi int64) {
	switch d {
	case Int8:
		return math.MinInt8, math.MaxInt8
	case Uint8:
		return 0, math.MaxUint8
	case Int16:
		return math.MinInt16, math.MaxInt16
	case Uint16:
		return 0, math.MaxUint16
	case Int32:
		return math.MinInt32, math.MaxInt32
	case Uint32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.MaxInt64
}

// Wrap returns v reduced into d's range as a C cast to d does (two's complement wrapping);
// v itself for Int64 and Uint64 (whose I64 holds the bit pattern) and non-integer types.
func (d DType) Wrap(v int64) int64 {
	switch d {
	case Int8:
		return int64(int8(v))
	case Uint8:
		return int64(uint8(v))
	case Int16:
		return int64(int16(v))
	case Uint16:
		return int64(uint16(v))
	case Int32:
		return int64(int32(v))
	case Uint32:
		return int64(uint32(v))
	}
	return v
}

// Tensor is a dense row-major array. Exactly one of the data slices is used, chosen by DType
// (Float16 and BFloat16 values are held in F32, Int8, Uint8 and Int32 values in I64, so
// kernels handle one float and one integer representation).
// A scalar has an empty Shape and one element.
type Tensor struct {
	DType DType
	Shape []int
	F32   []float32
	F64   []float64
	I64   []int64
	Bool  []bool
}

// NumElements returns the product of shape; it returns -1 when a dimension is negative.
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		n *= d
	}
	return n
}

// New returns a zero-filled tensor. It returns an error for an unknown dtype, a negative
// dimension, or more than 1<<31 elements.
func New(dt DType, shape ...int) (*Tensor, error) {
	n := NumElements(shape)
	if n < 0 {
		return nil, fmt.Errorf("new tensor: negative dimension in shape %v", shape)
	}
	if n > 1<<31 {
		return nil, fmt.Errorf("new tensor: shape %v has %d elements, more than 2^31", shape, n)
	}
	t := &Tensor{DType: dt, Shape: append([]int{}, shape...)}
	switch dt {
	case Float32, Float16, BFloat16:
		t.F32 = make([]float32, n)
	case Float64:
		t.F64 = make([]float64, n)
	case Int32, Int64, Int8, Uint8, Int16, Uint16, Uint32, Uint64:
		t.I64 = make([]int64, n)
	case Bool:
		t.Bool = make([]bool, n)
	default:
		return nil, fmt.Errorf("new tensor: unsupported dtype %v", dt)
	}
	return t, nil
}

// FromFloat32 wraps data (not copied) with shape; it returns an error when sizes disagree.
func FromFloat32(data []float32, shape ...int) (*Tensor, error) {
	if NumElements(shape) != len(data) {
		return nil, fmt.Errorf("tensor: %d float32 values do not fill shape %v", len(data), shape)
	}
	return &Tensor{DType: Float32, Shape: append([]int{}, shape...), F32: data}, nil
}

// FromInt64 wraps data (not copied) with shape; it returns an error when sizes disagree.
func FromInt64(data []int64, shape ...int) (*Tensor, error) {
	if NumElements(shape) != len(data) {
		return nil, fmt.Errorf("tensor: %d int64 values do not fill shape %v", len(data), shape)
	}
	return &Tensor{DType: Int64, Shape: append([]int{}, shape...), I64: data}, nil
}

// FromBool wraps data (not copied) with shape; it returns an error when sizes disagree.
func FromBool(data []bool, shape ...int) (*Tensor, error) {
	if NumElements(shape) != len(data) {
		return nil, fmt.Errorf("tensor: %d bool values do not fill shape %v", len(data), shape)
	}
	return &Tensor{DType: Bool, Shape: append([]int{}, shape...), Bool: data}, nil
}

// Scalar64 returns a rank-0 int64 tensor.
func Scalar64(v int64) *Tensor { return &Tensor{DType: Int64, Shape: []int{}, I64: []int64{v}} }

// ScalarF returns a rank-0 float32 tensor.
func ScalarF(v float32) *Tensor { return &Tensor{DType: Float32, Shape: []int{}, F32: []float32{v}} }

// Len returns the number of elements the tensor holds.
func (t *Tensor) Len() int {
	switch t.DType {
	case Float32, Float16, BFloat16:
		return len(t.F32)
	case Float64:
		return len(t.F64)
	case Int32, Int64, Int8, Uint8, Int16, Uint16, Uint32, Uint64:
		return len(t.I64)
	case Bool:
		return len(t.Bool)
	}
	return 0
}

// Check reports whether the data slice matches the dtype and shape.
func (t *Tensor) Check() error {
	if t == nil {
		return fmt.Errorf("tensor is nil")
	}
	if t.DType.Size() == 0 {
		return fmt.Errorf("tensor has unsupported dtype %v", t.DType)
	}
	if n := NumElements(t.Shape); n != t.Len() {
		return fmt.Errorf("tensor of shape %v holds %d %v values, want %d", t.Shape, t.Len(), t.DType, n)
	}
	return nil
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	c := &Tensor{DType: t.DType, Shape: append([]int{}, t.Shape...)}
	if t.F32 != nil {
		c.F32 = append([]float32{}, t.F32...)
	}
	if t.F64 != nil {
		c.F64 = append([]float64{}, t.F64...)
	}
	if t.I64 != nil {
		c.I64 = append([]int64{}, t.I64...)
	}
	if t.Bool != nil {
		c.Bool = append([]bool{}, t.Bool...)
	}
	return c
}

// Bytes returns the size of the data in bytes.
func (t *Tensor) Bytes() int { return t.Len() * t.DType.Size() }

// Equal reports whether two tensors have the same dtype, shape and bit-identical data.
func Equal(a, b *Tensor) bool {
	if a.DType != b.DType || !SameShape(a.Shape, b.Shape) || a.Len() != b.Len() {
		return false
	}
	for i := range a.F32 {
		if math.Float32bits(a.F32[i]) != math.Float32bits(b.F32[i]) {
			return false
		}
	}
	for i := range a.F64 {
		if math.Float64bits(a.F64[i]) != math.Float64bits(b.F64[i]) {
			return false
		}
	}
	for i := range a.I64 {
		if a.I64[i] != b.I64[i] {
			return false
		}
	}
	for i := range a.Bool {
		if a.Bool[i] != b.Bool[i] {
			return false
		}
	}
	return true
}

// SameShape reports whether two shapes are equal.
func SameShape(a, b []int) bool { return slices.Equal(a, b) }

// ShapeString formats a shape as "(2, 37, 512)".
func ShapeString(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Strides returns row-major strides in elements.
func Strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}
