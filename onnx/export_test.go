package onnx

import (
	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// DecodeTensorProto decodes a serialised TensorProto (a test_data_set's input_K.pb or
// output_K.pb) as Import decodes an initializer.
func DecodeTensorProto(data []byte) (*tensor.Tensor, error) {
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(data, &tp); err != nil {
		return nil, err
	}
	return decodeTensor(&tp)
}
