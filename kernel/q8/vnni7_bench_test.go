package q8

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkQ8Pointwise7 runs zoo-like pointwise (and 3×3) int8 convolutions (Relu
// fused) with 8-bit weights (the int16 GEMM on AVX2) and 7-bit weights
// (the u8 × s7 cols tiles).
func BenchmarkQ8Pointwise7(b *testing.B) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(5, 7))
	type cs struct{ c, h, m, k int }
	for _, s := range []cs{{16, 112, 96, 1}, {64, 56, 256, 1}, {256, 14, 1024, 1}, {960, 7, 160, 1}, {64, 56, 64, 3}, {256, 14, 256, 3}} {
		x := randF32(r, s.c*s.h*s.h)
		wq := make([]int8, s.m*s.c*s.k*s.k)
		for i := range wq {
			wq[i] = int8(r.IntN(127) - 63)
		}
		in := []*tensor.Tensor{tensor.From(x, 1, s.c, s.h, s.h), tensor.From(wq, s.m, s.c, s.k, s.k), tensor.From(randPos(r, s.m), s.m), tensor.From(randF32(r, s.m), s.m)}
		for _, bits := range []int64{8, 7} {
			node := q7Node("Conv", bits, map[string]*ir.Attr{
				"activation":  {Name: "activation", Kind: ir.AttrString, S: "Relu"},
				"act_version": {Name: "act_version", Kind: ir.AttrInt, I: 14},
				"pads":        {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(s.k / 2), int64(s.k / 2), int64(s.k / 2), int64(s.k / 2)}},
			})
			op, _ := reg.Lookup(node)
			out := []*tensor.Tensor{tensor.New(tensor.Float32, 1, s.m, s.h, s.h)}
			ctx := &kernel.Ctx{Pool: parallel.New(1)}
			b.Run(fmt.Sprintf("c%d_h%d_m%d_k%d_w%d", s.c, s.h, s.m, s.k, bits), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := op.Into(ctx, node, in, out); err != nil {
						b.Fatal(err)
					}
				}
				macs := float64(s.m * s.c * s.k * s.k * s.h * s.h)
				b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
