package ort

import "github.com/zoo-dev/zoo/zoo/tensor"

// SessionOptions tune a session. The zero value uses ONNX Runtime's defaults.
type SessionOptions struct {
	// Threads caps intra-op threads; 0 lets ONNX Runtime choose (one per core).
	Threads int
}

// IOInfo describes a model input or output as ONNX Runtime sees it. Dims are -1 where
// symbolic; DType is tensor.Invalid for element types zoo does not compute with.
type IOInfo struct {
	Name  string
	DType tensor.DType
	Dims  []int64
}
