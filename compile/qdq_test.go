package compile_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
)

// qdqModel writes a pre-quantized model the way quantization tools do:
// x[1,3,8,8] → Q/DQ → Conv(DQ(int8 W), per-channel) + Relu → Flatten →
// Q/DQ → MatMul(DQ(int8 W [512,10]), per-channel along axis 1) → y. With
// uint8 true the activations are quantized without zero points (uint8,
// asymmetric), which vouch refuses.
func qdqModel(uint8Act bool) []byte {
	r := rand.New(rand.NewPCG(11, 12))
	i8 := func(n int) []int32 {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(r.IntN(255) - 127)
		}
		return v
	}
	pos := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(s * (0.5 + r.Float64()))
		}
		return v
	}
	f := func(name string, dims []int64, v []float32) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(1), FloatData: v}
	}
	q := func(name string, dims []int64, v []int32) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(3), Int32Data: v}
	}
	attr := func(name string, v ...int64) *onnxpb.AttributeProto {
		if len(v) == 1 && name == "axis" {
			return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v[0])}
		}
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
	}
	node := func(name, op string, in, out []string, a ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Input: in, Output: out, Attribute: a}
	}
	dim := func(v int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
	}
	vi := func(name string, d ...*onnxpb.TensorShapeProto_Dimension) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1), Shape: &onnxpb.TensorShapeProto{Dim: d}}}}}
	}
	zp := []string{"zp"}
	if uint8Act {
		zp = nil
	}
	g := &onnxpb.GraphProto{
		Name: proto.String("qdq"),
		Node: []*onnxpb.NodeProto{
			node("qx", "QuantizeLinear", append([]string{"x", "sx"}, zp...), []string{"x_q"}),
			node("dqx", "DequantizeLinear", append([]string{"x_q", "sx"}, zp...), []string{"x_dq"}),
			node("dqw1", "DequantizeLinear", []string{"w1_q", "sw1"}, []string{"w1"}, attr("axis", 0)),
			node("conv", "Conv", []string{"x_dq", "w1", "b1"}, []string{"c"}, attr("pads", 1, 1, 1, 1)),
			node("relu", "Relu", []string{"c"}, []string{"h"}),
			node("flat", "Flatten", []string{"h"}, []string{"hf"}),
			node("qh", "QuantizeLinear", append([]string{"hf", "sh"}, zp...), []string{"h_q"}),
			node("dqh", "DequantizeLinear", append([]string{"h_q", "sh"}, zp...), []string{"h_dq"}),
			node("dqw2", "DequantizeLinear", []string{"w2_q", "sw2"}, []string{"w2"}, attr("axis", 1)),
			node("fc", "MatMul", []string{"h_dq", "w2"}, []string{"y"}),
		},
		Initializer: []*onnxpb.TensorProto{
			f("sx", nil, []float32{1.0 / 64}), f("sh", nil, []float32{1.0 / 16}),
			q("zp", nil, []int32{0}),
			q("w1_q", []int64{8, 3, 3, 3}, i8(8*27)), f("sw1", []int64{8}, pos(8, 0.004)), f("b1", []int64{8}, pos(8, 0.1)),
			q("w2_q", []int64{512, 10}, i8(5120)), f("sw2", []int64{10}, pos(10, 0.001)),
		},
		Input:  []*onnxpb.ValueInfoProto{vi("x", dim(1), dim(3), dim(8), dim(8))},
		Output: []*onnxpb.ValueInfoProto{vi("y", dim(1), dim(10))},
	}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(8), ProducerName: proto.String("vouch-test"),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}, Graph: g}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func buildQDQ(t *testing.T, src []byte, opts compile.Options) (*compile.Result, *buildlog.Log) {
	t.Helper()
	m, err := onnx.Decode(src, "")
	if err != nil {
		t.Fatal(err)
	}
	log := buildlog.New(nil)
	res, err := compile.Build(m, src, "qdq", "test", opts, builtin.Registry(), log)
	if err != nil {
		t.Fatal(err)
	}
	return res, log
}

// TestQDQImport: a pre-quantized model's Conv and MatMul become Q8 layers
// with the model's int8 weights and scales (no calibration data given, at
// the default precision), and the plan agrees with the ONNX model's fake
// quantization run in float32.
func TestQDQImport(t *testing.T) {
	src := qdqModel(false)
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	res, log := buildQDQ(t, src, opts)
	kinds := map[string]string{}
	for _, n := range res.Graph.Nodes {
		kinds[n.Name] = n.OpType
	}
	if kinds["conv"] != "Q8" || kinds["fc"] != "Q8" {
		t.Fatalf("layers %v: want conv and fc as Q8", kinds)
	}
	for _, n := range res.Graph.Nodes {
		if n.OpType == "QuantizeLinear" || n.OpType == "DequantizeLinear" {
			t.Errorf("plan keeps %s %s", n.OpType, n.Name)
		}
	}
	if !hasEvent(log, "import-qdq", "imported") || !hasEvent(log, "precision", "scale-from-model") {
		t.Errorf("build log lacks the import and the model's scales")
	}
	m, err := onnx.Decode(src, "")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	for trial := 0; trial < 5; trial++ {
		x := make([]float32, 3*64)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		feeds := map[string]*tensor.Tensor{"x": tensor.From(x, 1, 3, 8, 8)}
		want, err := ref.Run(feeds)
		if err != nil {
			t.Fatal(err)
		}
		_, got := runPlan(t, res.Plan, feeds)
		w, g := want["y"].Data.([]float32), got["y"].Data.([]float32)
		var amax, diff float64
		for i := range w {
			amax = math.Max(amax, math.Abs(float64(w[i])))
			diff = math.Max(diff, math.Abs(float64(w[i]-g[i])))
		}
		// The same int8 arithmetic: only rounding-boundary cases (x·(1/s)
		// against x/s) and float summation order differ.
		if diff > 0.02*amax {
			t.Errorf("trial %d: plan differs from the QDQ model by %g (max |y| %g)", trial, diff, amax)
		}
	}
}

// TestQDQRefusesUint8: uint8 (asymmetric) activations are refused with a
// logged reason; the layers compute in float32 on the dequantized weights
// and the plan still matches the model.
func TestQDQRefusesUint8(t *testing.T) {
	src := qdqModel(true)
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	res, log := buildQDQ(t, src, opts)
	for _, n := range res.Graph.Nodes {
		if n.OpType == "Q8" {
			t.Errorf("layer %s is Q8; uint8 activations must stay float32", n.Name)
		}
	}
	found := false
	for _, rec := range log.Records {
		if rec.Pass == "import-qdq" && rec.Event == "refused" {
			if why, _ := rec.Fields["reason"].(string); strings.Contains(why, "uint8") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no refusal naming uint8 in the build log")
	}
}

func hasEvent(log *buildlog.Log, pass, event string) bool {
	for _, rec := range log.Records {
		if rec.Pass == pass && rec.Event == event {
			return true
		}
	}
	return false
}
