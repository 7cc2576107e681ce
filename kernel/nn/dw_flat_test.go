package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestDepthwiseFlatTwin: stride 1, pad 1 depthwise 3x3 convolutions on
// small planes, through the flat AVX-512 kernel (amd64.DwS1P1FlatZ) and
// with it switched off (the AVX2 row kernels), give the portable twin's
// bits: planes 1x1 to 36x7 (a partial last vector, planes of one vector
// or less, rows of 1 to 7), specials in data and weights, with and
// without bias, clamp and residual epilogues, 1, 2 and 8 workers.
func TestDepthwiseFlatTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(29))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	flat := 0
	for i := 0; i < 160; i++ {
		c, nb := 1+r.Intn(19), 1+r.Intn(2)
		h, w := 1+r.Intn(36), 1+r.Intn(7)
		if i < 49 {
			h, w = 1+i/7, 1+i%7
		}
		n := node("Conv", intAttr("group", int64(c)), ints("strides", 1, 1), ints("pads", 1, 1, 1, 1))
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
		if dwFlatOK(machineOf(nil), s.g) {
			flat++
		}
		run := dwCaseRun(t, r, i, n, in, nb, c, h, w)
		want := run(ctxAt(pools[0], kernel.ISAPortable, nil))
		for _, off := range []bool{false, true} {
			for _, p := range pools {
				if got := run(ctxAt(p, kernel.ISABest, &forced{noDwFlat: off})); sameF32(got, want) >= 0 {
					d := sameF32(got, want)
					t.Fatalf("case %d (x %v, bias %v, epilogue %d, flat off %v), %d workers: y[%d] = %#x, portable %#x",
						i, xs, len(in) == 3, i%3, off, p.Workers(), d, math.Float32bits(got[d]), math.Float32bits(want[d]))
				}
			}
		}
	}
	if amd64.EnabledZ && flat < 150 {
		t.Fatalf("flat kernel in %d cases: too few", flat)
	}
}

// TestDepthwiseFlatS2Twin: stride 2 depthwise 3x3 convolutions with one
// row and column of leading padding on small planes, through the flat
// AVX-512 kernel (amd64.DwS2P1FlatZ) and with it switched off (the AVX2
// row kernels or the padded planes), give the portable twin's bits:
// inputs 1x1 to 32x15 (odd and even sizes, one or two output rows in the
// last vector), trailing pads 0-2, specials in data and weights, with and
// without bias, clamp and residual epilogues, 1, 2 and 8 workers.
func TestDepthwiseFlatS2Twin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(31))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	flat := 0
	for i := 0; i < 200; i++ {
		c, nb := 1+r.Intn(19), 1+r.Intn(2)
		h, w := 1+r.Intn(32), 1+r.Intn(15)
		if i < 60 {
			h, w = 1+i/4, 11+i%4
		}
		pb, pr := r.Intn(3), r.Intn(3)
		if i%2 == 0 {
			pb, pr = 1, 1
		}
		if h+1+pb < 3 || w+1+pr < 3 {
			continue
		}
		n := node("Conv", intAttr("group", int64(c)), ints("strides", 2, 2), ints("pads", 1, 1, int64(pb), int64(pr)))
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
		if dwFlatS2OK(machineOf(nil), s.g) {
			flat++
		}
		run := dwCaseRun(t, r, i, n, in, nb, c, s.g.out[0], s.g.out[1])
		want := run(ctxAt(pools[0], kernel.ISAPortable, nil))
		for _, off := range []bool{false, true} {
			for _, p := range pools {
				if got := run(ctxAt(p, kernel.ISABest, &forced{noDwFlat: off})); sameF32(got, want) >= 0 {
					d := sameF32(got, want)
					t.Fatalf("case %d (x %v, pads 1 1 %d %d, bias %v, epilogue %d, flat off %v), %d workers: y[%d] = %#x, portable %#x",
						i, xs, pb, pr, len(in) == 3, i%3, off, p.Workers(), d, math.Float32bits(got[d]), math.Float32bits(want[d]))
				}
			}
		}
	}
	if amd64.EnabledZ && flat < 150 {
		t.Fatalf("flat kernel in %d cases: too few", flat)
	}
}
