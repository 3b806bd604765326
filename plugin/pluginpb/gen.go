// Package pluginpb holds the generated gRPC code of zoo's variant plugin protocol
// (variant.proto). Do not edit the *.pb.go files; change variant.proto and regenerate:
//
//	apt-get install -y protobuf-compiler   # protoc 3.21.12 on Debian 12
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
//	go generate ./plugin/pluginpb
package pluginpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative variant.proto
