// Package goldenjson decodes the tensors that the committed fixture scripts (testdata/gen_*.py)
// write as JSON objects {"dtype", "shape", "data"}, data flattened in row-major order as JSON
// numbers. It is for golden files, where float64 text is exact for every float32 and for
// integers below 2^53.
package goldenjson

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Tensor is one tensor as the fixture scripts write it.
type Tensor struct {
	DType string    `json:"dtype"`
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// dtypes are the dtypes a golden file may name, by their ONNX names.
var dtypes = map[string]tensor.DType{
	"float32": tensor.Float32, "int64": tensor.Int64, "int32": tensor.Int32,
	"int8": tensor.Int8, "uint8": tensor.Uint8, "bool": tensor.Bool,
}

// Decode returns the tensor j describes (a scalar when Shape is empty). It returns an error for
// a dtype other than float32, int64, int32, int8, uint8 or bool, or when the data does not fill
// the shape.
func (j Tensor) Decode() (*tensor.Tensor, error) {
	dt, ok := dtypes[j.DType]
	if !ok {
		return nil, fmt.Errorf("golden tensor: dtype %q is not one of float32, int64, int32, int8, uint8, bool", j.DType)
	}
	out, err := tensor.New(dt, j.Shape...)
	if err != nil {
		return nil, fmt.Errorf("golden tensor: %w", err)
	}
	if len(j.Data) != out.Len() {
		return nil, fmt.Errorf("golden tensor: %d values for shape %v", len(j.Data), j.Shape)
	}
	for i, v := range j.Data {
		switch {
		case out.F32 != nil:
			out.F32[i] = float32(v)
		case out.I64 != nil:
			out.I64[i] = int64(v)
		default:
			out.Bool[i] = v != 0
		}
	}
	return out, nil
}

// Encode returns t as a golden file holds it; it is Decode's inverse for the dtypes Decode takes.
func Encode(t *tensor.Tensor) Tensor {
	j := Tensor{DType: t.DType.String(), Shape: append([]int{}, t.Shape...), Data: make([]float64, 0, t.Len())}
	for _, v := range t.F32 {
		j.Data = append(j.Data, float64(v))
	}
	for _, v := range t.I64 {
		j.Data = append(j.Data, float64(v))
	}
	for _, v := range t.Bool {
		j.Data = append(j.Data, map[bool]float64{false: 0, true: 1}[v])
	}
	return j
}
