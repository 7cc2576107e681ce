package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/server/oippb"
)

// TestGRPCDecisionsAndReasons: a gRPC response carries every row's
// decision and, when the request asks (parameter explain, a bool), the
// reasons — the same JSON as the HTTP response's parameters — and the
// record holds them either way.
func TestGRPCDecisionsAndReasons(t *testing.T) {
	m, err := onnx.DecodeFile(bcDir + "/model.onnx")
	if err != nil {
		t.Skipf("shared model: %v", err)
	}
	in, _, err := onnx.DecodeTensorFile(bcDir + "/test_data_set_0/input_0.pb")
	if err != nil {
		t.Fatal(err)
	}
	x := in.Data.([]float32)
	var feats []string
	for j := range 30 {
		feats = append(feats, fmt.Sprintf("f%02d", j))
	}
	r, err := server.NewPlanRunner(&plan.Plan{Graph: m.Graph}, "sha256:"+strings.Repeat("cd", 32), "bc", server.PlanOptions{
		Name: "bc", Labels: []string{"malignant", "benign"},
		Explain: &explain.Data{Features: feats, Background: x[:4*30]}, // KernelSHAP over four rows
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := &records{}
	s := server.New(server.Options{Version: "test", Appender: recs, AnonymousRoles: []string{server.RoleAdmin}})
	if err := s.AddModel(r); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.NewGRPCServer()
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := oippb.NewGRPCInferenceServiceClient(conn)
	req := func(params map[string]*oippb.InferParameter) *oippb.ModelInferRequest {
		return &oippb.ModelInferRequest{ModelName: "bc", Parameters: params,
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{3, 30},
				Contents: &oippb.InferTensorContents{Fp32Contents: x[:3*30]}}}}
	}
	ctx := context.Background()
	plain, err := c.ModelInfer(ctx, req(nil))
	if err != nil {
		t.Fatal(err)
	}
	var ds []struct {
		Label      string   `json:"label"`
		Confidence *float64 `json:"confidence"`
	}
	if err := json.Unmarshal([]byte(plain.Parameters["decisions"].GetStringParam()), &ds); err != nil || len(ds) != 3 || ds[0].Label == "" || ds[0].Confidence == nil {
		t.Fatalf("decisions %v: %v", plain.Parameters, err)
	}
	if _, ok := plain.Parameters["explanation"]; ok {
		t.Error("reasons returned unasked")
	}
	asked, err := c.ModelInfer(ctx, req(map[string]*oippb.InferParameter{"explain": {ParameterChoice: &oippb.InferParameter_BoolParam{BoolParam: true}}}))
	if err != nil {
		t.Fatal(err)
	}
	var x2 struct {
		Method   string `json:"method"`
		Estimate bool   `json:"estimate"`
		Rows     []struct {
			Reasons []struct {
				Feature string `json:"feature"`
			} `json:"reasons"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(asked.Parameters["explanation"].GetStringParam()), &x2); err != nil || x2.Method != explain.KernelSHAP ||
		!x2.Estimate || len(x2.Rows) != 3 || len(x2.Rows[2].Reasons) == 0 || !strings.HasPrefix(x2.Rows[2].Reasons[0].Feature, "f") {
		t.Fatalf("explanation %v: %v", asked.Parameters["explanation"], err)
	}
	all := recs.all()
	if len(all) != 2 || all[0].Explanation == nil || all[0].Rows != 3 || len(all[0].Decisions) != 3 ||
		all[0].Explanation.Digest != all[1].Explanation.Digest {
		t.Fatalf("records: %+v", all)
	}
	_, err = c.ModelInfer(ctx, req(map[string]*oippb.InferParameter{"explain": {ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "yes"}}}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "explain must be a bool") {
		t.Fatalf("explain as a string: %v", err)
	}
}
