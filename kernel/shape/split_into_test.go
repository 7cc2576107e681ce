package shape

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// TestSplitInto: Split's Into gives Run's outputs, without allocating, on
// random shapes, axes and split sizes (attribute, input and equal split).
func TestSplitInto(t *testing.T) {
	ops := Ops()
	r := rand.New(rand.NewPCG(9, 10))
	ctx := &kernel.Ctx{}
	for it := 0; it < 200; it++ {
		rank := 1 + r.IntN(4)
		shape := make([]int, rank)
		for i := range shape {
			shape[i] = 1 + r.IntN(5)
		}
		ax := r.IntN(rank)
		nOut := 1 + r.IntN(3)
		sizes := make([]int64, nOut)
		rest := shape[ax]
		for i := 0; i < nOut-1; i++ {
			sizes[i] = int64(r.IntN(rest + 1))
			rest -= int(sizes[i])
		}
		sizes[nOut-1] = int64(rest)
		outs := make([]string, nOut)
		for i := range outs {
			outs[i] = "y"
		}
		attrs := map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: int64(ax - rank*(it%2))}}
		x := tensor.New(tensor.Float32, shape...)
		for i, v := range x.Data.([]float32) {
			x.Data.([]float32)[i] = float32(i) + v
		}
		in := []*tensor.Tensor{x}
		n := &ir.Node{OpType: "Split", Version: 13, Inputs: []string{"x", "s"}, Outputs: outs, Attrs: attrs}
		switch it % 3 {
		case 0:
			in = append(in, tensor.From(sizes, nOut))
		case 1:
			n.Version = 11
			attrs["split"] = &ir.Attr{Name: "split", Kind: ir.AttrInts, Ints: sizes}
		}
		if it%7 == 0 {
			xi := tensor.New(tensor.Int64, shape...)
			for i := range xi.Data.([]int64) {
				xi.Data.([]int64)[i] = int64(i)
			}
			in[0] = xi
		}
		want, err := ops["Split"].Run(ctx, n, in)
		if err != nil {
			continue // e.g. an equal split that does not divide
		}
		got := make([]*tensor.Tensor, len(want))
		for i, w := range want {
			got[i] = tensor.New(w.DType, w.Shape...)
		}
		if err := ops["Split"].Into(ctx, n, in, got); err != nil {
			t.Fatalf("Split Into on %v axis %d sizes %v: %v", shape, ax, sizes, err)
		}
		for i := range want {
			if !reflect.DeepEqual(got[i].Data, want[i].Data) {
				t.Fatalf("Split on %v axis %d sizes %v: output %d: Into %v, Run %v", shape, ax, sizes, i, got[i].Data, want[i].Data)
			}
		}
		if a := testing.AllocsPerRun(5, func() { _ = ops["Split"].Into(ctx, n, in, got) }); a != 0 && in[0].DType == tensor.Float32 {
			t.Fatalf("Split Into allocates %.0f times", a)
		}
	}
}
