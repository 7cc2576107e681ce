// Package onnxpb holds the Go code generated from vouch's subset of the ONNX
// protobuf schema (onnx.proto in this directory). Do not edit onnx.pb.go by
// hand; run `go generate ./onnx/...`.
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative onnx.proto
