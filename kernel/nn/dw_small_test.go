package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// TestDwSmallTwin checks dwSmall (amd64.DwFlatKZ and DwRowsKZ) against
// depthwiseInto, bit for bit, at 1 and 3 workers: the zoo's small-plane
// layers (3x3 and 5x5 on 7x7 to 28x28, strides 1 and 2) and random
// geometries (kernels 1-7, strides 1-3, dilations, uneven pads, channel
// counts that leave 1-3 planes after the groups of four, batches),
// inputs and weights with zeros of both signs, infinities and NaNs;
// without a bias, and with a bias and the epilogue (a clamp; a residual
// before it; an activation after it) against convF32's passes.
func TestDwSmallTwin(t *testing.T) {
	pool := machineOf((*kernel.Ctx)(nil).WithISA(kernel.ISAAVX512))
	if !pool.z {
		t.Skip("no AVX-512 on this CPU: dwSmall does not run here")
	}
	dwSmallTwin(t, pool, 50)
}

// TestDwSmallTwinA is TestDwSmallTwin at ISAAVX2 (amd64.DwFlatKA, unit
// strides only), with every plane of 1x1 to 9x9 (each tail of an 8-lane
// vector) under 3x3 and 5x5 kernels.
func TestDwSmallTwinA(t *testing.T) {
	pool := machineOf((*kernel.Ctx)(nil).WithISA(kernel.ISAAVX2))
	if !pool.fast || pool.z {
		t.Skip("no AVX2+FMA level on this CPU: DwFlatKA does not run here")
	}
	dwSmallTwin(t, pool, 100)
}

// dwSmallTwin is TestDwSmallTwin's body at pool's level: at least min
// cases must take dwSmall.
func dwSmallTwin(t *testing.T, pool machine, min int) {
	r := rand.New(rand.NewSource(23))
	type tc struct{ n, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr int }
	cases := []tc{
		{1, 9, 7, 7, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {2, 6, 14, 14, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
		{1, 7, 14, 14, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2}, {1, 5, 28, 28, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
		{1, 4, 28, 28, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {1, 10, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
		{2, 5, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 6, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
		{1, 3, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, {1, 3, 14, 14, 5, 5, 2, 2, 1, 1, 1, 2, 2, 1},
		{1, 2, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 3, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
	}
	for i := 0; i < 60; i++ {
		kh, kw := 1+r.Intn(7), 1+r.Intn(7)
		c := tc{n: 1 + r.Intn(2), c: 1 + r.Intn(11), kh: kh, kw: kw, sh: 1 + r.Intn(3), sw: 1 + r.Intn(3), dh: 1 + r.Intn(2), dw: 1 + r.Intn(2),
			pt: r.Intn(kh), pl: r.Intn(kw), pb: r.Intn(kh), pr: r.Intn(kw)}
		if i%2 == 0 {
			c.sh, c.sw, c.dw = 1, 1, 1
			c.pr = kw - 1 - c.pl // output rows as long as the input's
		}
		c.h, c.w = (kh-1)*c.dh+1+r.Intn(20), (kw-1)*c.dw+1+r.Intn(20)
		cases = append(cases, c)
	}
	for h := 1; h <= 9; h++ {
		for w := 1; w <= 9; w++ {
			k := 3 + 2*((h+w)%2)
			cases = append(cases, tc{1 + (h*w)%2, 1 + (h+3*w)%9, h, w, k, k, 1, 1, 1, 1, k / 2, k / 2, k / 2, k / 2})
		}
	}
	fired := 0
	for i, c := range cases {
		n := &ir.Node{OpType: "Conv", Attrs: map[string]*ir.Attr{
			"group":     {Name: "group", Kind: ir.AttrInt, I: int64(c.c)},
			"strides":   {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(c.sh), int64(c.sw)}},
			"dilations": {Name: "dilations", Kind: ir.AttrInts, Ints: []int64{int64(c.dh), int64(c.dw)}},
			"pads":      {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(c.pt), int64(c.pl), int64(c.pb), int64(c.pr)}},
		}}
		xs, ws := []int{c.n, c.c, c.h, c.w}, []int{c.c, 1, c.kh, c.kw}
		s, err := setupConv(n, xs, ws)
		if err != nil {
			t.Fatalf("case %d %+v: %v", i, c, err)
		}
		if !dwSmallOK(pool, s) {
			continue
		}
		fired++
		what := fmt.Sprintf("case %d (x %v, k %v s %v d %v pads %v %v, out %v)", i, xs, s.g.k, s.g.stride, s.g.dil, s.g.padB, s.g.padE, s.g.out)
		x, w := specialF32(r, prod(xs), true), specialF32(r, prod(ws), i%3 == 0)
		if i%3 != 0 {
			for j := range w {
				w[j] = float32(r.NormFloat64())
			}
			w[len(w)-1] = float32(math.Copysign(0, -1))
		}
		P := prod(s.g.out)
		want := make([]float32, c.n*c.c*P)
		depthwiseInto(machine{}, s, x, w, want)
		bias := make([]float32, c.c)
		for j := range bias {
			bias[j] = float32(r.NormFloat64())
		}
		bias[0] = float32(math.Copysign(0, -1))
		res := randF32(r, len(want))
		half := func(_ vmath.Vec, dst, src []float32) {
			for k, v := range src {
				dst[k] = v * 0.5
			}
		}
		for _, workers := range []int{1, 3} {
			pl := parallel.New(workers)
			m := pool
			m.Pool = pl
			for mode := 0; mode < 4; mode++ {
				w2 := append([]float32{}, want...)
				var b []float32
				var ep epi
				if mode > 0 {
					b = bias
					addBias(w2, bias, c.c, P)
					ep = epi{lo: -0.5, hi: 0.75, on: true, fast: pool.fast, vec: pool.vec}
					if mode >= 2 {
						ep.r = res
					}
					if mode == 3 {
						ep.act = half
					}
					ep.all(w2)
				}
				const guard = 9
				buf := make([]float32, guard+len(want)+guard)
				for j := range buf {
					buf[j] = 12345 // every output must be written, nothing around them
				}
				got := buf[guard : guard+len(want)]
				dwSmall(m, s, x, w, b, got, ep)
				for j := range guard {
					if a, b := buf[j], buf[len(buf)-1-j]; a != 12345 || b != 12345 {
						t.Fatalf("%s, %d workers, mode %d: written outside y: %v %v", what, workers, mode, a, b)
					}
				}
				if d := sameF32(got, w2); d >= 0 {
					t.Fatalf("%s, %d workers, mode %d: y[%d] = %v (%#x), want %v (%#x)", what, workers, mode, d, got[d], math.Float32bits(got[d]), w2[d], math.Float32bits(w2[d]))
				}
			}
			pl.Close()
		}
	}
	if fired < min {
		t.Fatalf("only %d cases took dwSmall", fired)
	}
}

// TestDwSmallLevels: the zoo's small-plane depthwise layers through Conv's
// Into give the same bits at every ISA level (dwSmall on AVX-512, the
// other kernels below it) and at 1 and 2 workers, with a bias, at batches
// 1 and 3.
func TestDwSmallLevels(t *testing.T) {
	r := rand.New(rand.NewSource(31))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, c := range []struct{ ch, hw, k, s int }{
		{40, 7, 5, 1}, {21, 14, 5, 2}, {18, 14, 3, 1}, {13, 28, 5, 2}, {9, 28, 3, 2}, {17, 7, 3, 1}, {10, 14, 3, 2},
	} {
		for _, N := range []int{1, 3} {
			p := int64(c.k / 2)
			n := node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", p, p, p, p), intAttr("group", int64(c.ch)))
			oh := (c.hw+2*int(p)-c.k)/c.s + 1
			x := tensor.From(specialF32(r, N*c.ch*c.hw*c.hw, true), N, c.ch, c.hw, c.hw)
			w := tensor.From(randF32(r, c.ch*c.k*c.k), c.ch, 1, c.k, c.k)
			bias := tensor.From(randF32(r, c.ch), c.ch)
			var want []float32
			for _, isa := range kernel.ISAs() {
				for _, pl := range pools {
					y := tensor.New(tensor.Float32, N, c.ch, oh, oh)
					if err := intoConv(ctxAt(pl, isa, nil), n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
						t.Fatal(err)
					}
					got := y.Data.([]float32)
					if want == nil {
						want = got
						continue
					}
					if d := sameF32(got, want); d >= 0 {
						t.Fatalf("c%d hw%d k%d s%d batch %d, %v, %d workers: y[%d] = %#x, want %#x", c.ch, c.hw, c.k, c.s, N, isa, pl.Workers(), d, math.Float32bits(got[d]), math.Float32bits(want[d]))
					}
				}
			}
		}
	}
}

// TestDwSmall1D: a 1-D depthwise convolution (kws_dwconv1d's layers: one
// spatial dimension, which dwSmall does not take) runs at every ISA level
// with the same bits; dwSmallOK once read a second stride of a 1-D
// geometry and panicked on AVX2 hosts.
func TestDwSmall1D(t *testing.T) {
	r := rand.New(rand.NewSource(32))
	for _, c := range []struct{ ch, l, k, s int }{{64, 49, 3, 1}, {64, 25, 9, 1}, {40, 98, 5, 2}, {8, 7, 3, 1}} {
		p := int64(c.k / 2)
		n := node("Conv", ints("strides", int64(c.s)), ints("pads", p, p), intAttr("group", int64(c.ch)))
		ol := (c.l+2*int(p)-c.k)/c.s + 1
		x := tensor.From(specialF32(r, c.ch*c.l, true), 1, c.ch, c.l)
		w := tensor.From(randF32(r, c.ch*c.k), c.ch, 1, c.k)
		bias := tensor.From(randF32(r, c.ch), c.ch)
		var want []float32
		for _, isa := range kernel.ISAs() {
			y := tensor.New(tensor.Float32, 1, c.ch, ol)
			if err := intoConv(ctxAt(nil, isa, nil), n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
				t.Fatal(err)
			}
			got := y.Data.([]float32)
			if want == nil {
				want = got
				continue
			}
			if d := sameF32(got, want); d >= 0 {
				t.Fatalf("c%d l%d k%d s%d, %v: y[%d] = %#x, want %#x", c.ch, c.l, c.k, c.s, isa, d, math.Float32bits(got[d]), math.Float32bits(want[d]))
			}
		}
	}
}

// BenchmarkDwSmall is the zoo's small-plane depthwise layers (EfficientNet-B0,
// MnasNet, MobileNetV3: bias, one worker, Into; thread CPU time: cpuLoop).
func BenchmarkDwSmall(b *testing.B) {
	for _, c := range []struct{ ch, hw, k, s int }{
		{1152, 7, 5, 1}, {672, 14, 5, 1}, {672, 14, 5, 2}, {240, 28, 5, 1}, {144, 56, 5, 2}, {120, 28, 5, 2},
		{480, 14, 3, 1}, {1152, 7, 3, 1}, {240, 28, 3, 2}, {576, 14, 3, 2}, {960, 7, 3, 1},
	} {
		b.Run(fmt.Sprintf("c%dhw%dk%ds%d", c.ch, c.hw, c.k, c.s), func(b *testing.B) {
			r := rand.New(rand.NewSource(1))
			p := int64(c.k / 2)
			n := node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", p, p, p, p), intAttr("group", int64(c.ch)))
			oh := (c.hw+2*int(p)-c.k)/c.s + 1
			x := tensor.From(randF32(r, c.ch*c.hw*c.hw), 1, c.ch, c.hw, c.hw)
			w := tensor.From(randF32(r, c.ch*c.k*c.k), c.ch, 1, c.k, c.k)
			bias := tensor.From(randF32(r, c.ch), c.ch)
			y := tensor.New(tensor.Float32, 1, c.ch, oh, oh)
			pl := parallel.New(1)
			defer pl.Close()
			ctx := &kernel.Ctx{Pool: pl, State: new(kernel.State)}
			cpuLoop(b, func() {
				if err := intoConv(ctx, n, []*tensor.Tensor{x, w, bias}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
