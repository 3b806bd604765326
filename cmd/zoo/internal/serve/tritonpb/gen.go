// Package tritonpb holds generated code for the part of Triton's model configuration that
// zoo writes (model_config.proto), so that tests parse config.pbtxt as Triton does. The
// generated file is committed; regenerate it with
//
//	apt-get install -y protobuf-compiler   # protoc 3.21.12 on Debian 12
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go generate ./cmd/zoo/internal/serve/tritonpb
package tritonpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative model_config.proto
