package reduce

import (
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

func sameF32(a, b *tensor.Tensor) bool {
	if a.DType != b.DType || !reflect.DeepEqual(a.Shape, b.Shape) {
		return false
	}
	x, ok := a.Data.([]float32)
	if !ok {
		return reflect.DeepEqual(a.Data, b.Data)
	}
	y := b.Data.([]float32)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			return false
		}
	}
	return true
}

func TestIntoMatchesRun(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	ops := Ops()
	ctx := &kernel.Ctx{}
	for iter := 0; iter < 300; iter++ {
		shape := make([]int, 1+r.Intn(4))
		for i := range shape {
			shape[i] = 1 + r.Intn(5)
		}
		x := tensor.New(tensor.Float32, shape...)
		for i := range x.Data.([]float32) {
			x.Data.([]float32)[i] = float32(r.NormFloat64() * 4)
		}
		axis := int64(r.Intn(2*len(shape)) - len(shape))
		attrs := map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: axis}}
		var axes []int64
		for d := range shape {
			if r.Intn(2) == 0 {
				axes = append(axes, int64(d))
			}
		}
		keep := map[string]*ir.Attr{"keepdims": {Name: "keepdims", Kind: ir.AttrInt, I: int64(r.Intn(2))}}
		cases := []struct {
			op string
			n  *ir.Node
			in []*tensor.Tensor
		}{
			{"Softmax", &ir.Node{OpType: "Softmax", Version: 13, Attrs: attrs}, []*tensor.Tensor{x}},
			{"LogSoftmax", &ir.Node{OpType: "LogSoftmax", Version: 13, Attrs: attrs}, []*tensor.Tensor{x}},
			{"Softmax", &ir.Node{OpType: "Softmax", Version: 11}, []*tensor.Tensor{x}},
			{"ReduceSum", &ir.Node{OpType: "ReduceSum", Version: 13, Attrs: keep}, []*tensor.Tensor{x, tensor.From(axes, len(axes))}},
			{"ReduceMean", &ir.Node{OpType: "ReduceMean", Version: 13, Attrs: map[string]*ir.Attr{"axes": {Name: "axes", Kind: ir.AttrInts, Ints: axes}}}, []*tensor.Tensor{x}},
			{"ReduceMean", &ir.Node{OpType: "ReduceMean", Version: 18, Attrs: keep}, []*tensor.Tensor{x, tensor.From(axes, len(axes))}},
		}
		for _, tc := range cases {
			want, err := ops[tc.op].Run(ctx, tc.n, tc.in)
			if err != nil {
				t.Fatalf("%s Run: %v", tc.op, err)
			}
			out := tensor.New(tensor.Float32, want[0].Shape...)
			if err := ops[tc.op].Into(ctx, tc.n, tc.in, []*tensor.Tensor{out}); err != nil {
				t.Fatalf("%s Into: %v", tc.op, err)
			}
			if !sameF32(out, want[0]) {
				t.Fatalf("%s on %v: Into differs from Run", tc.op, shape)
			}
			if ops[tc.op].InPlace {
				alias := x.Clone()
				if err := ops[tc.op].Into(ctx, tc.n, []*tensor.Tensor{alias}, []*tensor.Tensor{alias}); err != nil {
					t.Fatal(err)
				}
				if !sameF32(alias, want[0]) {
					t.Fatalf("%s on %v: Into in place differs from Run", tc.op, shape)
				}
			}
			if got := testing.AllocsPerRun(5, func() { _ = ops[tc.op].Into(ctx, tc.n, tc.in, []*tensor.Tensor{out}) }); got > 1 {
				// one allocation is the out slice literal of this closure
				t.Fatalf("%s Into allocates %.0f times", tc.op, got)
			}
		}
	}
}
