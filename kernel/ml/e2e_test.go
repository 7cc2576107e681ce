package ml_test

import (
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/ml"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
	"google.golang.org/protobuf/proto"
)

func attrT(tb testing.TB, name string, t *tensor.Tensor) *onnxpb.AttributeProto {
	b, err := onnx.EncodeTensor(t, "")
	if err != nil {
		tb.Fatal(err)
	}
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(b, &tp); err != nil {
		tb.Fatal(err)
	}
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: &tp}
}

func attrFs(name string, v ...float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: v}
}

func attrIs(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func attrSs(name string, v ...string) *onnxpb.AttributeProto {
	a := &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRINGS.Enum()}
	for _, s := range v {
		a.Strings = append(a.Strings, []byte(s))
	}
	return a
}

func attrS(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

func tensorVI(name string, dt tensor.DType, dims ...any) *onnxpb.ValueInfoProto {
	sh := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		switch v := d.(type) {
		case int:
			sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(v)}})
		case string:
			sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: v}})
		}
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt)), Shape: sh}}}}
}

func mlNode(op string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Domain: proto.String("ai.onnx.ml"), Input: in, Output: out, Attribute: attrs}
}

func mlModel(g *onnxpb.GraphProto) []byte {
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g, OpsetImport: []*onnxpb.OperatorSetIdProto{
		{Domain: proto.String(""), Version: proto.Int64(15)}, {Domain: proto.String("ai.onnx.ml"), Version: proto.Int64(4)}}}
	b, err := proto.Marshal(mp)
	if err != nil {
		panic(err)
	}
	return b
}

// runBoth runs a model straight from the ONNX graph and through a build,
// the plan's encoding and decoding, as a server would: both must give the
// same outputs.
func runBoth(t *testing.T, src []byte, feeds map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	t.Helper()
	m, err := onnx.Decode(src, "")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	direct, err := ex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	m, _ = onnx.Decode(src, "")
	res, err := compile.Build(m, src, "ml", "test", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	ex, err = exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	planned, err := ex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range direct {
		if !sameValue(v, planned[k]) {
			t.Errorf("output %s: %v directly, %v through the plan", k, v.Data, planned[k])
		}
	}
	return planned
}

func sameValue(a, b *tensor.Tensor) bool {
	if a == nil || b == nil || a.DType != b.DType || a.String() != b.String() {
		return false
	}
	switch a.DType {
	case tensor.Sequence:
		if len(a.Elems()) != len(b.Elems()) {
			return false
		}
		for i := range a.Elems() {
			if !sameValue(a.Elems()[i], b.Elems()[i]) {
				return false
			}
		}
		return true
	case tensor.Map:
		ma, _ := a.MapOf()
		mb, _ := b.MapOf()
		return sameValue(ma.Keys, mb.Keys) && sameValue(ma.Values, mb.Values)
	case tensor.String:
		for i, s := range a.Data.([]string) {
			if b.Data.([]string)[i] != s {
				return false
			}
		}
		return true
	}
	return string(tensor.RawBytes(a)) == string(tensor.RawBytes(b))
}

// TestStringsAndMapsEndToEnd: string inputs, string attributes and
// string tensor attributes, a classifier with string labels and a ZipMap
// output, through ONNX decoding, the compiler and the plan format.
func TestStringsAndMapsEndToEnd(t *testing.T) {
	g := &onnxpb.GraphProto{
		Name:  proto.String("strings"),
		Input: []*onnxpb.ValueInfoProto{tensorVI("color", tensor.String, "N"), tensorVI("X", tensor.Float32, "N", 2)},
		Output: []*onnxpb.ValueInfoProto{tensorVI("code", tensor.Float32, "N"), tensorVI("label", tensor.String, "N"),
			{Name: proto.String("zipped"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_SequenceType{SequenceType: &onnxpb.TypeProto_Sequence{
				ElemType: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_MapType{MapType: &onnxpb.TypeProto_Map{KeyType: proto.Int32(int32(tensor.String)),
					ValueType: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1)}}}}}}}}}}},
		Node: []*onnxpb.NodeProto{
			mlNode("LabelEncoder", []string{"color"}, []string{"code"},
				attrT(t, "keys_tensor", tensor.From([]string{"red", "green", "blue"}, 3)),
				attrT(t, "values_tensor", tensor.From([]float32{1, 2, 3}, 3)),
				attrT(t, "default_tensor", tensor.From([]float32{-1}, 1))),
			mlNode("LinearClassifier", []string{"X"}, []string{"label", "probs"},
				attrFs("coefficients", 1, 0, 0, 1, -1, -1), attrFs("intercepts", 0, 0, 0),
				attrSs("classlabels_strings", "low", "mid", "high"), attrS("post_transform", "SOFTMAX")),
			mlNode("ZipMap", []string{"probs"}, []string{"zipped"}, attrSs("classlabels_strings", "low", "mid", "high")),
		},
	}
	out := runBoth(t, mlModel(g), map[string]*tensor.Tensor{
		"color": tensor.From([]string{"blue", "mauve"}, 2),
		"X":     tensor.From([]float32{2, 1, -1, -2}, 2, 2),
	})
	if c := out["code"].Data.([]float32); c[0] != 3 || c[1] != -1 {
		t.Errorf("code %v", c)
	}
	if l := out["label"].Data.([]string); l[0] != "low" || l[1] != "high" {
		t.Errorf("labels %v", l)
	}
	z := out["zipped"]
	if z == nil || z.DType != tensor.Sequence || len(z.Elems()) != 2 {
		t.Fatalf("zipped %v", z)
	}
	m, ok := z.Elems()[1].MapOf()
	if !ok || m.Keys.Data.([]string)[2] != "high" || m.Values.Data.([]float32)[2] < 0.9 {
		t.Errorf("zipped[1] %v %v", m.Keys, m.Values)
	}
}

// TestDictVectorizerEndToEnd: a map input, from the graph's declared
// map(int64, float) type to a regression.
func TestDictVectorizerEndToEnd(t *testing.T) {
	g := &onnxpb.GraphProto{
		Name: proto.String("dict"),
		Input: []*onnxpb.ValueInfoProto{{Name: proto.String("features"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_MapType{
			MapType: &onnxpb.TypeProto_Map{KeyType: proto.Int32(int32(tensor.Int64)),
				ValueType: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1)}}}}}}}},
		Output: []*onnxpb.ValueInfoProto{tensorVI("y", tensor.Float32, 1, 1)},
		Node: []*onnxpb.NodeProto{
			mlNode("DictVectorizer", []string{"features"}, []string{"v"}, attrIs("int64_vocabulary", 10, 20, 30)),
			mlNode("LinearRegressor", []string{"v"}, []string{"y"}, attrFs("coefficients", 1, 10, 100), attrFs("intercepts", 0.5)),
		},
	}
	m, err := onnx.Decode(mlModel(g), "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Graph.Inputs[0].Type.DType != tensor.Map {
		t.Fatalf("the map input decodes as %v", m.Graph.Inputs[0].Type)
	}
	feeds := map[string]*tensor.Tensor{"features": tensor.NewMap(tensor.From([]int64{30, 10, 99}, 3), tensor.From([]float32{2, 3, 7}, 3))}
	out := runBoth(t, mlModel(g), feeds)
	if y := out["y"].Data.([]float32); y[0] != 203.5 {
		t.Errorf("y = %v, want 203.5", y)
	}
}

// TestUnzipOutputs: a final ZipMap rewritten by UnzipOutputs gives the
// probabilities tensor the ZipMap would have zipped, bit for bit.
func TestUnzipOutputs(t *testing.T) {
	g := &onnxpb.GraphProto{
		Name:   proto.String("unzip"),
		Input:  []*onnxpb.ValueInfoProto{tensorVI("X", tensor.Float32, "N", 2)},
		Output: []*onnxpb.ValueInfoProto{tensorVI("label", tensor.Int64, "N"), {Name: proto.String("zipped")}},
		Node: []*onnxpb.NodeProto{
			mlNode("LinearClassifier", []string{"X"}, []string{"label", "probs"},
				attrFs("coefficients", 1, 0, 0, 1), attrIs("classlabels_ints", 4, 9), attrS("post_transform", "SOFTMAX")),
			mlNode("ZipMap", []string{"probs"}, []string{"zipped"}, attrIs("classlabels_int64s", 4, 9)),
		},
	}
	feeds := map[string]*tensor.Tensor{"X": tensor.From([]float32{2, 1, -1, -2, 0.5, 0.25}, 3, 2)}
	zipped := runBoth(t, mlModel(g), feeds)["zipped"]
	m, err := onnx.Decode(mlModel(g), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := ml.UnzipOutputs(m.Graph); len(got) != 1 || got[0] != "zipped" {
		t.Fatalf("UnzipOutputs rewrote %v", got)
	}
	ex, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	probs := out["zipped"]
	if probs.DType != tensor.Float32 || probs.String() != "float32[3 2]" {
		t.Fatalf("unzipped output %v", probs)
	}
	for r, e := range zipped.Elems() {
		mp, _ := e.MapOf()
		for c, v := range mp.Values.Data.([]float32) {
			if probs.Data.([]float32)[r*2+c] != v {
				t.Errorf("row %d class %d: %v unzipped, %v zipped", r, c, probs.Data.([]float32)[r*2+c], v)
			}
		}
	}
}
