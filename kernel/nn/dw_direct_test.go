package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestDepthwiseDirectTwin: depthwise 3x3 convolutions on the direct kernels
// (amd64.DwS1P1 / DwS2P1: left pad 1, the input read in place) and on the
// padded-plane one (amd64.DwRows9: other pads) give the portable twin's
// bits: widths 1 to 120 (rows of fewer than 8 outputs, a vector plus a
// tail, whole vectors), strides 1 and 2 in either dimension, pads 0-2 on
// each side, specials in data and weights (non-finite weights included),
// with and without bias, clamp and residual epilogues, 1 and 3 workers.
func TestDepthwiseDirectTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(23))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	widths := []int{1, 2, 3, 5, 7, 8, 9, 13, 14, 15, 16, 17, 23, 28, 31, 56, 57, 112}
	direct, padded := 0, 0
	for i := 0; i < 300; i++ {
		c, nb := 1+r.Intn(4), 1+r.Intn(2)
		h, w := 1+r.Intn(30), widths[r.Intn(len(widths))]
		if i%3 == 0 {
			w = 1 + r.Intn(120)
		}
		sh, sw := 1+r.Intn(2), 1+r.Intn(2)
		pt, pb, pl, pr := r.Intn(3), r.Intn(3), r.Intn(3), r.Intn(3)
		if i%2 == 0 {
			pl = 1
		}
		if i%4 == 0 {
			pt, pb, pr = 1, 1, 1
		}
		if h+pt+pb < 3 || w+pl+pr < 3 {
			continue
		}
		attrs := []*ir.Attr{intAttr("group", int64(c)), ints("strides", int64(sh), int64(sw)), ints("pads", int64(pt), int64(pl), int64(pb), int64(pr))}
		n := node("Conv", attrs...)
		xs, ws := []int{nb, c, h, w}, []int{c, 1, 3, 3}
		x := tensor.From(specialF32(r, prod(xs), i%2 == 0), xs...)
		wt := tensor.From(specialF32(r, prod(ws), i%3 == 0), ws...)
		in := []*tensor.Tensor{x, wt}
		if i%5 != 4 {
			in = append(in, tensor.From(specialF32(r, c, i%4 == 1), c))
		}
		s, err := setupConv(n, xs, ws)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if _, _, ok := dwDirectSetup(s.g); ok {
			direct++
		} else {
			padded++
		}
		oh, ow := s.g.out[0], s.g.out[1]
		run := dwCaseRun(t, r, i, n, in, nb, c, oh, ow)
		want := run(ctxAt(pools[0], kernel.ISAPortable, nil))
		for _, p := range pools {
			if got := run(ctxAt(p, kernel.ISABest, nil)); sameF32(got, want) >= 0 {
				d := sameF32(got, want)
				t.Fatalf("case %d (x %v, strides %d %d, pads %d %d %d %d, bias %v, epilogue %d), %d workers: y[%d] = %#x, portable %#x",
					i, xs, sh, sw, pt, pl, pb, pr, len(in) == 3, i%3, p.Workers(), d, math.Float32bits(got[d]), math.Float32bits(want[d]))
			}
		}
	}
	if fastOK() && (direct < 60 || padded < 30) {
		t.Fatalf("direct kernels in %d cases, padded planes in %d: too few", direct, padded)
	}
}

// dwCaseRun returns a function that runs case i's depthwise Conv n on in
// through Into under a context (pool, level, forced choices), with the
// case's epilogue (none, Relu6, or a residual and a lower bound, by i %
// 3), into an [nb, c, oh, ow] output.
func dwCaseRun(t *testing.T, r *rand.Rand, i int, n *ir.Node, in []*tensor.Tensor, nb, c, oh, ow int) func(*kernel.Ctx) []float32 {
	t.Helper()
	var ep kernel.Epilogue
	switch i % 3 {
	case 1:
		ep = kernel.Epilogue{Lo: 0, Hi: 6, HasLo: true, HasHi: true}
	case 2:
		ep = kernel.Epilogue{Residual: specialF32(r, nb*c*oh*ow, true), Lo: -1, HasLo: true}
	}
	return func(k *kernel.Ctx) []float32 {
		y := tensor.New(tensor.Float32, nb, c, oh, ow)
		ctx := *k
		ctx.Epilogue = ep
		if err := intoConv(&ctx, n, in, []*tensor.Tensor{y}); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		return y.Data.([]float32)
	}
}

// TestDepthwiseZTwin: stride 2 depthwise 3x3 convolutions with one column
// of left padding through the AVX-512 row kernel (amd64.DwS2P1PlanesZ:
// rows of 9 to 256 outputs, whole and partial vectors of 16), through the
// one-call kernel amd64.DwS2P1Z, and with both switched off (the AVX2 row
// kernels, or the padded planes) give the portable twin's bits: odd and
// even widths 17 to 600, row strides 1 and 2, top pads 0-2, right and
// bottom pads 0-2, specials in data and weights, with and without bias,
// clamp and residual epilogues, 1, 2 and 8 workers.
func TestDepthwiseZTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(37))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	widths := []int{17, 18, 19, 27, 28, 29, 31, 32, 33, 34, 35, 47, 63, 64, 65, 66, 96, 97, 112, 113, 127, 128, 129, 130, 511, 512, 513, 514, 600}
	z := 0
	for i := 0; i < 160; i++ {
		c, nb := 1+r.Intn(5), 1+r.Intn(2)
		h, w := 1+r.Intn(20), widths[r.Intn(len(widths))]
		if i%3 == 0 {
			w = 17 + r.Intn(200)
		}
		sh := 2 - i%4/3
		pt, pb, pr := r.Intn(3), r.Intn(3), r.Intn(3)
		if i%2 == 0 {
			pt, pb, pr = 1, 1, 1
		}
		if h+pt+pb < 3 {
			continue
		}
		n := node("Conv", intAttr("group", int64(c)), ints("strides", int64(sh), 2), ints("pads", int64(pt), 1, int64(pb), int64(pr)))
		xs, ws := []int{nb, c, h, w}, []int{c, 1, 3, 3}
		x := tensor.From(specialF32(r, prod(xs), i%2 == 0), xs...)
		wt := tensor.From(specialF32(r, prod(ws), i%3 == 0), ws...)
		in := []*tensor.Tensor{x, wt}
		if i%5 != 4 {
			in = append(in, tensor.From(specialF32(r, c, i%4 == 1), c))
		}
		s, err := setupConv(n, xs, ws)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if dwZOK(machineOf(nil), s.g) {
			z++
		}
		run := dwCaseRun(t, r, i, n, in, nb, c, s.g.out[0], s.g.out[1])
		want := run(ctxAt(pools[0], kernel.ISAPortable, nil))
		// mode 0: DwS2P1PlanesZ, 1: DwS2P1Z per run of rows, 2: AVX2
		for mode := 0; mode < 3; mode++ {
			f := &forced{dwZRows: mode == 1, noDwZ: mode == 2}
			for _, p := range pools {
				if got := run(ctxAt(p, kernel.ISABest, f)); sameF32(got, want) >= 0 {
					d := sameF32(got, want)
					t.Fatalf("case %d (x %v, strides %d 2, pads %d 1 %d %d, bias %v, epilogue %d, mode %d), %d workers: y[%d] = %#x, portable %#x",
						i, xs, sh, pt, pb, pr, len(in) == 3, i%3, mode, p.Workers(), d, math.Float32bits(got[d]), math.Float32bits(want[d]))
				}
			}
		}
	}
	if amd64.EnabledZ && z < 100 {
		t.Fatalf("AVX-512 row kernel in %d cases: too few", z)
	}
}
