package shape

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

func TestIntoMatchesRun(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	ops := Ops()
	ctx := &kernel.Ctx{}
	ints := func(name string, v ...int64) map[string]*ir.Attr {
		return map[string]*ir.Attr{name: {Name: name, Kind: ir.AttrInts, Ints: v}}
	}
	i64 := func(v ...int64) *tensor.Tensor { return tensor.From(v, len(v)) }
	for iter := 0; iter < 200; iter++ {
		shape := make([]int, 1+r.Intn(4))
		for i := range shape {
			shape[i] = 1 + r.Intn(4)
		}
		rank := len(shape)
		x := tensor.New(tensor.Float32, shape...)
		for i := range x.Data.([]float32) {
			x.Data.([]float32)[i] = float32(r.NormFloat64())
		}
		xi := tensor.New(tensor.Int64, shape...)
		for i := range xi.Data.([]int64) {
			xi.Data.([]int64)[i] = r.Int63n(100)
		}
		perm := r.Perm(rank)
		p64 := make([]int64, rank)
		for i, v := range perm {
			p64[i] = int64(v)
		}
		ax := int64(r.Intn(rank))
		var starts, ends, axes, steps []int64
		for d := 0; d < rank; d++ {
			if r.Intn(2) == 0 {
				continue
			}
			axes = append(axes, int64(d)-int64(rank*r.Intn(2)))
			starts = append(starts, int64(r.Intn(2*shape[d]+1)-shape[d]))
			ends = append(ends, int64(r.Intn(2*shape[d]+3)-shape[d]-1))
			st := int64(1 + r.Intn(2))
			if r.Intn(3) == 0 {
				st = -st
			}
			steps = append(steps, st)
		}
		idx := tensor.New(tensor.Int64, 1+r.Intn(3), 2)
		for i := range idx.Data.([]int64) {
			d := int64(shape[ax])
			idx.Data.([]int64)[i] = r.Int63n(2*d) - d
		}
		cases := []struct {
			op string
			n  *ir.Node
			in []*tensor.Tensor
		}{
			{"Transpose", &ir.Node{OpType: "Transpose", Version: 13, Attrs: ints("perm", p64...)}, []*tensor.Tensor{x}},
			{"Transpose", &ir.Node{OpType: "Transpose", Version: 13}, []*tensor.Tensor{xi}},
			{"Slice", &ir.Node{OpType: "Slice", Version: 13}, []*tensor.Tensor{x, i64(starts...), i64(ends...), i64(axes...), i64(steps...)}},
			{"Concat", &ir.Node{OpType: "Concat", Version: 13, Attrs: map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: ax}}}, []*tensor.Tensor{x, x, x}},
			{"Gather", &ir.Node{OpType: "Gather", Version: 13, Attrs: map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: ax}}}, []*tensor.Tensor{x, idx}},
			{"Gather", &ir.Node{OpType: "Gather", Version: 13, Attrs: map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: ax}}}, []*tensor.Tensor{xi, idx}},
			{"Reshape", &ir.Node{OpType: "Reshape", Version: 14}, []*tensor.Tensor{x, i64(-1)}},
			{"Flatten", &ir.Node{OpType: "Flatten", Version: 13}, []*tensor.Tensor{x}},
			{"Unsqueeze", &ir.Node{OpType: "Unsqueeze", Version: 13}, []*tensor.Tensor{x, i64(0)}},
			{"Squeeze", &ir.Node{OpType: "Squeeze", Version: 13}, []*tensor.Tensor{x}},
			{"Identity", &ir.Node{OpType: "Identity", Version: 13}, []*tensor.Tensor{xi}},
			{"Dropout", &ir.Node{OpType: "Dropout", Version: 13}, []*tensor.Tensor{x}},
		}
		for _, tc := range cases {
			want, err := ops[tc.op].Run(ctx, tc.n, tc.in)
			if err != nil {
				t.Fatalf("%s Run: %v", tc.op, err)
			}
			out := tensor.New(want[0].DType, want[0].Shape...)
			outs := []*tensor.Tensor{out}
			if err := ops[tc.op].Into(ctx, tc.n, tc.in, outs); err != nil {
				t.Fatalf("%s Into: %v", tc.op, err)
			}
			if !reflect.DeepEqual(out.Data, want[0].Data) {
				t.Fatalf("%s on %v: Into differs from Run:\n%v\n%v", tc.op, shape, out.Data, want[0].Data)
			}
			if got := testing.AllocsPerRun(5, func() { _ = ops[tc.op].Into(ctx, tc.n, tc.in, outs) }); got != 0 {
				t.Fatalf("%s Into allocates %.0f times", tc.op, got)
			}
		}
	}
}
