package reduce

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// TestReduceBlocks: ReduceSum and ReduceMean's Into over consecutive
// reduced axes (rows eight at a time, planes) give the row-major walk's
// bits (Run's), on shapes large enough for every block path, with -0,
// NaN and infinities among the values.
func TestReduceBlocks(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	ops := Ops()
	for _, tc := range []struct {
		shape []int
		axes  []int64
	}{
		{[]int{1, 64, 517}, []int64{2}},      // a Conv1d network's mean over time
		{[]int{3, 17, 9, 11}, []int64{2, 3}}, // spatial mean
		{[]int{2, 37, 1, 21}, []int64{1}},    // channels, a size-1 axis between
		{[]int{5, 7, 33}, []int64{0}},        // the outermost axis
		{[]int{4, 6, 8, 10}, []int64{1, 2}},  // a middle block
		{[]int{4, 6, 8, 10}, []int64{0, 2}},  // not consecutive: the walk
		{[]int{13, 1}, []int64{0, 1}},        // everything
	} {
		x := tensor.New(tensor.Float32, tc.shape...)
		xv := x.Data.([]float32)
		for i := range xv {
			switch r.Intn(40) {
			case 0:
				xv[i] = float32(math.Copysign(0, -1))
			case 1:
				xv[i] = float32(math.NaN())
			case 2:
				xv[i] = float32(math.Inf(1 - 2*r.Intn(2)))
			default:
				xv[i] = float32(r.NormFloat64() * 1e3)
			}
		}
		if len(xv) > 20 {
			xv[len(xv)/2] = float32(math.Copysign(0, -1)) // sums that stay -0 are +0 in both
		}
		for _, op := range []string{"ReduceSum", "ReduceMean"} {
			v := int64(13) // axes from the second input: ReduceSum 13, ReduceMean 18
			if op == "ReduceMean" {
				v = 18
			}
			n := &ir.Node{OpType: op, Version: v, Attrs: map[string]*ir.Attr{"keepdims": {Name: "keepdims", Kind: ir.AttrInt, I: 1}}}
			in := []*tensor.Tensor{x, tensor.From(tc.axes, len(tc.axes))}
			want, err := ops[op].Run(&kernel.Ctx{ISA: kernel.ISAPortable}, n, in)
			if err != nil {
				t.Fatal(err)
			}
			kept := 1
			for d, n := range tc.shape {
				if !slices.Contains(tc.axes, int64(d)) {
					kept *= n
				}
			}
			if want[0].Len() != kept {
				t.Fatalf("%s %v over %v: output %v, the axes were not the ones reduced", op, tc.shape, tc.axes, want[0].Shape)
			}
			for _, isa := range kernel.ISAs() { // vmath's row sums at every level
				got := tensor.New(tensor.Float32, want[0].Shape...)
				if err := ops[op].Into(&kernel.Ctx{ISA: isa}, n, in, []*tensor.Tensor{got}); err != nil {
					t.Fatal(err)
				}
				if !sameF32(got, want[0]) {
					t.Fatalf("%s %v over %v, %v: Into differs from Run", op, tc.shape, tc.axes, isa)
				}
			}
		}
	}
}
