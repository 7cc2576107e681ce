package server_test

// An independent client of the Open Inference Protocol v2, written from the
// specification (REST: required_api.md and the binary tensor data
// extension; gRPC: grpc_predict_v2.proto) with nothing but net/http,
// encoding/json and the generated gRPC stubs. It drives a real server on
// loopback and checks the shape of every endpoint.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/server/oippb"
)

const bcDir = "../../shared/models/breast_cancer_mlp"

type records struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (r *records) Append(ctx context.Context, rec *audit.Record) (uint64, [32]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, *rec)
	return uint64(len(r.recs) - 1), [32]byte{0xaa}, nil
}

func (r *records) all() []audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Record(nil), r.recs...)
}

type fixture struct {
	url   string
	grpc  oippb.GRPCInferenceServiceClient
	audit *records
	input []float32 // the reference input, f32[8,30]
	want  []float32 // the reference output, f32[8,2]
}

func startServer(t *testing.T) *fixture {
	t.Helper()
	m, err := onnx.DecodeFile(bcDir + "/model.onnx")
	if err != nil {
		t.Skipf("shared model: %v", err)
	}
	p := &plan.Plan{Graph: m.Graph}
	r, err := server.NewPlanRunner(p, "sha256:"+strings.Repeat("ab", 32), "bc", server.PlanOptions{
		Name: "breast_cancer_mlp", Labels: []string{"malignant", "benign"},
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := &records{}
	s := server.New(server.Options{Version: "test", Appender: recs, MaxBodyBytes: 1 << 20, AnonymousRoles: []string{server.RoleAdmin},
		Pool: server.PoolOptions{Workers: 2, MaxBatch: 8, MaxDelay: 1000}})
	if err := s.AddModel(r); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
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
	in, _, err := onnx.DecodeTensorFile(bcDir + "/test_data_set_0/input_0.pb")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := onnx.DecodeTensorFile(bcDir + "/test_data_set_0/output_0.pb")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{url: hs.URL, grpc: oippb.NewGRPCInferenceServiceClient(conn), audit: recs,
		input: in.Data.([]float32), want: out.Data.([]float32)}
}

// do sends a request and decodes a JSON body (when there is one).
func do(t *testing.T, method, url string, hdr map[string]string, body []byte) (*http.Response, map[string]any, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var x any
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, url, err, raw)
		}
		v, _ = x.(map[string]any)
	}
	return resp, v, raw
}

func wantKeys(t *testing.T, what string, v map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := v[k]; !ok {
			t.Errorf("%s: no %q in %v", what, k, v)
		}
	}
}

func checkTensorMeta(t *testing.T, what string, v any, name, datatype string, shape []float64) {
	t.Helper()
	list, ok := v.([]any)
	if !ok || len(list) != 1 {
		t.Fatalf("%s: want one tensor, got %v", what, v)
	}
	m := list[0].(map[string]any)
	if m["name"] != name || m["datatype"] != datatype || fmt.Sprint(m["shape"]) != fmt.Sprint(shape) {
		t.Errorf("%s: got %v, want name %s datatype %s shape %v", what, m, name, datatype, shape)
	}
}

func TestSpecHTTPEndpoints(t *testing.T) {
	f := startServer(t)
	for _, path := range []string{"/v2/health/live", "/v2/health/ready"} {
		resp, _, _ := do(t, "GET", f.url+path, nil, nil)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
		}
	}
	resp, v, _ := do(t, "GET", f.url+"/v2", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("server metadata: %d", resp.StatusCode)
	}
	wantKeys(t, "server metadata", v, "name", "version", "extensions")
	if _, ok := v["extensions"].([]any); !ok {
		t.Errorf("extensions is not an array: %v", v["extensions"])
	}
	for _, path := range []string{"/v2/models/breast_cancer_mlp", "/v2/models/breast_cancer_mlp/versions/1"} {
		resp, v, _ := do(t, "GET", f.url+path, nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		wantKeys(t, path, v, "name", "versions", "platform", "inputs", "outputs")
		if v["name"] != "breast_cancer_mlp" || fmt.Sprint(v["versions"]) != "[1]" {
			t.Errorf("GET %s: %v", path, v)
		}
		checkTensorMeta(t, path+" inputs", v["inputs"], "features", "FP32", []float64{-1, 30})
		checkTensorMeta(t, path+" outputs", v["outputs"], "probabilities", "FP32", []float64{-1, 2})
	}
	for _, path := range []string{"/v2/models/breast_cancer_mlp/ready", "/v2/models/breast_cancer_mlp/versions/1/ready"} {
		resp, _, _ := do(t, "GET", f.url+path, nil, nil)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
		}
	}
	for _, path := range []string{"/v2/models/nope", "/v2/models/breast_cancer_mlp/versions/9", "/v2/models/nope/ready"} {
		resp, v, _ := do(t, "GET", f.url+path, nil, nil)
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
		if _, ok := v["error"].(string); !ok {
			t.Errorf("GET %s: error body %v", path, v)
		}
	}
	resp, _, raw := do(t, "GET", f.url+"/metrics", nil, nil)
	if resp.StatusCode != 200 || !bytes.Contains(raw, []byte("vouch_inflight_requests")) {
		t.Errorf("/metrics: %d %.200s", resp.StatusCode, raw)
	}
}

func jsonRequest(id string, shape []int, data any) []byte {
	b, _ := json.Marshal(map[string]any{
		"id":     id,
		"inputs": []any{map[string]any{"name": "features", "shape": shape, "datatype": "FP32", "data": data}},
	})
	return b
}

func checkOutputs(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-5 {
			t.Fatalf("%s: value %d is %v, reference %v", what, i, got[i], want[i])
		}
	}
}

func TestSpecHTTPInferJSON(t *testing.T) {
	f := startServer(t)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, path := range []string{"/v2/models/breast_cancer_mlp/infer", "/v2/models/breast_cancer_mlp/versions/1/infer"} {
		resp, v, raw := do(t, "POST", f.url+path, map[string]string{"Content-Type": "application/json", "traceparent": parent, "X-Request-Id": "req-7"},
			jsonRequest("abc-1", []int{8, 30}, f.input))
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
		}
		wantKeys(t, "infer response", v, "model_name", "model_version", "id", "outputs", "parameters")
		if v["model_name"] != "breast_cancer_mlp" || v["model_version"] != "1" || v["id"] != "abc-1" {
			t.Errorf("infer response header fields: %v", v)
		}
		tp := resp.Header.Get("traceparent")
		if !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || strings.Contains(tp, "00f067aa0ba902b7") {
			t.Errorf("traceparent not propagated with a new span: %q", tp)
		}
		if resp.Header.Get("Vouch-Trace-Id") != "4bf92f3577b34da6a3ce929d0e0e4736" || resp.Header.Get("X-Request-Id") != "req-7" {
			t.Errorf("trace id / request id headers: %v", resp.Header)
		}
		params := v["parameters"].(map[string]any)
		if params["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || params["output_label"] == nil || params["leaf_hash"] == nil {
			t.Errorf("response parameters: %v", params)
		}
		outs := v["outputs"].([]any)
		o := outs[0].(map[string]any)
		if o["name"] != "probabilities" || o["datatype"] != "FP32" || fmt.Sprint(o["shape"]) != "[8 2]" {
			t.Errorf("output tensor: %v", o)
		}
		var got []float32
		for _, x := range o["data"].([]any) {
			got = append(got, float32(x.(float64)))
		}
		checkOutputs(t, path, got, f.want)
	}
	// Nested data, as the spec allows, and a trace id generated when none
	// is sent.
	nested := make([][]float32, 8)
	for i := range nested {
		nested[i] = f.input[30*i : 30*i+30]
	}
	resp, v, raw := do(t, "POST", f.url+"/v2/models/breast_cancer_mlp/infer", nil, jsonRequest("", []int{8, 30}, nested))
	if resp.StatusCode != 200 {
		t.Fatalf("nested: %d %s", resp.StatusCode, raw)
	}
	if _, ok := v["id"]; ok {
		t.Errorf("id echoed though none was sent: %v", v["id"])
	}
	if id := resp.Header.Get("Vouch-Trace-Id"); len(id) != 32 || v["parameters"].(map[string]any)["trace_id"] != id {
		t.Errorf("generated trace id %q, body %v", id, v["parameters"])
	}
	recs := f.audit.all()
	if len(recs) != 3 {
		t.Fatalf("%d audit records, want 3", len(recs))
	}
	r := recs[0]
	if r.Status != "ok" || r.RequestID != "abc-1" || r.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || r.TraceParent != parent ||
		!strings.HasPrefix(r.InputDigest, "sha256:") || !strings.HasPrefix(r.OutputDigest, "sha256:") || r.OutputLabel == "" || r.Confidence == nil ||
		r.PlanDigest == "" || r.Model != "breast_cancer_mlp" || r.SourceAddr == "" {
		t.Errorf("audit record: %+v", r)
	}
}

func TestSpecHTTPInferBinary(t *testing.T) {
	f := startServer(t)
	hdr, _ := json.Marshal(map[string]any{
		"id":         "bin-1",
		"inputs":     []any{map[string]any{"name": "features", "shape": []int{8, 30}, "datatype": "FP32", "parameters": map[string]any{"binary_data_size": 8 * 30 * 4}}},
		"outputs":    []any{map[string]any{"name": "probabilities", "parameters": map[string]any{"binary_data": true}}},
		"parameters": map[string]any{},
	})
	body := append([]byte{}, hdr...)
	for _, x := range f.input {
		body = binary.LittleEndian.AppendUint32(body, math.Float32bits(x))
	}
	resp, _, raw := do(t, "POST", f.url+"/v2/models/breast_cancer_mlp/infer",
		map[string]string{"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": strconv.Itoa(len(hdr))}, body)
	if resp.StatusCode != 200 {
		t.Fatalf("binary infer: %d %s", resp.StatusCode, raw)
	}
	n, err := strconv.Atoi(resp.Header.Get("Inference-Header-Content-Length"))
	if err != nil || n > len(raw) {
		t.Fatalf("response Inference-Header-Content-Length %q", resp.Header.Get("Inference-Header-Content-Length"))
	}
	var v map[string]any
	if err := json.Unmarshal(raw[:n], &v); err != nil {
		t.Fatalf("response header JSON: %v", err)
	}
	o := v["outputs"].([]any)[0].(map[string]any)
	size := o["parameters"].(map[string]any)["binary_data_size"].(float64)
	if _, hasData := o["data"]; hasData || int(size) != 8*2*4 || len(raw)-n != int(size) || v["id"] != "bin-1" {
		t.Fatalf("binary response: %v, %d bytes after the header", v, len(raw)-n)
	}
	got := make([]float32, 16)
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[n+4*i:]))
	}
	checkOutputs(t, "binary", got, f.want)
}

func TestSpecHTTPErrors(t *testing.T) {
	f := startServer(t)
	url := f.url + "/v2/models/breast_cancer_mlp/infer"
	big := bytes.Repeat([]byte(" "), 2<<20)
	cases := []struct {
		name string
		url  string
		hdr  map[string]string
		body []byte
		code int
	}{
		{"unknown model", f.url + "/v2/models/nope/infer", nil, jsonRequest("", []int{1, 30}, make([]float32, 30)), 404},
		{"unknown version", f.url + "/v2/models/breast_cancer_mlp/versions/3/infer", nil, jsonRequest("", []int{1, 30}, make([]float32, 30)), 404},
		{"bad json", url, nil, []byte(`{"inputs": [`), 400},
		{"wrong dtype", url, nil, []byte(`{"inputs":[{"name":"features","shape":[1,30],"datatype":"INT64","data":[` + strings.Repeat("1,", 29) + `1]}]}`), 400},
		{"wrong shape", url, nil, jsonRequest("", []int{1, 29}, make([]float32, 29)), 400},
		{"data count", url, nil, jsonRequest("", []int{1, 30}, make([]float32, 3)), 400},
		{"missing input", url, nil, []byte(`{"inputs":[{"name":"other","shape":[1],"datatype":"FP32","data":[1]}]}`), 400},
		{"no inputs", url, nil, []byte(`{"inputs":[]}`), 400},
		{"unknown datatype", url, nil, []byte(`{"inputs":[{"name":"features","shape":[1],"datatype":"FP8","data":[1]}]}`), 400},
		{"unknown output", url, nil, []byte(`{"inputs":[{"name":"features","shape":[1,30],"datatype":"FP32","data":[` + strings.Repeat("1,", 29) + `1]}],"outputs":[{"name":"nope"}]}`), 400},
		{"oversized", url, nil, append(jsonRequest("", []int{1, 30}, make([]float32, 30)), big...), 413},
		{"garbage binary", url, map[string]string{"Inference-Header-Content-Length": "5000"}, []byte("\x00\x01garbage"), 400},
		{"binary size mismatch", url, map[string]string{"Inference-Header-Content-Length": "97"},
			append([]byte(`{"inputs":[{"name":"features","shape":[1,30],"datatype":"FP32","parameters":{"binary_data_size":12}}]}`), make([]byte, 12)...), 400},
		{"huge shape", url, nil, []byte(`{"inputs":[{"name":"features","shape":[4294967296,4294967296],"datatype":"FP32","data":[]}]}`), 400},
	}
	for _, c := range cases {
		before := len(f.audit.all())
		resp, v, raw := do(t, "POST", c.url, c.hdr, c.body)
		if resp.StatusCode != c.code {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.code, raw)
			continue
		}
		if msg, ok := v["error"].(string); !ok || msg == "" {
			t.Errorf("%s: error body %s", c.name, raw)
		}
		recs := f.audit.all()
		if len(recs) != before+1 || recs[len(recs)-1].Status != "error" || recs[len(recs)-1].Code != c.code {
			t.Errorf("%s: not recorded as an error in the audit trail", c.name)
		}
	}
	// The server stayed up.
	if resp, _, _ := do(t, "GET", f.url+"/v2/health/live", nil, nil); resp.StatusCode != 200 {
		t.Fatal("server down after bad input")
	}
	resp, _, _ := do(t, "GET", f.url+"/v2/nothing/here", nil, nil)
	if resp.StatusCode != 404 {
		t.Errorf("unknown endpoint: %d", resp.StatusCode)
	}
}

func TestSpecRepository(t *testing.T) {
	f := startServer(t)
	resp, _, raw := do(t, "POST", f.url+"/v2/repository/index", nil, nil)
	var idx []map[string]any
	if resp.StatusCode != 200 || json.Unmarshal(raw, &idx) != nil || len(idx) != 1 || idx[0]["name"] != "breast_cancer_mlp" || idx[0]["state"] != "READY" {
		t.Fatalf("index: %d %s", resp.StatusCode, raw)
	}
	if resp, _, _ := do(t, "POST", f.url+"/v2/repository/models/breast_cancer_mlp/unload", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("unload: %d", resp.StatusCode)
	}
	if resp, v, _ := do(t, "GET", f.url+"/v2/models/breast_cancer_mlp/ready", nil, nil); resp.StatusCode != 400 || v["ready"] != false {
		t.Errorf("ready after unload: %d %v", resp.StatusCode, v)
	}
	if resp, _, _ := do(t, "GET", f.url+"/v2/health/ready", nil, nil); resp.StatusCode != 400 {
		t.Errorf("server ready with a model unloaded: %d", resp.StatusCode)
	}
	if resp, _, _ := do(t, "POST", f.url+"/v2/models/breast_cancer_mlp/infer", nil, jsonRequest("", []int{1, 30}, make([]float32, 30))); resp.StatusCode != 503 {
		t.Errorf("infer on an unloaded model: %d, want 503", resp.StatusCode)
	}
	_, _, raw = do(t, "POST", f.url+"/v2/repository/index", nil, nil)
	if !bytes.Contains(raw, []byte(`"UNAVAILABLE"`)) {
		t.Errorf("index after unload: %s", raw)
	}
	if resp, _, _ := do(t, "POST", f.url+"/v2/repository/models/breast_cancer_mlp/load", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("load: %d", resp.StatusCode)
	}
	if resp, _, _ := do(t, "POST", f.url+"/v2/models/breast_cancer_mlp/infer", nil, jsonRequest("", []int{1, 30}, make([]float32, 30))); resp.StatusCode != 200 {
		t.Errorf("infer after load: %d", resp.StatusCode)
	}
	if resp, _, _ := do(t, "POST", f.url+"/v2/repository/models/nope/load", nil, nil); resp.StatusCode != 404 {
		t.Errorf("load of an unknown model: %d", resp.StatusCode)
	}
}

func TestSpecGRPC(t *testing.T) {
	f := startServer(t)
	ctx := context.Background()
	if r, err := f.grpc.ServerLive(ctx, &oippb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Errorf("ServerLive: %v %v", r, err)
	}
	if r, err := f.grpc.ServerReady(ctx, &oippb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Errorf("ServerReady: %v %v", r, err)
	}
	if r, err := f.grpc.ModelReady(ctx, &oippb.ModelReadyRequest{Name: "breast_cancer_mlp"}); err != nil || !r.Ready {
		t.Errorf("ModelReady: %v %v", r, err)
	}
	if r, err := f.grpc.ServerMetadata(ctx, &oippb.ServerMetadataRequest{}); err != nil || r.Name == "" || len(r.Extensions) == 0 {
		t.Errorf("ServerMetadata: %v %v", r, err)
	}
	md, err := f.grpc.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "breast_cancer_mlp", Version: "1"})
	if err != nil || md.Name != "breast_cancer_mlp" || md.Platform == "" || len(md.Inputs) != 1 || md.Inputs[0].Datatype != "FP32" ||
		fmt.Sprint(md.Inputs[0].Shape) != "[-1 30]" || fmt.Sprint(md.Outputs[0].Shape) != "[-1 2]" || fmt.Sprint(md.Versions) != "[1]" {
		t.Errorf("ModelMetadata: %v %v", md, err)
	}
	raw := make([]byte, 0, 4*len(f.input))
	for _, x := range f.input {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
	}
	var header metadata.MD
	tctx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	resp, err := f.grpc.ModelInfer(tctx, &oippb.ModelInferRequest{
		ModelName: "breast_cancer_mlp", Id: "g-1",
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{8, 30}}},
		RawInputContents: [][]byte{raw},
	}, grpc.Header(&header))
	if err != nil {
		t.Fatalf("ModelInfer raw: %v", err)
	}
	if resp.ModelName != "breast_cancer_mlp" || resp.ModelVersion != "1" || resp.Id != "g-1" || len(resp.Outputs) != 1 ||
		resp.Outputs[0].Datatype != "FP32" || fmt.Sprint(resp.Outputs[0].Shape) != "[8 2]" || len(resp.RawOutputContents) != 1 {
		t.Fatalf("ModelInfer response: %v", resp)
	}
	if resp.Parameters["trace_id"].GetStringParam() != "0af7651916cd43dd8448eb211c80319c" || first(header, "vouch-trace-id") != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("trace id: params %v header %v", resp.Parameters, header)
	}
	got := make([]float32, 16)
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(resp.RawOutputContents[0][4*i:]))
	}
	checkOutputs(t, "grpc raw", got, f.want)
	resp, err = f.grpc.ModelInfer(ctx, &oippb.ModelInferRequest{
		ModelName: "breast_cancer_mlp", ModelVersion: "1",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{8, 30},
			Contents: &oippb.InferTensorContents{Fp32Contents: f.input}}},
	})
	if err != nil {
		t.Fatalf("ModelInfer contents: %v", err)
	}
	if resp.Parameters["output_label"].GetStringParam() == "" {
		t.Errorf("no output_label: %v", resp.Parameters)
	}
	for _, c := range []struct {
		req  *oippb.ModelInferRequest
		code codes.Code
	}{
		{&oippb.ModelInferRequest{ModelName: "nope"}, codes.NotFound},
		{&oippb.ModelInferRequest{ModelName: "breast_cancer_mlp"}, codes.InvalidArgument},
		{&oippb.ModelInferRequest{ModelName: "breast_cancer_mlp", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{1, 30}}},
			RawInputContents: [][]byte{[]byte("garbage")}}, codes.InvalidArgument},
	} {
		if _, err := f.grpc.ModelInfer(ctx, c.req); status.Code(err) != c.code {
			t.Errorf("ModelInfer %v: %v, want %v", c.req, err, c.code)
		}
	}
	if _, err := f.grpc.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("ModelMetadata unknown: %v", err)
	}
	if n := len(f.audit.all()); n != 5 {
		t.Errorf("%d audit records for 5 gRPC inference calls", n)
	}
}

func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}
