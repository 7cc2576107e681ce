package shape

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestParallelCopies: float32 Transpose, Slice and Concat outputs large
// enough to be split over the workers are Run's, element for element, at
// 1, 2 and 3 workers, and the split Into allocates nothing.
func TestParallelCopies(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	ops := Ops()
	pools := []*parallel.Pool{nil, parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	i64 := func(v ...int64) *tensor.Tensor { return tensor.From(v, len(v)) }
	iters := 16
	if raceEnabled {
		iters = 3 // the race detector slows the copies a hundredfold
	}
	for iter := 0; iter < iters; iter++ {
		rank := 2 + r.Intn(4)
		shape := make([]int, rank)
		n := 1
		for i := range shape {
			shape[i] = 1 + r.Intn(32)
			if i == 0 && r.Intn(3) == 0 {
				shape[i] = 1 // a leading 1 (batch 1)
			}
			n *= shape[i]
		}
		if n < 1<<15 {
			shape[rank-1] *= (1<<15)/n + 1 // large enough for the pool to split
		}
		x := tensor.New(tensor.Float32, shape...)
		for i := range x.Data.([]float32) {
			x.Data.([]float32)[i] = float32(r.NormFloat64())
		}
		perm := r.Perm(rank)
		p64 := make([]int64, rank)
		for i, v := range perm {
			p64[i] = int64(v)
		}
		ax := r.Intn(rank)
		start, end := int64(r.Intn(shape[ax])), int64(shape[ax])
		step := int64(1 + r.Intn(2))
		axisAttr := map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: int64(ax)}}
		cases := []struct {
			op string
			n  *ir.Node
			in []*tensor.Tensor
		}{
			{"Transpose", &ir.Node{OpType: "Transpose", Version: 13, Attrs: map[string]*ir.Attr{"perm": {Name: "perm", Kind: ir.AttrInts, Ints: p64}}}, []*tensor.Tensor{x}},
			{"Slice", &ir.Node{OpType: "Slice", Version: 13}, []*tensor.Tensor{x, i64(start), i64(end), i64(int64(ax)), i64(step)}},
			{"Concat", &ir.Node{OpType: "Concat", Version: 13, Attrs: axisAttr}, []*tensor.Tensor{x, x}},
		}
		for _, tc := range cases {
			want, err := ops[tc.op].Run(nil, tc.n, tc.in)
			if err != nil {
				t.Fatalf("%s Run: %v", tc.op, err)
			}
			for _, p := range pools {
				ctx := &kernel.Ctx{Pool: p}
				out := tensor.New(want[0].DType, want[0].Shape...)
				outs := []*tensor.Tensor{out}
				if err := ops[tc.op].Into(ctx, tc.n, tc.in, outs); err != nil {
					t.Fatalf("%s Into: %v", tc.op, err)
				}
				if !reflect.DeepEqual(out.Data, want[0].Data) {
					t.Fatalf("%s of %v (perm %v, axis %d) at %d workers differs from Run", tc.op, shape, perm, ax, p.Workers())
				}
				if iter < 4 && !raceEnabled {
					if got := testing.AllocsPerRun(3, func() { _ = ops[tc.op].Into(ctx, tc.n, tc.in, outs) }); got != 0 {
						t.Fatalf("%s Into at %d workers allocates %.0f times", tc.op, p.Workers(), got)
					}
				}
			}
		}
	}
}

// TestConcatRange: every cut of a concatenation's output into two ranges
// writes what concatT writes.
func TestConcatRange(t *testing.T) {
	a := tensor.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := tensor.From([]float32{7, 8, 9, 10}, 2, 2)
	in := []*tensor.Tensor{a, b}
	want := make([]float32, 10)
	concatT(want, in, 2, 1, 1)
	for cut := 0; cut <= 10; cut++ {
		got := make([]float32, 10)
		concatRange(got, in, 2, 1, 1, 0, cut)
		concatRange(got, in, 2, 1, 1, cut, 10)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d: %v, want %v", cut, got, want)
		}
	}
}
