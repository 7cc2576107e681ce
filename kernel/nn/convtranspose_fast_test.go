package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/tensor"
)

// TestConvTransposeTiled checks the per-tap GEMMs against convGEMM's
// zero-inserted columns, bit for bit, at every level, for kernels that
// tile the output (2x2/2, 3x3/3, 2x3/(2,3), a batch of 2), with NaN, ±Inf
// and -0 inputs; and that a non-finite weight or an overlapping kernel
// leaves the general path to run.
func TestConvTransposeTiled(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	for i, c := range []struct{ n, cin, m, h, w, kh, kw int }{
		{1, 8, 4, 5, 6, 2, 2}, {2, 3, 5, 4, 3, 3, 3}, {1, 17, 6, 3, 7, 2, 3},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			x := tensor.New(tensor.Float32, c.n, c.cin, c.h, c.w)
			w := tensor.New(tensor.Float32, c.cin, c.m, c.kh, c.kw)
			for _, d := range [][]float32{x.Data.([]float32), w.Data.([]float32)} {
				for j := range d {
					d[j] = float32(r.NormFloat64())
				}
			}
			xd := x.Data.([]float32)
			xd[0], xd[3], xd[len(xd)-1] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
			n := &ir.Node{OpType: "ConvTranspose", Attrs: map[string]*ir.Attr{
				"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(c.kh), int64(c.kw)}}}}
			s := &convSetup{N: c.n, C: c.cin, G: 1, Cg: c.cin, Mg: c.m, M: c.m}
			g, err := transposeGeom(n, []int{c.h, c.w}, []int{c.kh, c.kw})
			if err != nil {
				t.Fatal(err)
			}
			s.g = g
			want := convGEMM(machine{}, s, xd, regroup(s, w.Data.([]float32)), true, sgemmP)
			got, err := kerneltest.Twins(t, "ConvTranspose", nil, func(kc *kernel.Ctx) ([]*tensor.Tensor, error) {
				y := make([]float32, len(want))
				if !convTransposeTiled(machineOf(kc), s, xd, w.Data.([]float32), y) {
					t.Fatal("convTransposeTiled declined")
				}
				return []*tensor.Tensor{tensor.From(y, len(y))}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			gd := got[0].Data.([]float32)
			for j := range want {
				if math.Float32bits(gd[j]) != math.Float32bits(want[j]) {
					t.Fatalf("output %d: %v (%#x), convGEMM %v (%#x)", j, gd[j], math.Float32bits(gd[j]), want[j], math.Float32bits(want[j]))
				}
			}
			w.Data.([]float32)[1] = float32(math.Inf(-1))
			if convTransposeTiled(machine{}, s, xd, w.Data.([]float32), make([]float32, len(want))) {
				t.Error("an infinite weight took the tiled path")
			}
		})
	}
	n := &ir.Node{OpType: "ConvTranspose", Attrs: map[string]*ir.Attr{"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{1, 1}}}}
	g, _ := transposeGeom(n, []int{4, 4}, []int{2, 2})
	s := &convSetup{N: 1, C: 1, G: 1, Cg: 1, Mg: 1, M: 1, g: g}
	if convTransposeTiled(machine{}, s, make([]float32, 16), make([]float32, 4), make([]float32, 25)) {
		t.Error("an overlapping kernel (stride 1) took the tiled path")
	}
}
