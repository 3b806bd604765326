// Package onnxpb holds the ONNX protobuf message types (IR version 8, as in ONNX 1.12),
// generated with protoc-gen-go from zoo_onnx.proto. The proto package is "zoo.onnx" rather
// than "onnx" so that it can be linked together with github.com/owulveryck/onnx-go, which
// registers its own copy of the ONNX messages under "onnx"; the wire format is identical.
//
// Regenerate (needs protoc 3.21 and protoc-gen-go v1.36.12 on PATH):
//
//	go generate ./onnx/onnxpb
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative zoo_onnx.proto
