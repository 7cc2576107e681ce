package reduce

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func node(op string, version int64, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{OpType: op, Version: version, Attrs: map[string]*ir.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func ints(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }
func intA(name string, v int64) *ir.Attr    { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
func str(name, v string) *ir.Attr           { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }

func runOp(t *testing.T, n *ir.Node, in ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	t.Helper()
	op := Ops()[n.OpType]
	if op == nil {
		t.Fatalf("no op %s", n.OpType)
	}
	return op.Run(nil, n, in)
}

func TestReductions(t *testing.T) {
	x := tensor.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	empty := tensor.New(tensor.Float32, 2, 0)
	inf := float32(math.Inf(1))
	tests := []struct {
		name  string
		n     *ir.Node
		in    []*tensor.Tensor
		want  any
		shape []int
	}{
		{"sum attr axes", node("ReduceSum", 11, ints("axes", 1)), []*tensor.Tensor{x}, []float32{6, 15}, []int{2, 1}},
		{"sum input axes", node("ReduceSum", 13, intA("keepdims", 0)), []*tensor.Tensor{x, tensor.From([]int64{-2}, 1)}, []float32{5, 7, 9}, []int{3}},
		{"sum all", node("ReduceSum", 13, intA("keepdims", 0)), []*tensor.Tensor{x}, []float32{21}, []int{}},
		{"sum noop", node("ReduceSum", 13, intA("noop_with_empty_axes", 1)), []*tensor.Tensor{x, tensor.From([]int64{}, 0)}, []float32{1, 2, 3, 4, 5, 6}, []int{2, 3}},
		{"noop ignored before 18", node("ReduceMax", 13, intA("noop_with_empty_axes", 1)), []*tensor.Tensor{x}, []float32{6}, []int{1, 1}},
		{"max axes input opset 18", node("ReduceMax", 18), []*tensor.Tensor{x, tensor.From([]int64{0}, 1)}, []float32{4, 5, 6}, []int{1, 3}},
		{"mean", node("ReduceMean", 13, ints("axes", 1)), []*tensor.Tensor{x}, []float32{2, 5}, []int{2, 1}},
		{"l1 l2", node("ReduceL2", 13, ints("axes", 0, 1), intA("keepdims", 0)), []*tensor.Tensor{tensor.From([]float32{3, -4}, 1, 2)}, []float32{5}, []int{}},
		{"sumsquare", node("ReduceSumSquare", 13, ints("axes", 1)), []*tensor.Tensor{x}, []float32{14, 77}, []int{2, 1}},
		{"logsumexp large", node("ReduceLogSumExp", 13, ints("axes", 1)), []*tensor.Tensor{tensor.From([]float32{1000, 1000}, 1, 2)}, []float32{1000 + float32(math.Ln2)}, []int{1, 1}},
		{"empty min", node("ReduceMin", 13, ints("axes", 1)), []*tensor.Tensor{empty}, []float32{inf, inf}, []int{2, 1}},
		{"empty max", node("ReduceMax", 13, ints("axes", 1)), []*tensor.Tensor{empty}, []float32{-inf, -inf}, []int{2, 1}},
		{"empty prod", node("ReduceProd", 13, ints("axes", 1)), []*tensor.Tensor{empty}, []float32{1, 1}, []int{2, 1}},
		{"empty logsum", node("ReduceLogSum", 13, ints("axes", 1)), []*tensor.Tensor{empty}, []float32{-inf, -inf}, []int{2, 1}},
		{"empty logsumexp", node("ReduceLogSumExp", 13, ints("axes", 1)), []*tensor.Tensor{empty}, []float32{-inf, -inf}, []int{2, 1}},
		{"empty sum", node("ReduceSum", 11, ints("axes", 1)), []*tensor.Tensor{empty}, []float32{0, 0}, []int{2, 1}},
		{"int mean truncates", node("ReduceMean", 13, intA("keepdims", 0)), []*tensor.Tensor{tensor.From([]int32{1, 2}, 2)}, []int32{1}, []int{}},
		{"int8 max empty", node("ReduceMax", 13, ints("axes", 0)), []*tensor.Tensor{tensor.New(tensor.Int8, 0, 2)}, []int8{-128, -128}, []int{1, 2}},
		{"uint16 min empty", node("ReduceMin", 13, ints("axes", 0)), []*tensor.Tensor{tensor.New(tensor.Uint16, 0, 1)}, []uint16{65535}, []int{1, 1}},
		{"bool max", node("ReduceMax", 20, intA("keepdims", 0)), []*tensor.Tensor{tensor.From([]bool{false, true}, 2), tensor.From([]int64{0}, 1)}, []bool{true}, []int{}},
		{"bool min", node("ReduceMin", 20, intA("keepdims", 0)), []*tensor.Tensor{tensor.From([]bool{false, true}, 2)}, []bool{false}, []int{}},
		{"half sum", node("ReduceSum", 13), []*tensor.Tensor{tensor.From([]tensor.Half{tensor.ToHalf(1), tensor.ToHalf(2)}, 2)}, []tensor.Half{tensor.ToHalf(3)}, []int{1}},
		{"int8 mean of 200", node("ReduceMean", 13, intA("keepdims", 0)), []*tensor.Tensor{tensor.From(make([]int8, 200), 200)}, []int8{0}, []int{}},
		{"uint8 mean", node("ReduceMean", 13, intA("keepdims", 0)), []*tensor.Tensor{tensor.From([]uint8{7, 100}, 2)}, []uint8{53}, []int{}},
		{"int64 l2", node("ReduceL2", 13, intA("keepdims", 0)), []*tensor.Tensor{tensor.From([]int64{3, 4, 1}, 3)}, []int64{5}, []int{}},
		{"int32 sumsquare", node("ReduceSumSquare", 13, intA("keepdims", 0)), []*tensor.Tensor{tensor.From([]int32{-3, 4}, 2)}, []int32{25}, []int{}},
		{"float64 prod", node("ReduceProd", 13, ints("axes", 0)), []*tensor.Tensor{tensor.From([]float64{2, 3, 4, 5}, 2, 2)}, []float64{8, 15}, []int{1, 2}},
		{"NaN max", node("ReduceMax", 13), []*tensor.Tensor{tensor.From([]float32{1, float32(math.NaN()), 2}, 3)}, nil, []int{1}},
		{"scalar", node("ReduceProd", 13), []*tensor.Tensor{tensor.Scalar(float32(7))}, []float32{7}, []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runOp(t, tc.n, tc.in...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil { // NaN expected
				if v := got[0].Data.([]float32)[0]; v == v {
					t.Errorf("got %v, want NaN", v)
				}
				return
			}
			if !reflect.DeepEqual(got[0].Data, tc.want) || !reflect.DeepEqual(got[0].Shape, tc.shape) {
				t.Errorf("got %v %v, want %v %v", got[0].Shape, got[0].Data, tc.shape, tc.want)
			}
		})
	}
}

func TestReduceErrors(t *testing.T) {
	x := tensor.From([]float32{1, 2, 3, 4}, 2, 2)
	tests := []struct {
		n    *ir.Node
		in   []*tensor.Tensor
		want string
	}{
		{node("ReduceSum", 11, ints("axes", 2)), []*tensor.Tensor{x}, "out of range"},
		{node("ReduceSum", 11, ints("axes", 1, -1)), []*tensor.Tensor{x}, "twice"},
		{node("ReduceSum", 13), []*tensor.Tensor{x, tensor.From([]float32{0}, 1)}, "int64"},
		{node("ReduceSum", 13), []*tensor.Tensor{tensor.From([]bool{true}, 1)}, "bool"},
		{node("ReduceMean", 13), []*tensor.Tensor{tensor.From([]string{"a"}, 1)}, "string"},
	}
	for _, tc := range tests {
		_, err := runOp(t, tc.n, tc.in...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.n.OpType, err, tc.want)
		}
	}
}

func dims(d ...ir.Dim) ir.Type { return ir.Type{DType: tensor.Float32, Shape: d, RankKnown: true} }

func TestInferReduce(t *testing.T) {
	n := ir.Dim{Value: -1, Param: "N"}
	x := ir.InferInput{Present: true, Type: dims(n, ir.Fixed(3), ir.Fixed(4))}
	axes := func(v ...int64) ir.InferInput {
		c := tensor.From(v, len(v))
		return ir.InferInput{Present: true, Type: ir.TensorType(c), Const: c}
	}
	dynamic := ir.InferInput{Present: true, Type: ir.StaticType(tensor.Int64, []int{1})}
	tests := []struct {
		name string
		n    *ir.Node
		in   []ir.InferInput
		want ir.Type
	}{
		{"attr", node("ReduceMean", 13, ints("axes", -1)), []ir.InferInput{x}, dims(n, ir.Fixed(3), ir.Fixed(1))},
		{"attr no keep", node("ReduceMean", 13, ints("axes", 1), intA("keepdims", 0)), []ir.InferInput{x}, dims(n, ir.Fixed(4))},
		{"const input", node("ReduceSum", 13, intA("keepdims", 0)), []ir.InferInput{x, axes(0)}, dims(ir.Fixed(3), ir.Fixed(4))},
		{"all", node("ReduceSum", 13), []ir.InferInput{x}, dims(ir.Fixed(1), ir.Fixed(1), ir.Fixed(1))},
		{"noop", node("ReduceSum", 13, intA("noop_with_empty_axes", 1)), []ir.InferInput{x}, x.Type},
		{"dynamic keep", node("ReduceSum", 13), []ir.InferInput{x, dynamic}, dims(ir.Unknown, ir.Unknown, ir.Unknown)},
		{"dynamic no keep", node("ReduceL1", 18, intA("keepdims", 0)), []ir.InferInput{x, dynamic}, ir.Type{DType: tensor.Float32}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Ops()[tc.n.OpType].Infer(tc.n, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got[0].String() != tc.want.String() {
				t.Errorf("got %v, want %v", got[0], tc.want)
			}
		})
	}
}

func TestSoftmaxVersions(t *testing.T) {
	x := tensor.From([]float32{0, 0, 0, 0, 0, 0, 0, 0}, 2, 2, 2)
	// Opset 11, axis 1: coerced to 2x4, each row of 4 sums to one.
	got, err := runOp(t, node("Softmax", 11, intA("axis", 1)), x)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got[0].Data.([]float32) {
		if v != 0.25 {
			t.Fatalf("opset 11: got %v, want all 0.25", got[0].Data)
		}
	}
	// Opset 13, axis 1: only the axis of 2.
	got, err = runOp(t, node("Softmax", 13, intA("axis", 1)), x)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got[0].Data.([]float32) {
		if v != 0.5 {
			t.Fatalf("opset 13: got %v, want all 0.5", got[0].Data)
		}
	}
	got, err = runOp(t, node("Hardmax", 13), tensor.From([]float32{1, 3, 3, 2}, 2, 2))
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{0, 1, 1, 0}; !reflect.DeepEqual(got[0].Data, want) {
		t.Errorf("hardmax: got %v, want %v (first maximum wins)", got[0].Data, want)
	}
	got, err = runOp(t, node("LogSoftmax", 13), tensor.From([]float32{1000, 1000}, 2))
	if err != nil {
		t.Fatal(err)
	}
	if d := got[0].Data.([]float32); math.Abs(float64(d[0])+math.Ln2) > 1e-6 {
		t.Errorf("logsoftmax of large values: got %v", d)
	}
	if _, err := runOp(t, node("Softmax", 13, intA("axis", 3)), x); err == nil {
		t.Error("axis 3 on rank 3: no error")
	}
	if _, err := runOp(t, node("Softmax", 13), tensor.From([]int32{1}, 1)); err == nil {
		t.Error("int input: no error")
	}
}

func TestNLL(t *testing.T) {
	// N=2, C=3 log-probabilities.
	x := tensor.From([]float32{-1, -2, -3, -4, -5, -6}, 2, 3)
	target := tensor.From([]int64{2, -1}, 2)
	w := tensor.From([]float32{1, 2, 4}, 3)
	tests := []struct {
		n    *ir.Node
		in   []*tensor.Tensor
		want []float32
	}{
		{node("NegativeLogLikelihoodLoss", 13, str("reduction", "none"), intA("ignore_index", -1)), []*tensor.Tensor{x, target}, []float32{3, 0}},
		{node("NegativeLogLikelihoodLoss", 13, intA("ignore_index", -1)), []*tensor.Tensor{x, target, w}, []float32{3}},
		{node("NegativeLogLikelihoodLoss", 13, str("reduction", "sum")), []*tensor.Tensor{x, tensor.From([]int32{0, 1}, 2), w}, []float32{11}},
		{node("NegativeLogLikelihoodLoss", 13), []*tensor.Tensor{x, tensor.From([]int64{0, 1}, 2), w}, []float32{11.0 / 3}},
	}
	for i, tc := range tests {
		got, err := runOp(t, tc.n, tc.in...)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !reflect.DeepEqual(got[0].Data, tc.want) {
			t.Errorf("%d: got %v, want %v", i, got[0].Data, tc.want)
		}
	}
	if _, err := runOp(t, node("NegativeLogLikelihoodLoss", 13), x, tensor.From([]int64{3, 0}, 2)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("target 3 of 3 classes: err %v", err)
	}
	if _, err := runOp(t, node("NegativeLogLikelihoodLoss", 13), x, tensor.From([]int64{0, 0, 0}, 3)); err == nil {
		t.Error("target shape mismatch: no error")
	}
	// SoftmaxCrossEntropyLoss of equal scores: log(C) each, and log_prob.
	got, err := runOp(t, node("SoftmaxCrossEntropyLoss", 13), tensor.New(tensor.Float32, 2, 4), tensor.From([]int64{1, 3}, 2))
	if err != nil {
		t.Fatal(err)
	}
	if l := got[0].Data.([]float32)[0]; math.Abs(float64(l)-math.Log(4)) > 1e-6 || len(got[0].Shape) != 0 {
		t.Errorf("sce: got %v %v, want log 4 scalar", got[0].Shape, l)
	}
	if !reflect.DeepEqual(got[1].Shape, []int{2, 4}) {
		t.Errorf("log_prob shape %v", got[1].Shape)
	}
}
