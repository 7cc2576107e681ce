package onnx

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
	"google.golang.org/protobuf/proto"
)

func TestTensorRoundTrip(t *testing.T) {
	cases := []*tensor.Tensor{
		tensor.From([]float32{1, -2.5, float32(math.Inf(1))}, 3),
		tensor.From([]int64{math.MinInt64, 0, math.MaxInt64, 7}, 2, 2),
		tensor.From([]bool{true, false}, 2),
		tensor.From([]tensor.Half{tensor.ToHalf(1.5), tensor.ToHalf(-65504)}, 2),
		tensor.From([]string{"a", "ü"}, 2),
		tensor.Scalar(uint8(200)),
		tensor.From([]float64{}, 0, 3),
	}
	for _, c := range cases {
		b, err := EncodeTensor(c, "t")
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTensor(b)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if got.String() != c.String() {
			t.Fatalf("got %v want %v", got, c)
		}
		if c.DType != tensor.String && string(tensor.RawBytes(got)) != string(tensor.RawBytes(c)) {
			t.Fatalf("%v: data differs", c)
		}
	}
}

func TestTypedFields(t *testing.T) {
	tp := &onnxpb.TensorProto{Dims: []int64{2}, DataType: proto.Int32(int32(tensor.Float16)), Int32Data: []int32{0x3c00, 0xc000}}
	got, err := TensorFromProto(tp, "")
	if err != nil {
		t.Fatal(err)
	}
	h := got.Data.([]tensor.Half)
	if h[0].Float32() != 1 || h[1].Float32() != -2 {
		t.Fatalf("float16 via int32_data: %v", h)
	}
}

func TestHostileTensors(t *testing.T) {
	cases := []struct {
		name string
		tp   *onnxpb.TensorProto
		want string
	}{
		{"short raw", &onnxpb.TensorProto{Name: proto.String("w"), Dims: []int64{4}, DataType: proto.Int32(1), RawData: []byte{1, 2, 3}}, `tensor "w": float32[4] needs 16 bytes of raw data, has 3`},
		{"huge dims", &onnxpb.TensorProto{Dims: []int64{1 << 40, 1 << 40}, DataType: proto.Int32(1)}, "too many elements"},
		{"negative dim", &onnxpb.TensorProto{Dims: []int64{-1}, DataType: proto.Int32(1)}, "negative dimension"},
		{"typed count", &onnxpb.TensorProto{Dims: []int64{3}, DataType: proto.Int32(1), FloatData: []float32{1}}, "needs 3 values, float_data has 1"},
		{"bad dtype", &onnxpb.TensorProto{DataType: proto.Int32(99)}, "unsupported data type"},
		{"external without dir", &onnxpb.TensorProto{Dims: []int64{1}, DataType: proto.Int32(1), DataLocation: onnxpb.TensorProto_EXTERNAL.Enum()}, "external data is not allowed"},
	}
	for _, c := range cases {
		_, err := TensorFromProto(c.tp, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want error containing %q", c.name, err, c.want)
		}
	}
}

func TestExternalData(t *testing.T) {
	dir := t.TempDir()
	data := tensor.RawBytes(tensor.From([]float32{1, 2, 3, 4}, 4))
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), append([]byte{9, 9, 9, 9}, data...), 0o644); err != nil {
		t.Fatal(err)
	}
	ext := func(kv ...string) *onnxpb.TensorProto {
		tp := &onnxpb.TensorProto{Name: proto.String("w"), Dims: []int64{4}, DataType: proto.Int32(1), DataLocation: onnxpb.TensorProto_EXTERNAL.Enum()}
		for i := 0; i < len(kv); i += 2 {
			tp.ExternalData = append(tp.ExternalData, &onnxpb.StringStringEntryProto{Key: proto.String(kv[i]), Value: proto.String(kv[i+1])})
		}
		return tp
	}
	got, err := TensorFromProto(ext("location", "w.bin", "offset", "4", "length", "16"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Data.([]float32); v[3] != 4 {
		t.Fatalf("got %v", v)
	}
	for _, bad := range [][]string{
		{"location", "../w.bin"},
		{"location", "/etc/passwd"},
		{"location", "w.bin", "offset", "8"},
		{"location", "w.bin", "offset", "-1"},
		{"location", "missing.bin"},
	} {
		if _, err := TensorFromProto(ext(bad...), dir); err == nil {
			t.Errorf("external data %v accepted", bad)
		}
	}
}

func model(nodes []*onnxpb.NodeProto, inputs, outputs []string, inits ...*onnxpb.TensorProto) []byte {
	vi := func(names []string) []*onnxpb.ValueInfoProto {
		var out []*onnxpb.ValueInfoProto
		for _, n := range names {
			out = append(out, &onnxpb.ValueInfoProto{Name: proto.String(n), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1)}}}})
		}
		return out
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph:       &onnxpb.GraphProto{Name: proto.String("g"), Node: nodes, Input: vi(inputs), Output: vi(outputs), Initializer: inits},
	}
	b, _ := proto.Marshal(m)
	return b
}

func node(op string, in, out []string) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Input: in, Output: out}
}

func TestDecodeGraphErrors(t *testing.T) {
	w := &onnxpb.TensorProto{Name: proto.String("w"), Dims: []int64{1}, DataType: proto.Int32(1), FloatData: []float32{2}}
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"undefined input", model([]*onnxpb.NodeProto{node("Relu", []string{"nope"}, []string{"y"})}, []string{"x"}, []string{"y"}), `input "nope" is not defined`},
		{"cycle", model([]*onnxpb.NodeProto{node("Relu", []string{"b"}, []string{"a"}), node("Relu", []string{"a"}, []string{"b"})}, nil, []string{"a"}), "cycle"},
		{"double output", model([]*onnxpb.NodeProto{node("Relu", []string{"x"}, []string{"y"}), node("Relu", []string{"x"}, []string{"y"})}, []string{"x"}, []string{"y"}), "already produced"},
		{"missing output", model([]*onnxpb.NodeProto{node("Relu", []string{"x"}, []string{"y"})}, []string{"x"}, []string{"z"}), `output "z" is not produced`},
		{"garbage", []byte("not a model at all"), "decoding ModelProto"},
	}
	for _, c := range cases {
		_, err := Decode(c.b, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want error containing %q", c.name, err, c.want)
		}
	}
	// Nodes out of order are sorted; legacy initializer-inputs are not inputs.
	m, err := Decode(model([]*onnxpb.NodeProto{node("Relu", []string{"a"}, []string{"y"}), node("Mul", []string{"x", "w"}, []string{"a"})}, []string{"x", "w"}, []string{"y"}, w), "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Graph.Nodes[0].OpType != "Mul" {
		t.Errorf("nodes not sorted: first is %s", m.Graph.Nodes[0].OpType)
	}
	if len(m.Graph.Inputs) != 1 || m.Graph.Inputs[0].Name != "x" {
		t.Errorf("legacy initializer input kept as an input: %v", m.Graph.Inputs)
	}
}
