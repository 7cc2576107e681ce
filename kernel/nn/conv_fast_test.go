package nn

import (
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

type convCase struct {
	x, w  []int
	attrs []*ir.Attr
}

func convCases(r *rand.Rand) []convCase {
	cs := []convCase{
		{[]int{1, 8, 16, 16}, []int{8, 1, 3, 3}, []*ir.Attr{intAttr("group", 8), ints("pads", 1, 1, 1, 1)}},
		{[]int{2, 5, 9, 30}, []int{5, 1, 3, 3}, []*ir.Attr{intAttr("group", 5), ints("pads", 0, 2, 1, 0)}},
		{[]int{1, 3, 4, 4}, []int{3, 1, 3, 3}, []*ir.Attr{intAttr("group", 3)}},
		{[]int{1, 4, 13, 13}, []int{4, 1, 3, 3}, []*ir.Attr{intAttr("group", 4), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 16, 14, 14}, []int{24, 16, 1, 1}, nil},
		{[]int{2, 3, 17, 19}, []int{7, 3, 3, 3}, []*ir.Attr{ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 3, 32, 32}, []int{16, 3, 7, 7}, []*ir.Attr{ints("strides", 2, 2), ints("pads", 3, 3, 3, 3)}},
		{[]int{1, 8, 10, 10}, []int{12, 4, 3, 3}, []*ir.Attr{intAttr("group", 2), ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 16, 7, 7}, []int{40, 16, 1, 1}, []*ir.Attr{ints("strides", 2, 2)}},
		// 1x1 convolutions over planes that leave GEMM lanes idle, where
		// conv.direct is the preferred tactic (directPointwise).
		{[]int{1, 40, 7, 7}, []int{36, 40, 1, 1}, nil},
		{[]int{2, 24, 6, 6}, []int{20, 24, 1, 1}, nil},
		{[]int{1, 256, 13, 13}, []int{40, 256, 1, 1}, nil},
		// Dilated convolutions whose outer kernel rows read only padding
		// for most output rows (conv.direct's row classes, directRows),
		// three times so that one has special weights (no row classes).
		{[]int{1, 16, 14, 14}, []int{32, 16, 3, 3}, []*ir.Attr{ints("dilations", 12, 12), ints("pads", 12, 12, 12, 12)}},
		{[]int{1, 16, 14, 14}, []int{32, 16, 3, 3}, []*ir.Attr{ints("dilations", 12, 12), ints("pads", 12, 12, 12, 12)}},
		{[]int{2, 8, 14, 11}, []int{16, 8, 3, 3}, []*ir.Attr{ints("dilations", 9, 6), ints("pads", 9, 6, 9, 6)}},
		{[]int{1, 16, 13, 13}, []int{32, 16, 5, 5}, []*ir.Attr{ints("dilations", 4, 4), ints("pads", 8, 8, 8, 8), ints("strides", 2, 2)}},
		// Depthwise planes of many rows (most rows in one multi-row
		// kernel call, the last ones through the scratch row).
		{[]int{1, 6, 57, 57}, []int{6, 1, 3, 3}, []*ir.Attr{intAttr("group", 6), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}},
		{[]int{2, 3, 28, 28}, []int{3, 1, 3, 3}, []*ir.Attr{intAttr("group", 3), ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 2, 70, 9}, []int{2, 1, 3, 3}, []*ir.Attr{intAttr("group", 2), ints("pads", 1, 0, 1, 1)}},
		{[]int{1, 4, 7, 7}, []int{4, 1, 3, 3}, []*ir.Attr{intAttr("group", 4), ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 3, 9, 65}, []int{3, 1, 3, 3}, []*ir.Attr{intAttr("group", 3), ints("strides", 1, 2), ints("pads", 0, 1, 0, 0)}},
		// im2col GEMMs: one column block with row chunks sharing B packed
		// up front (14x14: a 4-column edge panel; 7x7: a 1-column one),
		// column blocks spread evenly over the workers (900 and 2500
		// columns), stride 2 read from padded planes (with their slack)
		// and from the unpadded input in place (whole vectors stop inside
		// the row), a padded input wider than the taps read.
		{[]int{1, 16, 14, 14}, []int{32, 16, 3, 3}, []*ir.Attr{ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 32, 7, 7}, []int{64, 32, 3, 3}, []*ir.Attr{ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 4, 30, 30}, []int{8, 4, 3, 3}, []*ir.Attr{ints("pads", 1, 1, 1, 1)}},
		{[]int{1, 2, 50, 50}, []int{13, 2, 3, 3}, []*ir.Attr{ints("pads", 1, 0, 1, 2)}},
		{[]int{1, 3, 40, 40}, []int{16, 3, 7, 7}, []*ir.Attr{ints("strides", 2, 2), ints("pads", 3, 3, 3, 3)}},
		{[]int{1, 4, 9, 40}, []int{8, 4, 1, 1}, []*ir.Attr{ints("strides", 2, 2)}},
		{[]int{1, 4, 11, 41}, []int{8, 4, 3, 3}, []*ir.Attr{ints("strides", 2, 2)}},
		{[]int{2, 3, 12, 37}, []int{9, 3, 2, 3}, []*ir.Attr{ints("strides", 3, 2), ints("pads", 1, 2, 0, 0)}},
		// Pads and strides far larger than the kernel: the im2col matrix
		// instead of padded planes.
		{[]int{1, 2, 3, 5}, []int{4, 2, 2, 2}, []*ir.Attr{ints("strides", 9, 9), ints("pads", 20, 20, 20, 20)}},
	}
	for i := 0; i < 12; i++ {
		c := 1 + r.Intn(6)
		h, w := 1+r.Intn(40), 1+r.Intn(40)
		p := r.Intn(2)
		cs = append(cs, convCase{[]int{1 + r.Intn(2), c, h + 2 - 2*p, w + 2 - 2*p}, []int{c, 1, 3, 3},
			[]*ir.Attr{intAttr("group", int64(c)), ints("pads", int64(p), int64(r.Intn(2)), int64(p), int64(r.Intn(2)))}})
	}
	// General convolutions (im2col packed straight into the GEMM's panels):
	// kernels 1-5, strides 1-3, dilations 1-2, wide rows (vector and
	// scalar segments), M around the 6-row tile.
	for i := 0; i < 12; i++ {
		c, m := 1+r.Intn(4), 1+r.Intn(14)
		kh, kw := 1+r.Intn(5), 1+r.Intn(5)
		dh, dw := 1+r.Intn(2), 1+r.Intn(2)
		h, w := (kh-1)*dh+1+r.Intn(20), (kw-1)*dw+1+r.Intn(70)
		cs = append(cs, convCase{[]int{1 + r.Intn(2), c, h, w}, []int{m, c, kh, kw},
			[]*ir.Attr{ints("strides", int64(1+r.Intn(3)), int64(1+r.Intn(3))), ints("dilations", int64(dh), int64(dw)),
				ints("pads", int64(r.Intn(kh)), int64(r.Intn(kw)), int64(r.Intn(kh)), int64(r.Intn(kw)))}})
	}
	// Depthwise 3x3 at strides 1 and 2 in either dimension, odd widths
	// (vector blocks plus a tail), pads on either side.
	for i := 0; i < 16; i++ {
		c := 1 + r.Intn(5)
		h, w := 3+r.Intn(30), 3+r.Intn(45)
		cs = append(cs, convCase{[]int{1 + r.Intn(2), c, h, w}, []int{c, 1, 3, 3},
			[]*ir.Attr{intAttr("group", int64(c)), ints("strides", int64(1+r.Intn(2)), int64(1+r.Intn(2))),
				ints("pads", int64(r.Intn(2)), int64(r.Intn(2)), int64(r.Intn(2)), int64(r.Intn(2)))}})
	}
	return append(append(cs, conv1DCases(r)...), convGroupedCases(r)...)
}

// TestConvTwin: Conv on the vector kernels (GEMM, depthwise 3x3) gives the
// portable twin's bits, with specials in the data, at 1, 2 and 8 workers,
// and Into gives Run's bits.
func TestConvTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(5))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for ci, c := range convCases(r) {
		x := tensor.From(specialF32(r, prod(c.x), ci%2 == 0), c.x...)
		w := tensor.From(specialF32(r, prod(c.w), ci%3 == 0), c.w...)
		b := tensor.From(specialF32(r, c.w[0], ci%4 == 1), c.w[0])
		in := []*tensor.Tensor{x, w, b}
		if ci%5 == 4 {
			in = in[:2] // no bias
		}
		// Every tactic the compiler may choose, and the default.
		tactics := append([]string{""}, convTactics(node("Conv", c.attrs...),
			[]ir.Type{ir.StaticType(tensor.Float32, c.x), ir.StaticType(tensor.Float32, c.w)})...)
		var ref []float32
		for ti, tac := range tactics {
			i := ci*10 + ti
			n := node("Conv", c.attrs...)
			if tac != "" {
				n = node("Conv", append(append([]*ir.Attr{}, c.attrs...), strAttr(kernel.TacticAttr, tac))...)
			}
			want, err := runConv(ctxAt(nil, kernel.ISAPortable, nil), n, in)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if ti == 0 {
				ref = want[0].Data.([]float32)
			} else if d := sameF32(want[0].Data.([]float32), ref); d >= 0 {
				t.Fatalf("case %d: tactic %q: y[%d] differs from the default tactic's", i, tac, d)
			}
			for pi := 0; pi < 2*len(pools); pi++ {
				// The AVX-512 direct kernels and, at the AVX2 level, the
				// AVX2 ones.
				p := pools[pi%len(pools)]
				level := kernel.ISABest
				if pi >= len(pools) {
					if tac != TacticDirect {
						continue
					}
					level = kernel.ISAAVX2
				}
				got, err := runConv(ctxAt(p, level, nil), n, in)
				if err != nil {
					t.Fatal(err)
				}
				if d := sameF32(got[0].Data.([]float32), want[0].Data.([]float32)); d >= 0 {
					t.Fatalf("case %d (%v * %v), %d workers: y[%d] = %g, portable %g", i, c.x, c.w, p.Workers(), d, got[0].Data.([]float32)[d], want[0].Data.([]float32)[d])
				}
				// Run with the direct kernels' panel prefetch where tiles
				// are few (the test's shapes), Into without it.
				y := tensor.New(tensor.Float32, want[0].Shape...)
				// At the AVX2 level, Into splits the direct kernel's
				// chains into k blocks of 13 steps (amd64.DirLoad).
				f := &forced{noPanelPF: true}
				if level == kernel.ISAAVX2 {
					f.dirKB = 13
				}
				err = intoConv(ctxAt(p, level, f), n, in, []*tensor.Tensor{y})
				if err != nil {
					t.Fatal(err)
				}
				if d := sameF32(y.Data.([]float32), want[0].Data.([]float32)); d >= 0 {
					t.Fatalf("case %d: Into y[%d] = %g, Run %g", i, d, y.Data.([]float32)[d], want[0].Data.([]float32)[d])
				}
			}
		}
	}
}

// TestConvTacticsSmallPlanes checks the preferred tactic of 1x1
// convolutions (directPointwise): conv.direct over 7x7, 6x6 and 5x5
// planes, and over 13x13 and 14x14 planes with 256 or more input channels
// and whole 32-channel pairs or 64 and more output channels; the GEMM
// elsewhere.
func TestConvTacticsSmallPlanes(t *testing.T) {
	for _, c := range []struct {
		h, w, k, m int
		want       string
	}{
		{7, 7, 64, 32, TacticDirect}, {6, 6, 64, 32, TacticDirect}, {5, 5, 64, 32, TacticDirect},
		{8, 8, 64, 32, TacticGemm1x1}, {14, 14, 64, 32, TacticGemm1x1}, {13, 13, 64, 32, TacticGemm1x1},
		{56, 56, 64, 32, TacticGemm1x1}, {1, 1, 64, 32, TacticGemm1x1}, {4, 4, 64, 32, TacticGemm1x1},
		{14, 14, 512, 128, TacticDirect}, {13, 13, 384, 64, TacticDirect}, {14, 14, 528, 32, TacticDirect},
		{13, 13, 384, 48, TacticGemm1x1}, {14, 14, 512, 24, TacticGemm1x1}, {8, 8, 2048, 512, TacticGemm1x1},
		{17, 17, 768, 192, TacticGemm1x1}, {28, 28, 512, 128, TacticGemm1x1},
	} {
		x, w := []int{1, c.k, c.h, c.w}, []int{c.m, c.k, 1, 1}
		got := convTactics(node("Conv"), []ir.Type{ir.StaticType(tensor.Float32, x), ir.StaticType(tensor.Float32, w)})
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("%dx%d plane, %d -> %d channels: tactics %v, want %s first", c.h, c.w, c.k, c.m, got, c.want)
		}
	}
}

// TestConvTacticsDense3x3 checks im2colFirst: im2col first for dense
// stride-1 3x3 (or larger) convolutions with C*kh*kw >= 4096 over 128 or
// more pixels (dilated too) and for those with C*kh*kw <= 32 (3-channel
// stems, any stride), conv.direct first elsewhere.
func TestConvTacticsDense3x3(t *testing.T) {
	for _, c := range []struct {
		h, k, m, kh, kw, stride, dil int
		want                         string
	}{
		{20, 2048, 512, 3, 3, 1, 1, TacticIm2col}, {20, 512, 512, 3, 3, 1, 4, TacticIm2col},
		{28, 512, 512, 3, 3, 1, 1, TacticIm2col}, {14, 512, 512, 3, 3, 1, 1, TacticIm2col},
		{12, 512, 64, 3, 3, 1, 1, TacticIm2col}, {28, 456, 64, 3, 3, 1, 1, TacticIm2col},
		{7, 512, 512, 3, 3, 1, 1, TacticDirect}, {11, 512, 512, 3, 3, 1, 1, TacticDirect},
		{56, 256, 256, 3, 3, 1, 1, TacticDirect}, {28, 455, 64, 3, 3, 1, 1, TacticDirect},
		{28, 512, 512, 3, 3, 2, 1, TacticDirect}, {17, 768, 192, 1, 7, 1, 1, TacticDirect},
		{28, 256, 64, 5, 5, 1, 1, TacticIm2col},
		{224, 3, 64, 3, 3, 1, 1, TacticIm2col}, {224, 3, 32, 3, 3, 2, 1, TacticIm2col},
		{224, 3, 64, 7, 7, 2, 1, TacticDirect}, {56, 4, 64, 3, 3, 1, 1, TacticDirect},
	} {
		p := int64((c.kh - 1) / 2 * c.dil)
		q := int64((c.kw - 1) / 2 * c.dil)
		n := node("Conv", ints("pads", p, q, p, q), ints("strides", int64(c.stride), int64(c.stride)), ints("dilations", int64(c.dil), int64(c.dil)))
		x, w := []int{1, c.k, c.h, c.h}, []int{c.m, c.k, c.kh, c.kw}
		got := convTactics(n, []ir.Type{ir.StaticType(tensor.Float32, x), ir.StaticType(tensor.Float32, w)})
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("%dx%d plane, %d -> %d channels, %dx%d/%d d%d: tactics %v, want %s first", c.h, c.h, c.k, c.m, c.kh, c.kw, c.stride, c.dil, got, c.want)
		}
	}
}

// TestConvTacticsDeep1x1 checks that 1x1 convolutions with C*M >= 2^20
// (ResNet-50's last stage) prefer im2col under 64 pixels where strided or
// C > M, and that the others keep their tactic.
func TestConvTacticsDeep1x1(t *testing.T) {
	for _, c := range []struct {
		h, k, m, stride int
		want            string
	}{
		{7, 2048, 512, 1, TacticIm2col}, {7, 512, 2048, 1, TacticDirect}, {14, 1024, 2048, 2, TacticIm2col},
		{7, 832, 128, 1, TacticDirect}, {28, 512, 1024, 2, TacticIm2col}, {14, 512, 1024, 2, TacticDirect}, {14, 256, 512, 2, TacticDirect},
		{14, 1024, 512, 1, TacticDirect},
	} {
		s := int64(c.stride)
		x, w := []int{1, c.k, c.h, c.h}, []int{c.m, c.k, 1, 1}
		got := convTactics(node("Conv", ints("strides", s, s)), []ir.Type{ir.StaticType(tensor.Float32, x), ir.StaticType(tensor.Float32, w)})
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("%dx%d plane, %d -> %d channels, stride %d: tactics %v, want %s first", c.h, c.h, c.k, c.m, c.stride, got, c.want)
		}
	}
}
