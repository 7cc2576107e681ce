package server_test

import (
	"encoding/binary"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/tensor"
	"google.golang.org/protobuf/proto"
)

// stringServer serves a model whose input is BYTES: ai.onnx.ml
// LabelEncoders map a string color[N] to its int64 code[N] and to a
// string name[N].
func stringServer(t *testing.T) string {
	t.Helper()
	vi := func(name string, dt tensor.DType) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt)), Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}}}}}}}}
	}
	strs := func(name string, v ...string) *onnxpb.AttributeProto {
		a := &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRINGS.Enum()}
		for _, s := range v {
			a.Strings = append(a.Strings, []byte(s))
		}
		return a
	}
	keys := strs("keys_strings", "red", "green", "blue")
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{
		{Domain: proto.String(""), Version: proto.Int64(15)}, {Domain: proto.String("ai.onnx.ml"), Version: proto.Int64(2)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("colors"),
			Input:  []*onnxpb.ValueInfoProto{vi("color", tensor.String)},
			Output: []*onnxpb.ValueInfoProto{vi("code", tensor.Int64), vi("name", tensor.String)},
			Node: []*onnxpb.NodeProto{
				{OpType: proto.String("LabelEncoder"), Domain: proto.String("ai.onnx.ml"), Input: []string{"color"}, Output: []string{"code"},
					Attribute: []*onnxpb.AttributeProto{keys, {Name: proto.String("values_int64s"), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: []int64{0, 1, 2}}}},
				{OpType: proto.String("LabelEncoder"), Domain: proto.String("ai.onnx.ml"), Input: []string{"color"}, Output: []string{"name"},
					Attribute: []*onnxpb.AttributeProto{keys, strs("values_strings", "rouge", "vert", "bleu")}},
			}}}
	b, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(b, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := server.NewPlanRunner(&plan.Plan{Graph: m.Graph}, "sha256:"+strings.Repeat("cd", 32), "colors", server.PlanOptions{Name: "colors"})
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Options{Version: "test", Appender: &records{}, MaxBodyBytes: 1 << 20,
		Pool: server.PoolOptions{Workers: 1, MaxBatch: 8, MaxDelay: 1000}})
	if err := s.AddModel(r); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL + "/v2/models/colors/infer"
}

// checkColors checks the two outputs of the colors model for the input
// "blue", "héllo", "red".
func checkColors(t *testing.T, v map[string]any) {
	t.Helper()
	outs, _ := v["outputs"].([]any)
	got := map[string]string{}
	for _, o := range outs {
		m := o.(map[string]any)
		b, _ := json.Marshal(m["data"])
		got[m["name"].(string)] = m["datatype"].(string) + " " + string(b)
	}
	if got["code"] != "INT64 [2,-1,0]" || got["name"] != `BYTES ["bleu","_Unused","rouge"]` {
		t.Errorf("outputs %v (response %v)", got, v)
	}
}

// TestBytesJSON: a BYTES input in OIP's JSON form reaches the model and
// string outputs come back as BYTES.
func TestBytesJSON(t *testing.T) {
	url := stringServer(t)
	body := `{"inputs":[{"name":"color","shape":[3],"datatype":"BYTES","data":["blue","héllo","red"]}]}`
	resp, v, raw := do(t, "POST", url, map[string]string{"Content-Type": "application/json"}, []byte(body))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	checkColors(t, v)
}

// TestBytesBinary: the same input in the binary tensor data extension,
// each element a u32 little-endian length and its bytes.
func TestBytesBinary(t *testing.T) {
	url := stringServer(t)
	var data []byte
	for _, s := range []string{"blue", "héllo", "red"} {
		data = binary.LittleEndian.AppendUint32(data, uint32(len(s)))
		data = append(data, s...)
	}
	hdr, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "color", "shape": []int{3}, "datatype": "BYTES",
		"parameters": map[string]any{"binary_data_size": len(data)}}}})
	resp, _, raw := do(t, "POST", url, map[string]string{"Content-Type": "application/octet-stream",
		"Inference-Header-Content-Length": strconv.Itoa(len(hdr))}, append(hdr, data...))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	n, err := strconv.Atoi(resp.Header.Get("Inference-Header-Content-Length"))
	if err != nil {
		n = len(raw)
	}
	var v map[string]any
	if err := json.Unmarshal(raw[:n], &v); err != nil {
		t.Fatalf("response: %v: %s", err, raw)
	}
	checkColors(t, v)
	// A BYTES element longer than the data is refused.
	bad := binary.LittleEndian.AppendUint32(nil, 1000)
	hdr, _ = json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "color", "shape": []int{1}, "datatype": "BYTES",
		"parameters": map[string]any{"binary_data_size": len(bad)}}}})
	resp, _, raw = do(t, "POST", url, map[string]string{"Content-Type": "application/octet-stream",
		"Inference-Header-Content-Length": strconv.Itoa(len(hdr))}, append(hdr, bad...))
	if resp.StatusCode != 400 || !strings.Contains(string(raw), "BYTES") {
		t.Errorf("oversized BYTES element: %d %s", resp.StatusCode, raw)
	}
}
