package sequence

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func node(op string, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{OpType: op, Version: 11, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func ai(name string, v int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }

func f32(shape []int, v ...float32) *tensor.Tensor { return tensor.From(v, shape...) }

func iota32(shape ...int) *tensor.Tensor {
	v := make([]float32, tensor.NumElems(shape))
	for i := range v {
		v[i] = float32(i)
	}
	return tensor.From(v, shape...)
}

func runOp(n *ir.Node, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	out, err := Ops()[n.OpType].Run(nil, n, in)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func mustRun(t *testing.T, n *ir.Node, in ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	out, err := runOp(n, in...)
	if err != nil {
		t.Fatalf("%s: %v", n.OpType, err)
	}
	return out
}

func same(t *testing.T, what string, got, want *tensor.Tensor) {
	t.Helper()
	sameShape := len(got.Shape) == len(want.Shape) && (len(got.Shape) == 0 || reflect.DeepEqual(got.Shape, want.Shape))
	if got.DType != want.DType || !sameShape || (got.Len()+want.Len() > 0 && !reflect.DeepEqual(got.Data, want.Data)) {
		t.Errorf("%s: got %v %v %v, want %v %v %v", what, got.DType, got.Shape, got.Data, want.DType, want.Shape, want.Data)
	}
}

func seq(ts ...*tensor.Tensor) *tensor.Tensor { return tensor.NewSequence(ts) }

func TestInsertAtErase(t *testing.T) {
	a, b, c := f32([]int{1}, 1), f32([]int{1}, 2), f32([]int{1}, 3)
	s := mustRun(t, node("SequenceConstruct"), a, b)
	s = mustRun(t, node("SequenceInsert"), s, c, tensor.Scalar(int64(-1)))
	// a c b
	for i, want := range []*tensor.Tensor{a, c, b} {
		got := mustRun(t, node("SequenceAt"), s, tensor.Scalar(int32(i)))
		same(t, "SequenceAt", got, want)
		got = mustRun(t, node("SequenceAt"), s, tensor.Scalar(int64(i-3)))
		same(t, "SequenceAt negative", got, want)
	}
	s = mustRun(t, node("SequenceInsert"), s, a) // a c b a
	s = mustRun(t, node("SequenceErase"), s)     // a c b
	s = mustRun(t, node("SequenceErase"), s, tensor.Scalar(int64(0)))
	same(t, "SequenceLength", mustRun(t, node("SequenceLength"), s), tensor.Scalar(int64(2)))
	same(t, "after erase", s.Elems()[0], c)

	e := mustRun(t, node("SequenceEmpty", ai("dtype", int64(tensor.Int64))))
	same(t, "empty length", mustRun(t, node("SequenceLength"), e), tensor.Scalar(int64(0)))
	e = mustRun(t, node("SequenceInsert"), e, a, tensor.Scalar(int64(0)))
	same(t, "insert into empty", e.Elems()[0], a)
}

func TestSplitToSequence(t *testing.T) {
	x := iota32(2, 3)
	cases := []struct {
		name  string
		attrs []*ir.Attr
		split *tensor.Tensor
		want  []*tensor.Tensor
	}{
		{"ones axis1", []*ir.Attr{ai("axis", 1)}, nil,
			[]*tensor.Tensor{f32([]int{2, 1}, 0, 3), f32([]int{2, 1}, 1, 4), f32([]int{2, 1}, 2, 5)}},
		{"ones squeezed", []*ir.Attr{ai("axis", -1), ai("keepdims", 0)}, nil,
			[]*tensor.Tensor{f32([]int{2}, 0, 3), f32([]int{2}, 1, 4), f32([]int{2}, 2, 5)}},
		{"scalar uneven", []*ir.Attr{ai("axis", 1), ai("keepdims", 0)}, tensor.Scalar(int64(2)),
			[]*tensor.Tensor{f32([]int{2, 2}, 0, 1, 3, 4), f32([]int{2, 1}, 2, 5)}},
		{"list", nil, tensor.From([]int32{0, 2}, 2),
			[]*tensor.Tensor{f32([]int{0, 3}), f32([]int{2, 3}, 0, 1, 2, 3, 4, 5)}},
	}
	for _, tc := range cases {
		got := mustRun(t, node("SplitToSequence", tc.attrs...), x, tc.split)
		if len(got.Elems()) != len(tc.want) {
			t.Errorf("%s: %d elements, want %d", tc.name, len(got.Elems()), len(tc.want))
			continue
		}
		for i := range tc.want {
			same(t, tc.name, got.Elems()[i], tc.want[i])
		}
	}
}

func TestConcatFromSequence(t *testing.T) {
	a, b := iota32(2, 2), f32([]int{2, 1}, 7, 8)
	got := mustRun(t, node("ConcatFromSequence", ai("axis", -1)), seq(a, b))
	same(t, "concat", got, f32([]int{2, 3}, 0, 1, 7, 2, 3, 8))

	c := f32([]int{2}, 5, 6)
	d := f32([]int{2}, 7, 8)
	got = mustRun(t, node("ConcatFromSequence", ai("axis", -1), ai("new_axis", 1)), seq(c, d))
	same(t, "stack last", got, f32([]int{2, 2}, 5, 7, 6, 8))
	got = mustRun(t, node("ConcatFromSequence", ai("axis", 0), ai("new_axis", 1)), seq(c, d))
	same(t, "stack first", got, f32([]int{2, 2}, 5, 6, 7, 8))

	// Split then concat round-trips.
	x := iota32(3, 4)
	s := mustRun(t, node("SplitToSequence", ai("axis", 1), ai("keepdims", 0)), x)
	same(t, "round trip", mustRun(t, node("ConcatFromSequence", ai("axis", 1), ai("new_axis", 1)), s), x)
}

func TestErrors(t *testing.T) {
	a := f32([]int{1}, 1)
	i := tensor.From([]int64{1}, 1)
	s := seq(a, a)
	cases := []struct {
		n    *ir.Node
		in   []*tensor.Tensor
		want string
	}{
		{node("SequenceConstruct"), []*tensor.Tensor{a, i}, "input 1 is int64"},
		{node("SequenceConstruct"), []*tensor.Tensor{a, s}, "must be a tensor"},
		{node("SequenceInsert"), []*tensor.Tensor{s, i}, "tensor is int64"},
		{node("SequenceInsert"), []*tensor.Tensor{s, a, tensor.Scalar(int64(3))}, "out of range"},
		{node("SequenceInsert"), []*tensor.Tensor{s, a, tensor.Scalar(int64(-3))}, "out of range"},
		{node("SequenceInsert"), []*tensor.Tensor{s, a, tensor.Scalar(float32(0))}, "int32 or int64"},
		{node("SequenceAt"), []*tensor.Tensor{s, tensor.Scalar(int64(2))}, "out of range"},
		{node("SequenceAt"), []*tensor.Tensor{s}, "missing"},
		{node("SequenceAt"), []*tensor.Tensor{a, tensor.Scalar(int64(0))}, "must be a sequence"},
		{node("SequenceErase"), []*tensor.Tensor{seq()}, "out of range"},
		{node("SequenceErase"), []*tensor.Tensor{s, tensor.From([]int64{0, 1}, 2)}, "scalar"},
		{node("SequenceLength"), []*tensor.Tensor{nil}, "missing"},
		{node("SplitToSequence"), []*tensor.Tensor{tensor.Scalar(float32(1))}, "rank at least 1"},
		{node("SplitToSequence", ai("axis", 2)), []*tensor.Tensor{iota32(2, 2)}, "axis 2 out of range"},
		{node("SplitToSequence"), []*tensor.Tensor{iota32(4), tensor.Scalar(int64(0))}, "positive"},
		{node("SplitToSequence"), []*tensor.Tensor{iota32(4), tensor.From([]int64{1, 2}, 2)}, "sums to 3"},
		{node("SplitToSequence"), []*tensor.Tensor{iota32(4), tensor.From([]int64{5, -1}, 2)}, "negative"},
		{node("ConcatFromSequence"), []*tensor.Tensor{s}, "axis is required"},
		{node("ConcatFromSequence", ai("axis", 0)), []*tensor.Tensor{seq()}, "empty"},
		{node("ConcatFromSequence", ai("axis", 0)), []*tensor.Tensor{seq(a, i)}, "element 1 is int64"},
		{node("ConcatFromSequence", ai("axis", 0)), []*tensor.Tensor{seq(a, iota32(1, 1))}, "ranks differ"},
		{node("ConcatFromSequence", ai("axis", 1)), []*tensor.Tensor{seq(iota32(1, 2), iota32(2, 1))}, "dimension 0 differs"},
		{node("ConcatFromSequence", ai("axis", 1), ai("new_axis", 1)), []*tensor.Tensor{seq(iota32(2), iota32(3))}, "dimension 0 differs"},
		{node("ConcatFromSequence", ai("axis", 2), ai("new_axis", 1)), []*tensor.Tensor{s}, "out of range"},
		{node("ConcatFromSequence", ai("axis", 0)), []*tensor.Tensor{seq(tensor.Scalar(float32(1)))}, "scalars"},
	}
	for _, tc := range cases {
		_, err := runOp(tc.n, tc.in...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: got error %v, want one containing %q", tc.n.OpType, tc.in, err, tc.want)
		}
	}
}

func TestInfer(t *testing.T) {
	f := ir.InferInput{Present: true, Type: ir.StaticType(tensor.Float32, []int{2, 3})}
	i64 := ir.InferInput{Present: true, Type: ir.StaticType(tensor.Int64, nil)}
	sq := ir.InferInput{Present: true, Type: ir.Type{DType: tensor.Sequence}}
	cases := []struct {
		n    *ir.Node
		in   []ir.InferInput
		want ir.Type
		err  string
	}{
		{node("SequenceConstruct"), []ir.InferInput{f, f}, seqType, ""},
		{node("SequenceConstruct"), []ir.InferInput{f, i64}, ir.Type{}, "int64"},
		{node("SequenceEmpty"), nil, seqType, ""},
		{node("SequenceInsert"), []ir.InferInput{sq, f, i64}, seqType, ""},
		{node("SequenceInsert"), []ir.InferInput{f, f}, ir.Type{}, "must be a sequence"},
		{node("SequenceAt"), []ir.InferInput{sq, i64}, ir.Type{}, ""},
		{node("SequenceAt"), []ir.InferInput{sq, f}, ir.Type{}, "int32 or int64"},
		{node("SequenceErase"), []ir.InferInput{sq}, seqType, ""},
		{node("SequenceLength"), []ir.InferInput{sq}, ir.StaticType(tensor.Int64, nil), ""},
		{node("SplitToSequence", ai("axis", 1)), []ir.InferInput{f}, seqType, ""},
		{node("SplitToSequence", ai("axis", 2)), []ir.InferInput{f}, ir.Type{}, "out of range"},
		{node("ConcatFromSequence", ai("axis", 0)), []ir.InferInput{sq}, ir.Type{}, ""},
		{node("ConcatFromSequence"), []ir.InferInput{sq}, ir.Type{}, "axis is required"},
	}
	for _, tc := range cases {
		got, err := Ops()[tc.n.OpType].Infer(tc.n, tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got error %v, want one containing %q", tc.n.OpType, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.n.OpType, err)
			continue
		}
		if len(got) != 1 || got[0].DType != tc.want.DType || got[0].RankKnown != tc.want.RankKnown || len(got[0].Shape) != len(tc.want.Shape) {
			t.Errorf("%s: got %+v, want %+v", tc.n.OpType, got, tc.want)
		}
	}
}
