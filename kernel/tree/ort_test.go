//go:build ort

package tree

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/proto"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
)

// encodeNode writes a one-node ONNX model around n: input X f32[N, feats],
// n's outputs as float32 (labels int64).
func encodeNode(t *testing.T, n *ir.Node, feats int) []byte {
	t.Helper()
	np := &onnxpb.NodeProto{OpType: proto.String(n.OpType), Domain: proto.String(n.Domain), Input: []string{"X"}, Output: n.Outputs}
	names := make([]string, 0, len(n.Attrs))
	for k := range n.Attrs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		a := n.Attrs[k]
		ap := &onnxpb.AttributeProto{Name: proto.String(k)}
		switch a.Kind {
		case ir.AttrInts:
			ap.Type, ap.Ints = onnxpb.AttributeProto_INTS.Enum(), a.Ints
		case ir.AttrFloats:
			ap.Type, ap.Floats = onnxpb.AttributeProto_FLOATS.Enum(), a.Floats
		case ir.AttrStrings:
			ap.Type = onnxpb.AttributeProto_STRINGS.Enum()
			for _, s := range a.Strings {
				ap.Strings = append(ap.Strings, []byte(s))
			}
		case ir.AttrString:
			ap.Type, ap.S = onnxpb.AttributeProto_STRING.Enum(), []byte(a.S)
		case ir.AttrInt:
			ap.Type, ap.I = onnxpb.AttributeProto_INT.Enum(), proto.Int64(a.I)
		case ir.AttrTensor:
			b, err := onnx.EncodeTensor(a.T, k)
			if err != nil {
				t.Fatal(err)
			}
			tp := &onnxpb.TensorProto{}
			if err := proto.Unmarshal(b, tp); err != nil {
				t.Fatal(err)
			}
			ap.Type, ap.T = onnxpb.AttributeProto_TENSOR.Enum(), tp
		default:
			t.Fatalf("attribute %s: kind %v", k, a.Kind)
		}
		np.Attribute = append(np.Attribute, ap)
	}
	vi := func(name string, et int32, dims ...int64) *onnxpb.ValueInfoProto {
		var d []*onnxpb.TensorShapeProto_Dimension
		d = append(d, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}})
		for _, v := range dims {
			d = append(d, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}})
		}
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(et), Shape: &onnxpb.TensorShapeProto{Dim: d}}}}}
	}
	var outs []*onnxpb.ValueInfoProto
	for i, o := range n.Outputs {
		if n.OpType == "TreeEnsembleClassifier" && i == 0 {
			outs = append(outs, vi(o, 7))
		} else {
			outs = append(outs, &onnxpb.ValueInfoProto{Name: proto.String(o)})
		}
	}
	mlv := int64(3)
	if n.OpType == "TreeEnsemble" {
		mlv = 5
	}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(10),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(21)}, {Domain: proto.String(Domain), Version: proto.Int64(mlv)}},
		Graph:       &onnxpb.GraphProto{Name: proto.String("g"), Node: []*onnxpb.NodeProto{np}, Input: []*onnxpb.ValueInfoProto{vi("X", 1, int64(feats))}, Output: outs}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ortLib(t *testing.T) {
	lib := os.Getenv("VOUCH_ORT_LIB")
	if lib == "" {
		lib = "../../.cache/ort/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"
	}
	if _, err := os.Stat(lib); err != nil {
		if os.Getenv("VOUCH_CI") == "1" {
			t.Fatalf("ONNX Runtime library %s: %v (run scripts/fetch-ort.sh)", lib, err)
		}
		t.Skipf("ONNX Runtime library %s: %v (run scripts/fetch-ort.sh)", lib, err)
	}
	if !ort.IsInitialized() {
		ort.SetSharedLibraryPath(lib)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			t.Fatal(err)
		}
	}
}

// runORT runs n in ONNX Runtime on x and returns its outputs as float64s.
func runORT(t *testing.T, n *ir.Node, x *tensor.Tensor) [][]float64 {
	t.Helper()
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(encodeNode(t, n, x.Shape[1]), []string{"X"}, n.Outputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	in, err := ort.NewTensor(ort.NewShape(int64(x.Shape[0]), int64(x.Shape[1])), x.Data.([]float32))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Destroy()
	outs := make([]ort.Value, len(n.Outputs))
	if err := sess.Run([]ort.Value{in}, outs); err != nil {
		t.Fatal(err)
	}
	var res [][]float64
	for _, o := range outs {
		var v []float64
		switch tt := o.(type) {
		case *ort.Tensor[float32]:
			for _, f := range tt.GetData() {
				v = append(v, float64(f))
			}
		case *ort.Tensor[int64]:
			for _, f := range tt.GetData() {
				v = append(v, float64(f))
			}
		default:
			t.Fatalf("ORT output of type %T", o)
		}
		o.Destroy()
		res = append(res, v)
	}
	return res
}

// TestAgainstORT runs random ensembles of every comparison mode, with NaN
// routing, on inputs full of thresholds, NaN and infinities, in vouch and
// in ONNX Runtime: labels equal, scores within 1e-5 relative / 1e-6.
func TestAgainstORT(t *testing.T) {
	ortLib(t)
	rng := rand.New(rand.NewPCG(9, 9))
	specs := append(slices.Clone(twinSpecs),
		genSpec{trees: 10, depth: 5, feats: 4, targets: 1, modes: []string{"BRANCH_LT"}, classifier: false, leafStop: 0.1})
	cases := 0
	for si, g := range specs {
		g.thresholds = grid
		for rep := 0; rep < 4; rep++ {
			n := genNode(rng, g)
			for _, post := range []string{"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"} {
				if !g.classifier && g.targets == 1 && post != "NONE" {
					continue // ORT ignores a one-target regressor's transform (see docs/trees.md)
				}
				n.Attrs["post_transform"] = str(post)
				m := &ir.Node{OpType: n.OpType, Domain: n.Domain, Version: n.Version, Inputs: n.Inputs, Outputs: n.Outputs, Attrs: n.Attrs}
				x := genInput(rng, 29, g.feats)
				got, err := runNode(m, x, "", 1)
				if err != nil {
					t.Fatal(err)
				}
				delete(m.Attrs, "vouch_tactic")
				want := runORT(t, m, x)
				for o := range got {
					gv, _ := got[o].Float64s()
					for i := range gv {
						w := want[o][i]
						if d := math.Abs(gv[i] - w); d > 1e-6+1e-5*math.Abs(w) && !(math.IsNaN(w) && math.IsNaN(gv[i])) {
							t.Fatalf("spec %d rep %d %s: output %d[%d] = %v, ORT %v", si, rep, post, o, i, gv[i], w)
						}
					}
				}
				cases++
			}
		}
	}
	// Opset 5: BRANCH_MEMBER, leaf arrays, a one-leaf tree.
	n := v5(tensor.Float32)
	n.Outputs = []string{"Y"}
	x := tensor.From([]float32{1, 0, 5, 0, 2, 0, 4, 0, nan32, 0, 3, 0}, 6, 2)
	got, err := runNode(n, x, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	delete(n.Attrs, "vouch_tactic")
	gv, _ := got[0].Float64s()
	if want := runORT(t, n, x)[0]; !slices.Equal(gv, want) {
		t.Errorf("TreeEnsemble: %v, ORT %v", gv, want)
	}
	t.Logf("%d ensembles x post transforms agree with ONNX Runtime", cases)
}
