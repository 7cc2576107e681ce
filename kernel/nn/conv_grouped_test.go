package nn

import (
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// convGroupedCases are grouped convolutions whose groups fill whole
// 16-channel panels, for TestConvTwin: conv.direct runs each panel on its
// group's input planes (directGroups), the portable twin one im2col GEMM
// a group. RegNet's 16-channel groups at strides 1 and 2 and on a 7x7
// plane of 25 groups, ResNeXt's 32-channel ones (two-vector AVX-512
// tiles), 48 channels a group, fewer input than output channels a group,
// unpadded, dilated, 1-D, and random ones.
func convGroupedCases(r *rand.Rand) []convCase {
	p1 := ints("pads", 1, 1, 1, 1)
	cs := []convCase{
		{[]int{1, 32, 20, 20}, []int{32, 16, 3, 3}, []*ir.Attr{intAttr("group", 2), p1}},
		{[]int{1, 32, 23, 22}, []int{32, 16, 3, 3}, []*ir.Attr{intAttr("group", 2), p1, ints("strides", 2, 2)}},
		{[]int{1, 400, 7, 7}, []int{400, 16, 3, 3}, []*ir.Attr{intAttr("group", 25), p1}},
		{[]int{2, 128, 9, 9}, []int{128, 32, 3, 3}, []*ir.Attr{intAttr("group", 4), p1}},
		{[]int{1, 96, 11, 13}, []int{96, 48, 3, 3}, []*ir.Attr{intAttr("group", 2), p1, ints("strides", 1, 2)}},
		{[]int{1, 24, 10, 10}, []int{48, 8, 3, 3}, []*ir.Attr{intAttr("group", 3), p1}},
		{[]int{1, 32, 12, 12}, []int{64, 8, 3, 3}, []*ir.Attr{intAttr("group", 4)}},
		{[]int{1, 32, 15, 15}, []int{32, 16, 3, 3}, []*ir.Attr{intAttr("group", 2), ints("dilations", 2, 2), ints("pads", 2, 2, 2, 2)}},
		{[]int{1, 32, 100}, []int{32, 16, 5}, []*ir.Attr{intAttr("group", 2), ints("pads", 2, 2)}},
		// Groups of fewer than 16 output channels (groupTaps): ResNeXt's 4
		// and 8 at strides 1 and 2, 3 from 5, dilated, 1-D.
		{[]int{2, 128, 14, 14}, []int{128, 4, 3, 3}, []*ir.Attr{intAttr("group", 32), p1}},
		{[]int{1, 64, 15, 16}, []int{64, 8, 3, 3}, []*ir.Attr{intAttr("group", 8), p1, ints("strides", 2, 2)}},
		{[]int{1, 10, 9, 23}, []int{6, 5, 3, 2}, []*ir.Attr{intAttr("group", 2), ints("pads", 0, 1, 2, 0)}},
		{[]int{1, 12, 13, 13}, []int{12, 4, 3, 3}, []*ir.Attr{intAttr("group", 3), ints("dilations", 2, 2), ints("pads", 2, 2, 2, 2)}},
		{[]int{1, 16, 70}, []int{24, 4, 5}, []*ir.Attr{intAttr("group", 4), ints("pads", 2, 2), ints("strides", 2)}},
	}
	for i := 0; i < 6; i++ {
		g, cg, mg := 1+r.Intn(4), 1+r.Intn(20), 16*(1+r.Intn(3))
		k, s := 1+2*r.Intn(2), 1+r.Intn(2)
		h, w := k+r.Intn(20), k+r.Intn(30)
		cs = append(cs, convCase{[]int{1 + r.Intn(2), g * cg, h, w}, []int{g * mg, cg, k, k},
			[]*ir.Attr{intAttr("group", int64(g)), ints("strides", int64(s), int64(s)),
				ints("pads", int64(r.Intn(k)), int64(r.Intn(k)), int64(r.Intn(k)), int64(r.Intn(k)))}})
	}
	return cs
}

// TestConvGroupedZTiles: grouped conv.direct on every AVX-512 tile whose
// panels fit the groups (forced.tileZ) gives the portable twin's bits, at
// 1 and 3 workers.
func TestConvGroupedZTiles(t *testing.T) {
	t.Parallel()
	if !mach(nil, kernel.ISABest, nil).z {
		t.Skip("no AVX-512 direct kernels on this CPU")
	}
	r := rand.New(rand.NewSource(9))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	tried := 0
	for ci, c := range convGroupedCases(r) {
		if len(c.x) != 4 || (c.w[0]/int(c.attrs[0].I))%16 != 0 {
			continue // not 2-D, or groupTaps' groups
		}
		n := node("Conv", append(append([]*ir.Attr{}, c.attrs...), strAttr(kernel.TacticAttr, TacticDirect))...)
		in := []*tensor.Tensor{tensor.From(specialF32(r, prod(c.x), ci%2 == 0), c.x...),
			tensor.From(specialF32(r, prod(c.w), false), c.w...), tensor.From(specialF32(r, c.w[0], false), c.w[0])}
		want, err := runConv(ctxAt(nil, kernel.ISAPortable, nil), n, in)
		if err != nil {
			t.Fatalf("case %d: %v", ci, err)
		}
		s, err := setupConv(n, c.x, c.w)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range amd64.ConvZShapes {
			z := zShape{k[0], k[1], k[2]}
			if k[3] != s.g.stride[1] || s.Mg%(16*z.C) != 0 {
				continue
			}
			tried++
			for _, p := range pools {
				got, err := runConv(ctxAt(p, kernel.ISABest, &forced{tileZ: z}), n, in)
				if err != nil {
					t.Fatal(err)
				}
				if d := sameF32(got[0].Data.([]float32), want[0].Data.([]float32)); d >= 0 {
					t.Fatalf("case %d (%v * %v), tile %+v, %d workers: y[%d] = %g, portable %g", ci, c.x, c.w, z, p.Workers(), d, got[0].Data.([]float32)[d], want[0].Data.([]float32)[d])
				}
			}
		}
	}
	if tried == 0 {
		t.Fatal("no tile fitted a grouped case")
	}
}
