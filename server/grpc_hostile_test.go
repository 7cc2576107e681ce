package server

import (
	"context"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/vouchml/vouch/server/oippb"
)

// TestGRPCCodesAndLimits: gRPC does not advertise the repository extension
// it does not serve, counts calls under gRPC codes, and answers requests
// over its message limit or the tensor budget ResourceExhausted (issue 20
// A8, B).
func TestGRPCCodesAndLimits(t *testing.T) {
	s := New(Options{MaxGRPCBytes: 1 << 16, Limits: Limits{TensorBytes: 1 << 12}})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := s.NewGRPCServer()
	go g.Serve(s.Listener(ln))
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := oippb.NewGRPCInferenceServiceClient(conn)
	ctx := context.Background()
	md, err := c.ServerMetadata(ctx, &oippb.ServerMetadataRequest{})
	if err != nil || slices.Contains(md.Extensions, "model_repository") {
		t.Errorf("ServerMetadata: %v %v", md, err)
	}
	in := func(dt string, shape []int64, f []float32) *oippb.ModelInferRequest {
		return &oippb.ModelInferRequest{ModelName: "slow", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: dt, Shape: shape, Contents: &oippb.InferTensorContents{Fp32Contents: f}}}}
	}
	for _, tc := range []struct {
		name string
		req  *oippb.ModelInferRequest
		code codes.Code
	}{
		{"served", in("FP32", []int64{1, 2}, []float32{1, 2}), codes.OK},
		{"unknown datatype", in(strings.Repeat("Z", 70<<10)[:1000], []int64{1, 2}, []float32{1, 2}), codes.InvalidArgument},
		{"over the message limit", in("FP32", []int64{1, 20000}, make([]float32, 20000)), codes.ResourceExhausted},
		{"over the tensor budget", in("FP32", []int64{1, 2000}, make([]float32, 2000)), codes.ResourceExhausted},
	} {
		_, err := c.ModelInfer(ctx, tc.req)
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	if v := metricValue(t, hs.URL, `vouch_requests_total{code="InvalidArgument",model="slow",protocol="grpc"}`); v != "1" {
		t.Errorf("gRPC InvalidArgument counted %q times", v)
	}
	if v := metricValue(t, hs.URL, `vouch_requests_total{code="ResourceExhausted",model="slow",protocol="grpc"}`); v != "1" {
		t.Errorf("gRPC ResourceExhausted (budget) counted %q times", v)
	}
}
