// Package credit makes the demo's model: a small credit-risk MLP trained,
// deterministically, on synthetic applicants, and written out as ONNX by
// vouch's own code. It stands in for the tabular risk models our users
// run, so that `vouch demo` needs no file from outside the repository.
//
// Applicants have eight features (all standardized): income, debt-to-income
// ratio, credit history length, number of late payments, loan amount,
// employment length, open credit lines and recent inquiries. The ground
// truth is a fixed nonlinear score with noise; the label is 1 ("decline")
// when the score is high. The network is 8 → 16 (Relu) → 2 (Softmax),
// trained with full-batch gradient descent in float64 from a fixed seed,
// so Model() returns the same bytes every time.
package credit

import (
	"math"
	"math/rand/v2"

	"github.com/vouchml/vouch/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

// Features are the model's input columns, in order.
var Features = []string{"income", "debt_to_income", "history_years", "late_payments", "loan_amount", "employment_years", "open_lines", "inquiries"}

// Labels are the classes of the output, in order.
var Labels = []string{"approve", "decline"}

const (
	nIn     = 8
	nHidden = 16
	nOut    = 2
)

// Applicants returns n synthetic applicants (row-major, n×8) and their
// labels, drawn from a generator seeded with seed.
func Applicants(seed uint64, n int) ([]float32, []int) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	x := make([]float32, n*nIn)
	y := make([]int, n)
	for i := 0; i < n; i++ {
		row := x[i*nIn : (i+1)*nIn]
		for j := range row {
			row[j] = float32(r.NormFloat64())
		}
		score := -1.2*float64(row[0]) + 1.5*float64(row[1]) - 0.6*float64(row[2]) + 1.1*float64(row[3]) +
			0.8*float64(row[4]) - 0.5*float64(row[5]) + 0.3*float64(row[6]) + 0.7*float64(row[7]) +
			0.9*float64(row[1])*float64(row[4]) + 0.4*r.NormFloat64()
		if score > 0.5 {
			y[i] = 1
		}
	}
	return x, y
}

// weights of the trained network.
type weights struct {
	w1 [nHidden][nIn]float64
	b1 [nHidden]float64
	w2 [nOut][nHidden]float64
	b2 [nOut]float64
}

func train() *weights {
	x, y := Applicants(1, 2000)
	r := rand.New(rand.NewPCG(7, 7))
	w := &weights{}
	for i := range w.w1 {
		for j := range w.w1[i] {
			w.w1[i][j] = r.NormFloat64() * math.Sqrt(2.0/nIn)
		}
	}
	for i := range w.w2 {
		for j := range w.w2[i] {
			w.w2[i][j] = r.NormFloat64() * math.Sqrt(2.0/nHidden)
		}
	}
	n := len(y)
	const lr = 0.5
	for epoch := 0; epoch < 300; epoch++ {
		var g weights
		for s := 0; s < n; s++ {
			in := x[s*nIn : (s+1)*nIn]
			var h [nHidden]float64
			for i := range h {
				v := w.b1[i]
				for j := 0; j < nIn; j++ {
					v += w.w1[i][j] * float64(in[j])
				}
				h[i] = math.Max(v, 0)
			}
			var z [nOut]float64
			for i := range z {
				v := w.b2[i]
				for j := 0; j < nHidden; j++ {
					v += w.w2[i][j] * h[j]
				}
				z[i] = v
			}
			m := math.Max(z[0], z[1])
			e0, e1 := math.Exp(z[0]-m), math.Exp(z[1]-m)
			p := [nOut]float64{e0 / (e0 + e1), e1 / (e0 + e1)}
			var dz [nOut]float64
			for i := range dz {
				dz[i] = p[i]
				if i == y[s] {
					dz[i]--
				}
				g.b2[i] += dz[i]
				for j := 0; j < nHidden; j++ {
					g.w2[i][j] += dz[i] * h[j]
				}
			}
			for j := 0; j < nHidden; j++ {
				if h[j] <= 0 {
					continue
				}
				d := dz[0]*w.w2[0][j] + dz[1]*w.w2[1][j]
				g.b1[j] += d
				for k := 0; k < nIn; k++ {
					g.w1[j][k] += d * float64(in[k])
				}
			}
		}
		scale := lr / float64(n)
		for i := range w.w1 {
			for j := range w.w1[i] {
				w.w1[i][j] -= scale * g.w1[i][j]
			}
			w.b1[i] -= scale * g.b1[i]
		}
		for i := range w.w2 {
			for j := range w.w2[i] {
				w.w2[i][j] -= scale * g.w2[i][j]
			}
			w.b2[i] -= scale * g.b2[i]
		}
	}
	return w
}

func f32s(v ...float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func initializer(name string, dims []int64, vals []float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(1), FloatData: vals}
}

// Model trains the network and returns it as a serialized ONNX model
// (IR version 8, opset 13): features f32[batch,8] → probabilities f32[batch,2].
// Its metadata declares the class labels (key "vouch.labels").
func Model() []byte {
	w := train()
	var w1, w2 []float32
	for i := range w.w1 {
		w1 = append(w1, f32s(w.w1[i][:]...)...)
	}
	for i := range w.w2 {
		w2 = append(w2, f32s(w.w2[i][:]...)...)
	}
	dim := func(v int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
	}
	batch := &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}}
	vi := func(name string, d ...*onnxpb.TensorShapeProto_Dimension) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1), Shape: &onnxpb.TensorShapeProto{Dim: d}}}}}
	}
	node := func(name, op string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Input: in, Output: out, Attribute: attrs}
	}
	transB := &onnxpb.AttributeProto{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}
	axis := &onnxpb.AttributeProto{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}
	m := &onnxpb.ModelProto{
		IrVersion:     proto.Int64(8),
		ProducerName:  proto.String("vouch demo (internal/demo/credit)"),
		ModelVersion:  proto.Int64(1),
		DocString:     proto.String("Synthetic credit-risk MLP for the vouch demo; features: " + joinComma(Features)),
		OpsetImport:   []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		MetadataProps: []*onnxpb.StringStringEntryProto{{Key: proto.String("vouch.labels"), Value: proto.String(joinComma(Labels))}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("credit_risk"),
			Node: []*onnxpb.NodeProto{
				node("fc1", "Gemm", []string{"features", "w1", "b1"}, []string{"h"}, transB),
				node("relu", "Relu", []string{"h"}, []string{"a"}),
				node("fc2", "Gemm", []string{"a", "w2", "b2"}, []string{"logits"}, transB),
				node("softmax", "Softmax", []string{"logits"}, []string{"probabilities"}, axis),
			},
			Initializer: []*onnxpb.TensorProto{
				initializer("w1", []int64{nHidden, nIn}, w1),
				initializer("b1", []int64{nHidden}, f32s(w.b1[:]...)),
				initializer("w2", []int64{nOut, nHidden}, w2),
				initializer("b2", []int64{nOut}, f32s(w.b2[:]...)),
			},
			Input:  []*onnxpb.ValueInfoProto{vi("features", batch, dim(nIn))},
			Output: []*onnxpb.ValueInfoProto{vi("probabilities", batch, dim(nOut))},
		},
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err) // a programmer error: the message is built above
	}
	return b
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}
