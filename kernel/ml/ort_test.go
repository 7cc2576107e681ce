//go:build ort

package ml_test

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/proto"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
)

// ortLib is ONNX Runtime's library: VOUCH_ORT_LIB, or where
// scripts/fetch-ort.sh puts it.
func ortLib(t *testing.T) {
	t.Helper()
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

// TestAgainstORT runs single-node models in vouch and in ONNX Runtime 1.30
// and compares: labels exactly, scores within 1e-5 (relative, 1e-6
// absolute).
func TestAgainstORT(t *testing.T) {
	ortLib(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, feat = 16, 2
	xs := make([]float32, rows*feat)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	sv := attrFs("support_vectors", 0, 0, 1, 0, 0, 1, 1, 1)
	vpc := attrIs("vectors_per_class", 2, 1, 1)
	coef := attrFs("coefficients", 0.5, -0.25, 1, -1, 0.75, 0.5, -0.5, 0.25)
	rho := attrFs("rho", 0.1, -0.2, 0.05)
	svc := func(kernel string, extra ...*onnxpb.AttributeProto) []*onnxpb.AttributeProto {
		return append([]*onnxpb.AttributeProto{attrS("kernel_type", kernel), attrFs("kernel_params", 0.4, 0.5, 3), sv, vpc, coef, rho,
			attrIs("classlabels_ints", 1, 2, 3)}, extra...)
	}
	type outT struct {
		name string
		dt   tensor.DType
	}
	classifier := []outT{{"label", tensor.Int64}, {"scores", tensor.Float32}}
	for _, c := range []struct {
		what  string
		op    string
		attrs []*onnxpb.AttributeProto
		outs  []outT
	}{
		{"linear binary NONE", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 2, -1), attrFs("intercepts", 0.5), attrIs("classlabels_ints", 0, 1)}, classifier},
		{"linear binary LOGISTIC", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 2, -1), attrFs("intercepts", 0.5), attrIs("classlabels_ints", 0, 1), attrS("post_transform", "LOGISTIC")}, classifier},
		{"linear 3 SOFTMAX", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 1, 2, -1, 0.5, 0, -1), attrFs("intercepts", 0.1, 0.2, 0.3), attrIs("classlabels_ints", 4, 5, 6), attrS("post_transform", "SOFTMAX")}, classifier},
		{"linear 3 SOFTMAX_ZERO", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 1, 2, -1, 0.5, 0, -1), attrFs("intercepts", 0, 0, 0.5), attrIs("classlabels_ints", 4, 5, 6), attrS("post_transform", "SOFTMAX_ZERO")}, classifier},
		{"linear 3 LOGISTIC", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 1, 2, -1, 0.5, 0, -1), attrFs("intercepts", 0, 0, 0.5), attrIs("classlabels_ints", 4, 5, 6), attrS("post_transform", "LOGISTIC")}, classifier},
		{"linear binary SOFTMAX", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 2, -1), attrFs("intercepts", 0.5), attrIs("classlabels_ints", 0, 1), attrS("post_transform", "SOFTMAX")}, classifier},
		{"linear binary SOFTMAX_ZERO", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 2, -1), attrFs("intercepts", 0.5), attrIs("classlabels_ints", 0, 1), attrS("post_transform", "SOFTMAX_ZERO")}, classifier},
		{"svc binary NONE", "SVMClassifier", []*onnxpb.AttributeProto{attrS("kernel_type", "RBF"), attrFs("kernel_params", 0.7, 0, 0), attrFs("support_vectors", 1, 0, 0, 1), attrIs("vectors_per_class", 1, 1), attrFs("coefficients", 1, -1), attrFs("rho", 0.1), attrIs("classlabels_ints", 0, 1), attrS("post_transform", "NONE")}, classifier},
		{"svc binary LOGISTIC", "SVMClassifier", []*onnxpb.AttributeProto{attrS("kernel_type", "RBF"), attrFs("kernel_params", 0.7, 0, 0), attrFs("support_vectors", 1, 0, 0, 1), attrIs("vectors_per_class", 1, 1), attrFs("coefficients", 1, -1), attrFs("rho", 0.1), attrIs("classlabels_ints", 0, 1), attrS("post_transform", "LOGISTIC")}, classifier},
		{"svc binary SOFTMAX", "SVMClassifier", []*onnxpb.AttributeProto{attrS("kernel_type", "RBF"), attrFs("kernel_params", 0.7, 0, 0), attrFs("support_vectors", 1, 0, 0, 1), attrIs("vectors_per_class", 1, 1), attrFs("coefficients", 1, -1), attrFs("rho", 0.1), attrIs("classlabels_ints", 0, 1), attrS("post_transform", "SOFTMAX")}, classifier},
		{"linear 3 PROBIT", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 0.1, 0.2, -0.1, 0.05, 0, -0.1), attrFs("intercepts", 0.5, 0.4, 0.6), attrIs("classlabels_ints", 4, 5, 6), attrS("post_transform", "PROBIT")}, classifier},
		{"linear one target no labels", "LinearClassifier", []*onnxpb.AttributeProto{attrFs("coefficients", 2, -1), attrFs("intercepts", 0.5), attrS("post_transform", "LOGISTIC")}, classifier},
		{"regressor", "LinearRegressor", []*onnxpb.AttributeProto{attrFs("coefficients", 1, 2, 3, 4), attrFs("intercepts", 1, -1), attrI("targets", 2)}, []outT{{"y", tensor.Float32}}},
		{"svc LINEAR", "SVMClassifier", svc("LINEAR"), classifier},
		{"svc POLY", "SVMClassifier", svc("POLY"), classifier},
		{"svc RBF", "SVMClassifier", svc("RBF"), classifier},
		{"svc SIGMOID", "SVMClassifier", svc("SIGMOID"), classifier},
		{"svc RBF Platt", "SVMClassifier", svc("RBF", attrFs("prob_a", -1, -2, -0.5), attrFs("prob_b", 0.1, 0.2, 0.3)), classifier},
		{"svc binary", "SVMClassifier", []*onnxpb.AttributeProto{attrS("kernel_type", "RBF"), attrFs("kernel_params", 0.7, 0, 0), attrFs("support_vectors", 1, 0, 0, 1), attrIs("vectors_per_class", 1, 1), attrFs("coefficients", 1, -1), attrFs("rho", 0.1), attrIs("classlabels_ints", 0, 1)}, classifier},
		{"svc liblinear", "SVMClassifier", []*onnxpb.AttributeProto{attrS("kernel_type", "LINEAR"), attrFs("kernel_params", 0, 0, 0), attrFs("coefficients", 1, 0, 0, 1, -1, -1), attrFs("rho", 0.25), attrIs("classlabels_ints", 7, 8, 9)}, classifier},
		{"svc liblinear binary", "SVMClassifier", []*onnxpb.AttributeProto{attrS("kernel_type", "LINEAR"), attrFs("kernel_params", 0, 0, 0), attrFs("coefficients", 1, -0.5, -1, 0.5), attrFs("rho", 0.25), attrIs("classlabels_ints", 7, 8)}, classifier},
		{"svc liblinear binary positive", "SVMClassifier", []*onnxpb.AttributeProto{attrS("kernel_type", "LINEAR"), attrFs("kernel_params", 0, 0, 0), attrFs("coefficients", 1, 0.5, 0.2, 0.5), attrFs("rho", 0.25), attrIs("classlabels_ints", 7, 8)}, classifier},
		{"svr RBF", "SVMRegressor", []*onnxpb.AttributeProto{attrS("kernel_type", "RBF"), attrFs("kernel_params", 0.7, 0, 0), sv, attrI("n_supports", 4), attrFs("coefficients", 0.5, -1, 0.25, 2), attrFs("rho", -0.3)}, []outT{{"y", tensor.Float32}}},
		{"svr linear", "SVMRegressor", []*onnxpb.AttributeProto{attrS("kernel_type", "LINEAR"), attrFs("kernel_params", 0, 0, 0), attrFs("coefficients", 0.5, -1), attrFs("rho", -0.3)}, []outT{{"y", tensor.Float32}}},
		{"scaler", "Scaler", []*onnxpb.AttributeProto{attrFs("offset", 0.5, -1), attrFs("scale", 3, 0.25)}, []outT{{"y", tensor.Float32}}},
		{"normalizer L1", "Normalizer", []*onnxpb.AttributeProto{attrS("norm", "L1")}, []outT{{"y", tensor.Float32}}},
		{"normalizer L2", "Normalizer", []*onnxpb.AttributeProto{attrS("norm", "L2")}, []outT{{"y", tensor.Float32}}},
		{"normalizer MAX", "Normalizer", []*onnxpb.AttributeProto{attrS("norm", "MAX")}, []outT{{"y", tensor.Float32}}},
		{"binarizer", "Binarizer", []*onnxpb.AttributeProto{{Name: proto.String("threshold"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(0.2)}}, []outT{{"y", tensor.Float32}}},
		{"feature vectorizer", "FeatureVectorizer", []*onnxpb.AttributeProto{attrIs("inputdimensions", 3)}, []outT{{"y", tensor.Float32}}},
	} {
		t.Run(c.what, func(t *testing.T) {
			g := &onnxpb.GraphProto{Name: proto.String("one"), Input: []*onnxpb.ValueInfoProto{tensorVI("X", tensor.Float32, rows, feat)}}
			var names []string
			for _, o := range c.outs {
				g.Output = append(g.Output, tensorVI(o.name, o.dt))
				names = append(names, o.name)
			}
			g.Node = []*onnxpb.NodeProto{mlNode(c.op, []string{"X"}, names, c.attrs...)}
			src := mlModel(g)
			m, err := onnx.Decode(src, "")
			if err != nil {
				t.Fatal(err)
			}
			ex, err := exec.New(m.Graph, builtin.Registry())
			if err != nil {
				t.Fatal(err)
			}
			got, err := ex.Run(map[string]*tensor.Tensor{"X": tensor.From(xs, rows, feat)})
			if err != nil {
				t.Fatal(err)
			}
			in, err := ort.NewTensor(ort.NewShape(rows, feat), xs)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Destroy()
			sess, err := ort.NewDynamicAdvancedSessionWithONNXData(src, []string{"X"}, names, nil)
			if err != nil {
				t.Fatalf("ORT session: %v", err)
			}
			defer sess.Destroy()
			outs := make([]ort.Value, len(names))
			if err := sess.Run([]ort.Value{in}, outs); err != nil {
				t.Fatalf("ORT run: %v", err)
			}
			for i, name := range names {
				defer outs[i].Destroy()
				g := got[name]
				if s := outs[i].GetShape(); tensor.NumElems(toInts(s)) != g.Len() {
					t.Errorf("%s: ORT shape %v, vouch %v", name, s, g.Shape)
					continue
				}
				switch v := outs[i].(type) {
				case *ort.Tensor[int64]:
					w := v.GetData()
					for j, x := range g.Data.([]int64) {
						if x != w[j] {
							t.Errorf("%s[%d]: vouch %d, ORT %d", name, j, x, w[j])
						}
					}
				case *ort.Tensor[float32]:
					w := v.GetData()
					for j, x := range g.Data.([]float32) {
						if d := math.Abs(float64(x - w[j])); d > 1e-6+1e-5*math.Abs(float64(w[j])) {
							t.Errorf("%s[%d]: vouch %v, ORT %v", name, j, x, w[j])
						}
					}
				default:
					t.Fatalf("%s: ORT output %T", name, outs[i])
				}
			}
		})
	}
}

func attrI(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func toInts(s ort.Shape) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}
