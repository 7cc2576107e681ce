package server

import (
	"encoding/binary"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/server/oippb"
)

func jsonSeeds() []string {
	return []string{
		`{"id":"1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]}]}`,
		`{"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]}]}`,
		`{"inputs":[{"name":"x","shape":[3],"datatype":"INT8","data":[1,-128,127]}]}`,
		`{"inputs":[{"name":"x","shape":[2],"datatype":"BYTES","data":["a","bc"]}]}`,
		`{"inputs":[{"name":"x","shape":[2],"datatype":"BOOL","data":[true,false]}]}`,
		`{"inputs":[{"name":"x","shape":[1],"datatype":"FP16","data":[1.5]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`,
		`{"inputs":[{"name":"x","shape":[1],"datatype":"UINT64","data":[18446744073709551615]}],"parameters":{"binary_data_output":true}}`,
		`{"inputs":[{"name":"x","shape":[0,4],"datatype":"FP64","data":[]}]}`,
		`{"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]}`,
		`[[[[[[[[`, `{}`, `null`,
	}
}

// The JSON decoder never panics and whatever it accepts is a valid tensor
// set that the digest can encode.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body, -1, Limits{})
		if err != nil {
			return
		}
		for name, x := range req.Inputs {
			if err := x.Check(); err != nil {
				t.Fatalf("input %q accepted but invalid: %v", name, err)
			}
		}
		if _, _, err := audit.InputDigest(req.Inputs); err != nil {
			t.Fatalf("accepted inputs have no digest: %v", err)
		}
	})
}

// The binary tensor extension decoder: a JSON header of hdrLen bytes, then
// raw tensor data.
func FuzzDecodeBinary(f *testing.F) {
	hdr := `{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}},` +
		`{"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":7}}]}`
	body := []byte(hdr)
	body = binary.LittleEndian.AppendUint32(body, math.Float32bits(1))
	body = binary.LittleEndian.AppendUint32(body, math.Float32bits(-2))
	body = binary.LittleEndian.AppendUint32(body, 3)
	body = append(body, "abc"...)
	f.Add(body, len(hdr))
	f.Add(body, len(hdr)+3)
	f.Add([]byte("garbage"), 3)
	f.Add([]byte(`{"inputs":[{"name":"x","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}]}`+"\x01\x00"), 86)
	f.Fuzz(func(t *testing.T, body []byte, hdrLen int) {
		if hdrLen < -1 {
			hdrLen = -1
		}
		req, err := decodeRequest(body, hdrLen, Limits{})
		if err != nil {
			return
		}
		for name, x := range req.Inputs {
			if err := x.Check(); err != nil {
				t.Fatalf("input %q accepted but invalid: %v", name, err)
			}
		}
		if _, _, err := audit.InputDigest(req.Inputs); err != nil {
			t.Fatalf("accepted inputs have no digest: %v", err)
		}
	})
}

// The gRPC request decoder over arbitrary protobuf bytes.
func FuzzDecodeProto(f *testing.F) {
	seed, _ := proto.Marshal(&oippb.ModelInferRequest{ModelName: "m", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 2}}}, RawInputContents: [][]byte{make([]byte, 8)}})
	f.Add(seed)
	seed, _ = proto.Marshal(&oippb.ModelInferRequest{ModelName: "m", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "INT8", Shape: []int64{2}, Contents: &oippb.InferTensorContents{IntContents: []int32{1, 300}}}}})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		var pr oippb.ModelInferRequest
		if proto.Unmarshal(b, &pr) != nil {
			return
		}
		req, err := decodeProto(&pr, Limits{})
		if err != nil {
			return
		}
		for name, x := range req.Inputs {
			if err := x.Check(); err != nil {
				t.Fatalf("input %q accepted but invalid: %v", name, err)
			}
		}
	})
}
