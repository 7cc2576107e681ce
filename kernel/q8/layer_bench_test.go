package q8

import (
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// BenchmarkQ8Conv runs resnet18-like int8 conv layers (Relu fused).
func BenchmarkQ8Conv(b *testing.B) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(5, 6))
	type cs struct {
		name                    string
		c, h, m, k, stride, pad int
	}
	for _, s := range []cs{{"conv1", 3, 224, 64, 7, 2, 3}, {"l1", 64, 56, 64, 3, 1, 1}, {"l3", 256, 14, 256, 3, 1, 1}, {"l4", 512, 7, 512, 3, 1, 1}} {
		x := randF32(r, s.c*s.h*s.h)
		wq := make([]int8, s.m*s.c*s.k*s.k)
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"base":        {Name: "base", Kind: ir.AttrString, S: "Conv"},
			"x_scale":     {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
			"layout":      {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
			"activation":  {Name: "activation", Kind: ir.AttrString, S: "Relu"},
			"act_version": {Name: "act_version", Kind: ir.AttrInt, I: 14},
			"strides":     {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
			"pads":        {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(s.pad), int64(s.pad), int64(s.pad), int64(s.pad)}},
		}}
		in := []*tensor.Tensor{tensor.From(x, 1, s.c, s.h, s.h), tensor.From(wq, s.m, s.c, s.k, s.k), tensor.From(randPos(r, s.m), s.m), tensor.From(randF32(r, s.m), s.m)}
		op, _ := reg.Lookup(node)
		oh := (s.h+2*s.pad-s.k)/s.stride + 1
		out := []*tensor.Tensor{tensor.New(tensor.Float32, 1, s.m, oh, oh)}
		ctx := &kernel.Ctx{Pool: parallel.New(1)}
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := op.Into(ctx, node, in, out); err != nil {
					b.Fatal(err)
				}
			}
			macs := float64(s.m * s.c * s.k * s.k * oh * oh)
			b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}
