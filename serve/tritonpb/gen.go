// Package tritonpb holds the Go code of Triton Inference Server's model configuration
// (model_config.proto of triton-inference-server/common, package inference; BSD-3-Clause,
// its licence at the head of the .proto), so that tests parse config.pbtxt with the messages
// Triton itself parses it with: protobuf text format goes by name, and a config this parses
// without unknown fields is one Triton reads. The generated file is committed, and
// TestGenerated checks it is what this line makes; regenerate it with
//
//	apt-get install -y protobuf-compiler   # protoc 3.21.12 on Debian 12
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go generate ./serve/tritonpb
package tritonpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative model_config.proto
