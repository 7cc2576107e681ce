package q8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// dcase is a convolution for the direct-kernel twin tests.
type dcase struct {
	n, c, h, w, m, kh, kw int
	sh, sw, dh, dw        int
	pads                  [4]int // top, left, bottom, right
	group                 int
	mode                  int // bit 0: residual, bit 1: Relu, bit 2: no bias
}

// runVariants runs a case through the portable twins, the AVX2 GEMM, the
// VNNI GEMM and the direct kernels on 1, 2 and 8 workers and requires the
// same bits everywhere; it reports whether the direct path applied.
func runVariants(t *testing.T, reg *kernel.Registry, r *rand.Rand, s dcase) bool {
	t.Helper()
	cg := s.c / s.group
	x := randF32(r, s.n*s.c*s.h*s.w)
	wq := make([]int8, s.m*cg*s.kh*s.kw)
	for i := range wq {
		wq[i] = int8(r.IntN(255) - 127)
	}
	oh := (s.h+s.pads[0]+s.pads[2]-(s.kh-1)*s.dh-1)/s.sh + 1
	ow := (s.w+s.pads[1]+s.pads[3]-(s.kw-1)*s.dw-1)/s.sw + 1
	inputs := []string{"x", "w", "s", "b"}
	if s.mode&4 != 0 {
		inputs[3] = ""
	}
	add := int64(0)
	var res []float32
	if s.mode&1 != 0 {
		res = randF32(r, s.n*s.m*oh*ow)
		inputs, add = append(inputs, "r"), 1
	}
	p := s.pads
	node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: inputs, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
		"base":      {Name: "base", Kind: ir.AttrString, S: "Conv"},
		"x_scale":   {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
		"layout":    {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, add, 0}},
		"group":     {Name: "group", Kind: ir.AttrInt, I: int64(s.group)},
		"strides":   {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.sh), int64(s.sw)}},
		"dilations": {Name: "dilations", Kind: ir.AttrInts, Ints: []int64{int64(s.dh), int64(s.dw)}},
		"pads":      {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(p[0]), int64(p[1]), int64(p[2]), int64(p[3])}},
	}}
	if s.mode&2 != 0 {
		node.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: "Relu"}
		node.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: 14}
	}
	var bias *tensor.Tensor
	if s.mode&4 == 0 {
		bias = tensor.From(randF32(r, s.m), s.m)
	}
	in := []*tensor.Tensor{tensor.From(x, s.n, s.c, s.h, s.w), tensor.From(wq, s.m, cg, s.kh, s.kw), tensor.From(randPos(r, s.m), s.m), bias}
	if res != nil {
		in = append(in, tensor.From(res, s.n, s.m, oh, ow))
	}
	op, err := reg.Lookup(node)
	if err != nil {
		t.Fatal(err)
	}
	var want []float32
	for v, name := range []string{"portable", "avx2", "vnni", "direct", "quad"} {
		for _, threads := range []int{1, 2, 8} {
			if v == 0 && threads > 1 {
				continue
			}
			// portable; AVX2 (no VNNI: the AVX2 tile); VNNI with the
			// direct and cols kernels off; the pair tiles; everything
			// (the quad tiles, or the cols tiles of a 1x1).
			l := []kernel.ISA{kernel.ISAPortable, kernel.ISAAVX2, kernel.ISABest, kernel.ISABest, kernel.ISABest}[v]
			ctx := ctxAt(parallel.New(threads), l, &forced{noDirectQ8: v < 3, noColsQ8: v < 4, noQuadQ8: v == 3})
			out := []*tensor.Tensor{tensor.New(tensor.Float32, s.n, s.m, oh, ow)}
			err := op.Into(ctx, node, in, out)
			ctx.Pool.Close()
			if err != nil {
				t.Fatal(err)
			}
			got := out[0].Data.([]float32)
			if want == nil {
				want = got
				continue
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%+v: %s on %d workers: y[%d] = %v (%#x), portable %v (%#x)", s, name, threads, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
	g := &geom2{sw: s.sw, Mg: s.m / s.group, OW: ow, OH: oh}
	return g.useDirect(machineOf(nil))
}

// TestDirectQ8Twins compares the direct kernels with the portable twins
// and both GEMM tiles on the geometries of resnet18 and mobilenet_v2
// (reduced spatially), the real deep resnet18 stages, and random shapes
// with odd edges (channel counts, widths, asymmetric pads, dilation,
// groups, residual, Relu, no bias).
func TestDirectQ8Twins(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(21, 22))
	cases := []dcase{
		// resnet18: stem, 3×3 stride 1 and 2, 1×1 stride-2 downsample,
		// the real layer3/layer4 shapes
		{1, 3, 40, 38, 64, 7, 7, 2, 2, 1, 1, [4]int{3, 3, 3, 3}, 1, 2},
		{1, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1, [4]int{1, 1, 1, 1}, 1, 3},
		{1, 64, 20, 20, 128, 3, 3, 2, 2, 1, 1, [4]int{1, 1, 1, 1}, 1, 2},
		{1, 64, 20, 20, 128, 1, 1, 2, 2, 1, 1, [4]int{}, 1, 0},
		{1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, [4]int{1, 1, 1, 1}, 1, 3},
		{1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, [4]int{1, 1, 1, 1}, 1, 3},
		{1, 256, 14, 14, 512, 3, 3, 2, 2, 1, 1, [4]int{1, 1, 1, 1}, 1, 2},
		// mobilenet_v2: stem 3×3 stride 2, pointwise, depthwise (not direct)
		{1, 3, 32, 32, 32, 3, 3, 2, 2, 1, 1, [4]int{1, 1, 1, 1}, 1, 2},
		{1, 32, 16, 16, 16, 1, 1, 1, 1, 1, 1, [4]int{}, 1, 0},
		{1, 24, 14, 14, 144, 1, 1, 1, 1, 1, 1, [4]int{}, 1, 2},
		{1, 144, 14, 14, 24, 1, 1, 1, 1, 1, 1, [4]int{}, 1, 1},
		{1, 96, 14, 14, 96, 3, 3, 2, 2, 1, 1, [4]int{1, 1, 1, 1}, 96, 2},
		{1, 320, 7, 7, 1280, 1, 1, 1, 1, 1, 1, [4]int{}, 1, 2},
		// edges: widths 5..33, odd channels, channel counts off 16,
		// batch, groups, asymmetric pads, dilation, no bias
		{2, 5, 9, 33, 17, 3, 3, 1, 1, 1, 1, [4]int{0, 2, 1, 0}, 1, 7},
		{1, 6, 11, 5, 40, 3, 3, 1, 1, 1, 1, [4]int{1, 1, 1, 1}, 2, 5},
		{1, 7, 13, 17, 31, 5, 3, 2, 1, 2, 1, [4]int{2, 1, 0, 1}, 1, 3},
		{1, 9, 21, 21, 16, 3, 3, 1, 2, 2, 2, [4]int{2, 2, 2, 2}, 1, 6},
		// output channels filling their 16-lane blocks to a half or more
		// (the quad tiles only): 8, 24, 40 a group
		{1, 16, 12, 12, 24, 3, 3, 1, 1, 1, 1, [4]int{1, 1, 1, 1}, 1, 3},
		{1, 8, 9, 10, 8, 3, 3, 2, 2, 1, 1, [4]int{1, 1, 1, 1}, 1, 4},
		{1, 20, 8, 8, 80, 1, 1, 1, 1, 1, 1, [4]int{}, 2, 1},
		{1, 48, 10, 12, 48, 3, 3, 2, 2, 1, 1, [4]int{1, 1, 1, 1}, 6, 2}, // RegNetY: groups of 8
	}
	for i := 0; i < 24; i++ {
		k := []int{1, 3, 5, 7}[r.IntN(4)]
		s := dcase{n: 1 + r.IntN(2), c: 1 + r.IntN(40), h: 5 + r.IntN(30), w: 5 + r.IntN(36), m: 16 + r.IntN(60), kh: k, kw: k,
			sh: 1 + r.IntN(2), sw: 1 + r.IntN(2), dh: 1 + r.IntN(2), dw: 1, group: 1, mode: r.IntN(8)}
		for j := range s.pads {
			s.pads[j] = r.IntN(k/2 + 1)
		}
		if r.IntN(4) == 0 && s.c%2 == 0 && s.m%2 == 0 {
			s.group = 2
		}
		if (s.h+s.pads[0]+s.pads[2]-(s.kh-1)*s.dh-1) < 0 || (s.w+s.pads[1]+s.pads[3]-s.kw) < 0 {
			continue
		}
		cases = append(cases, s)
	}
	direct := 0
	for _, s := range cases {
		t.Run(fmt.Sprintf("%dx%dx%d_m%d_k%dx%d_s%d%d", s.c, s.h, s.w, s.m, s.kh, s.kw, s.sh, s.sw), func(t *testing.T) {
			if runVariants(t, reg, r, s) {
				direct++
			}
		})
	}
	if hasDirect && direct < len(cases)/2 {
		t.Fatalf("the direct kernels ran on %d of %d cases", direct, len(cases))
	}
}

// BenchmarkDirectQ8 compares the direct kernels with the GEMM path on
// resnet18 and mobilenet_v2 convolutions (1 thread, Relu fused).
func BenchmarkDirectQ8(b *testing.B) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(5, 6))
	type cs struct {
		name                    string
		c, h, m, k, stride, pad int
	}
	for _, s := range []cs{{"r18conv1", 3, 224, 64, 7, 2, 3}, {"r18l1", 64, 56, 64, 3, 1, 1}, {"r18l2ds", 64, 56, 128, 1, 2, 0}, {"r18l3", 256, 14, 256, 3, 1, 1}, {"r18l4", 512, 7, 512, 3, 1, 1},
		{"mbproj144to24", 144, 56, 24, 1, 1, 0}, {"mbproj192to32", 192, 28, 32, 1, 1, 0}, {"mbexp32to192", 32, 28, 192, 1, 1, 0}, {"mbproj960to160", 960, 7, 160, 1, 1, 0}, {"mbstem", 3, 224, 32, 3, 2, 1}} {
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
		p := parallel.New(1)
		for _, d := range []bool{false, true} {
			ctx := ctxAt(p, kernel.ISABest, &forced{noDirectQ8: !d})
			name := s.name + "/gemm"
			if d {
				name = s.name + "/direct"
			}
			b.Run(name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := op.Into(ctx, node, in, out); err != nil {
						b.Fatal(err)
					}
				}
				macs := float64(s.m * s.c * s.k * s.k * oh * oh)
				b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
		p.Close()
	}
}

// TestEpi16Twins compares epi16 (transpose and epilogue) with the portable
// epilogueRow on special values, every pixel count and channel count.
func TestEpi16Twins(t *testing.T) {
	if !hasDirect {
		t.Skip("no AVX-512 direct kernels")
	}
	r := rand.New(rand.NewPCG(13, 14))
	var acc [dtileMax * 16]int32
	for i := range acc {
		acc[i] = int32(r.Uint32())
	}
	acc[0], acc[17], acc[34] = 0, math.MaxInt32, math.MinInt32
	const ldy = 19
	res := make([]float32, 16*ldy)
	for i := range res {
		res[i] = float32(r.NormFloat64())
	}
	res[3], res[4], res[5], res[6] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))
	nan, negz := float32(math.NaN()), float32(math.Copysign(0, -1))
	mult := []float32{1e-3, 0, -2, 1e30, 0.5, -1e-3, nan, 7, 1, -0.25, 3e-5, 2, -1e30, 1e-3, 4, -8}
	bias := []float32{0, negz, 3.5, nan, -1, 0, 2, negz, 1e30, -3, 0.125, 0, 5, -5, 0, 1}
	for _, useBias := range []bool{false, true} {
		for mode := 0; mode < 4; mode++ {
			for n := 1; n <= 16; n++ {
				for _, rows := range []int{1, 7, 16} {
					got := make([]float32, 16*ldy)
					want := make([]float32, 16*ldy)
					for i := range got {
						got[i], want[i] = -99, -99
					}
					var rp *float32
					var rr []float32
					if mode&1 != 0 {
						rp, rr = &res[0], res
					}
					b := &zeros16[0]
					if useBias {
						b = &bias[0]
					}
					epi16(&acc[0], &got[0], ldy, n, rows, &mult[0], b, rp, mode>>1)
					for i := 0; i < rows; i++ {
						col := make([]int32, n)
						for p := range col {
							col[p] = acc[p*16+i]
						}
						var bi float32
						if useBias {
							bi = bias[i]
						}
						var ri []float32
						if rr != nil {
							ri = rr[i*ldy : i*ldy+n]
						}
						epilogueRow(portableTwins, want[i*ldy:i*ldy+n], col, mult[i], bi, ri, mode&2 != 0)
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("bias %v mode %d n %d rows %d: [%d] = %v, portable %v", useBias, mode, n, rows, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestQzipTwins compares qzip with quantize1 on special values and every
// tail length.
func TestQzipTwins(t *testing.T) {
	if !hasDirect {
		t.Skip("no AVX-512 direct kernels")
	}
	r := rand.New(rand.NewPCG(15, 16))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		0.5, 1.5, 2.5, -0.5, -1.5, 126.5, -126.5, 127.49, 127.5, 128, -128, 1e30, -1e30, 1e-40, -1e-40, 0.49999997}
	for n := 0; n <= 50; n++ {
		a, b := make([]float32, n+1), make([]float32, n+1)
		for i := 0; i < n; i++ {
			a[i], b[i] = float32(r.NormFloat64()*80), special[r.IntN(len(special))]
			if i < len(special) {
				a[i] = special[i]
			}
		}
		for _, inv := range []float32{1, 0.75, 3} {
			got := make([]int16, 2*n+2)
			got[2*n], got[2*n+1] = 77, 77
			qzip(&got[0], &a[0], &b[0], inv, n)
			for i := 0; i < n; i++ {
				if got[2*i] != quantize1(a[i], inv) || got[2*i+1] != quantize1(b[i], inv) {
					t.Fatalf("n %d inv %v: pair %d = %d %d, want %d %d (x %v %v)", n, inv, i, got[2*i], got[2*i+1], quantize1(a[i], inv), quantize1(b[i], inv), a[i], b[i])
				}
			}
			if got[2*n] != 77 || got[2*n+1] != 77 {
				t.Fatalf("n %d: wrote past the end", n)
			}
		}
	}
}
