package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestMaxFlatTwin: MaxPools over small planes (the maxFlat path on
// AVX-512 and MaxTaps8 on AVX2: flat unit-stride windows and gathered
// strided ones, GoogLeNet's 3x3/1 pad 1 and 2x2/2 among them, kernels 1-5, strides 1-3, dilations,
// uneven pads, ceil mode, 1-D, batches) give the window-table reference's
// bits (maxPoolInto) at every ISA level and 1, 2 and 3 workers, Run and
// Into; on data dense in NaNs of many payloads (the first tap's is kept),
// on ties of +0 and -0 and infinities without NaNs, and on NaNs only in
// the last plane of a batch.
func TestMaxFlatTwin(t *testing.T) {
	r := rand.New(rand.NewSource(29))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	type tc struct{ c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, ceil int }
	cases := []tc{
		{c: 37, h: 14, w: 14, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, pt: 1, pl: 1, pb: 1, pr: 1},
		{c: 9, h: 7, w: 7, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, pt: 1, pl: 1, pb: 1, pr: 1, ceil: 1},
		{c: 11, h: 14, w: 14, kh: 2, kw: 2, sh: 2, sw: 2, dh: 1, dw: 1, ceil: 1},
		{c: 5, h: 28, w: 28, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ceil: 1},
		{c: 6, h: 28, w: 28, kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1, pt: 1, pl: 1, pb: 1, pr: 1},
		{c: 3, h: 27, w: 27, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ceil: 1},
		{c: 4, h: 13, w: 13, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1},
		{c: 5, h: 9, w: 11, kh: 5, kw: 5, sh: 1, sw: 1, dh: 1, dw: 1, pt: 2, pl: 2, pb: 2, pr: 2},
		{c: 3, h: 10, w: 12, kh: 3, kw: 3, sh: 1, sw: 1, dh: 2, dw: 2, pt: 2, pl: 2, pb: 2, pr: 2},
	}
	for i := 0; i < 70; i++ {
		kh, kw := 1+r.Intn(4), 1+r.Intn(4)
		c := tc{c: 1 + r.Intn(9), kh: kh, kw: kw, sh: 1 + r.Intn(3), sw: 1 + r.Intn(3), dh: 1, dw: 1,
			pt: r.Intn(kh), pl: r.Intn(kw), pb: r.Intn(kh), pr: r.Intn(kw), ceil: r.Intn(2)}
		if i%3 == 0 {
			c.sh, c.sw, c.pb, c.pr = 1, 1, kh-1-c.pt, kw-1-c.pl // output rows as long as the input's
		}
		c.h, c.w = kh+r.Intn(20), kw+r.Intn(20)
		cases = append(cases, c)
	}
	fired, fired8 := 0, 0
	for i, c := range cases {
		attrs := []*ir.Attr{ints("kernel_shape", int64(c.kh), int64(c.kw)), ints("strides", int64(c.sh), int64(c.sw)),
			ints("pads", int64(c.pt), int64(c.pl), int64(c.pb), int64(c.pr))}
		if c.dh > 1 || c.dw > 1 {
			attrs = append(attrs, ints("dilations", int64(c.dh), int64(c.dw)))
		}
		if c.ceil != 0 {
			attrs = append(attrs, intAttr("ceil_mode", 1))
		}
		n := node("MaxPool", attrs...)
		for _, N := range []int{1, 2} {
			xs := []int{N, c.c, c.h, c.w}
			g, err := poolSetup(n, xs)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if c.dh == 1 && c.dw == 1 && !maxPool2DOK(g) {
				continue
			}
			if maxFlatOK(machineOf((*kernel.Ctx)(nil).WithISA(kernel.ISAAVX512)), g) {
				fired++
			}
			if maxFlatOK(machineOf((*kernel.Ctx)(nil).WithISA(kernel.ISAAVX2)), g) {
				fired8++
			}
			for d := 0; d < 3; d++ {
				var xv []float32
				switch d {
				case 0:
					xv = tieF32(r, prod(xs))
				case 1:
					xv = tieF32(r, prod(xs))
					for k, v := range xv {
						if v != v {
							xv[k] = float32(math.Copysign(0, float64(r.Intn(2)*2-1)))
						}
					}
				default:
					xv = randF32(r, prod(xs))
					xv[len(xv)-1-r.Intn(prod(g.in))] = float32(math.NaN())
				}
				x := tensor.From(xv, xs...)
				checkMaxPool(t, pools, n, x, g, func() string {
					return fmt.Sprintf("case %d data %d (x %v, k %v s %v d %v pads %v %v out %v)", i, d, xs, g.k, g.stride, g.dil, g.padB, g.padE, g.out)
				})
			}
		}
	}
	if machineOf(nil).z && fired < 60 {
		t.Fatalf("only %d cases took the maxFlat path", fired)
	}
	if machineOf(nil).fast && fired8 < 120 {
		t.Fatalf("only %d cases took the MaxTaps8 path", fired8)
	}
	// A bound plan's Into (the layout kept with the node's geometry)
	// allocates nothing, at 1 and 2 workers.
	n := node("MaxPool", ints("kernel_shape", 3, 3), ints("strides", 2, 2), intAttr("ceil_mode", 1))
	x := tensor.From(randF32(r, 2*9*28*28), 2, 9, 28, 28)
	y := tensor.New(tensor.Float32, 2, 9, 14, 14)
	for _, p := range pools[:2] {
		ctx := &kernel.Ctx{Pool: p, State: new(kernel.State)}
		in, out := []*tensor.Tensor{x}, []*tensor.Tensor{y}
		if a := testing.AllocsPerRun(5, func() { _ = intoMaxPool(ctx, n, in, out) }); a != 0 && !raceEnabled {
			t.Fatalf("%d workers: Into allocates %v times", p.Workers(), a)
		}
	}
}

// BenchmarkMaxPoolSmall is GoogLeNet's MaxPools over small planes, one
// worker, Into (thread CPU time: cpuLoop).
func BenchmarkMaxPoolSmall(b *testing.B) {
	for _, c := range []struct {
		ch, hw, k, s, p int
		ceil            bool
	}{
		{192, 28, 3, 1, 1, true}, {480, 14, 3, 1, 1, true}, {832, 7, 3, 1, 1, true}, {832, 14, 2, 2, 0, true},
		{480, 28, 3, 2, 0, true}, {192, 56, 3, 2, 0, true}, {256, 27, 3, 2, 0, true},
		{256, 56, 2, 2, 0, false}, {512, 28, 2, 2, 0, false}, {512, 14, 2, 2, 0, false}, {384, 13, 3, 2, 0, false},
		{128, 112, 2, 2, 0, false}, {64, 56, 3, 1, 1, false}, {128, 64, 2, 2, 0, false},
	} {
		b.Run(fmt.Sprintf("c%dhw%dk%ds%d", c.ch, c.hw, c.k, c.s), func(b *testing.B) {
			attrs := []*ir.Attr{ints("kernel_shape", int64(c.k), int64(c.k)), ints("strides", int64(c.s), int64(c.s)),
				ints("pads", int64(c.p), int64(c.p), int64(c.p), int64(c.p))}
			if c.ceil {
				attrs = append(attrs, intAttr("ceil_mode", 1))
			}
			n := node("MaxPool", attrs...)
			xs := []int{1, c.ch, c.hw, c.hw}
			g, err := poolSetup(n, xs)
			if err != nil {
				b.Fatal(err)
			}
			x := tensor.From(randF32(rand.New(rand.NewSource(1)), prod(xs)), xs...)
			y := tensor.New(tensor.Float32, 1, c.ch, g.out[0], g.out[1])
			p := parallel.New(1)
			defer p.Close()
			ctx := &kernel.Ctx{Pool: p, State: new(kernel.State)}
			cpuLoop(b, func() {
				if err := intoMaxPool(ctx, n, []*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
