// Package inferencepb holds the generated gRPC code of the Open Inference Protocol (KServe
// v2, grpc_predict_v2.proto). The generated files are committed, and TestGenerated checks
// they are what the line below makes; regenerate them with
//
//	apt-get install -y protobuf-compiler   # protoc 3.21.12 on Debian 12
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
//	go generate ./serve/inferencepb
package inferencepb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_predict_v2.proto
