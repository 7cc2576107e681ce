// Package oippb holds the Go code generated from the Open Inference Protocol
// (KServe v2) gRPC definition, grpc_predict_v2.proto in this directory, which
// was written from the specification. Do not edit the .pb.go files by hand;
// run `go generate ./server/oippb`.
package oippb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_predict_v2.proto
