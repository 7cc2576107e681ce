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

// TestAvgPoolS1Twin: the unit-stride float32 AveragePool (avgPoolPlanes) gives
// at every level, through Run and Into, at 1 and 3 workers, the portable
// level's bits, and those are the generic window walk's (sumPoolF32's)
// except where both are NaN (plain Go's sum leaves the payload free):
// kernels 1-5, even and uneven pads, ceil mode, count_include_pad on and
// off, 1-D pools, hundreds of small planes, specials in the data.
func TestAvgPoolS1Twin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(21))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	tried := 0
	for i := 0; i < 60; i++ {
		oneD := i%6 == 5
		kh, kw := 1+r.Intn(5), 1+r.Intn(5)
		h, w := kh+r.Intn(12), kw+r.Intn(40)
		attrs := []*ir.Attr{ints("kernel_shape", int64(kh), int64(kw)),
			ints("pads", int64(r.Intn(kh)), int64(r.Intn(kw)), int64(r.Intn(kh)), int64(r.Intn(kw))),
			intAttr("ceil_mode", int64(r.Intn(2))), intAttr("count_include_pad", int64(r.Intn(2)))}
		shape := []int{1 + r.Intn(2), 1 + r.Intn(5), h, w}
		if oneD {
			attrs = []*ir.Attr{ints("kernel_shape", int64(kw)), ints("pads", int64(r.Intn(kw)), int64(r.Intn(kw))),
				intAttr("count_include_pad", int64(r.Intn(2)))}
			shape = []int{1, 1 + r.Intn(5), w}
		}
		if i%7 == 3 && !oneD {
			attrs = append(attrs, ints("strides", 1, 1))
		}
		if i%10 == 4 && !oneD {
			// Many small planes: several groups of planes summed at once
			// (avgPoolGroup), the last one partial.
			shape = []int{2, 150 + r.Intn(150), 3 + r.Intn(6), 3 + r.Intn(6)}
			attrs = []*ir.Attr{ints("kernel_shape", 3, 3), ints("pads", 1, 1, 1, 1), intAttr("count_include_pad", int64(i%20/10))}
		}
		n := node("AveragePool", attrs...)
		x := tensor.From(specialF32(r, prod(shape), i%2 == 0), shape...)
		g, err := poolSetup(n, shape)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !avgPoolS1OK(g) {
			continue
		}
		tried++
		checkAvgPoolTwin(t, pools, n, x, g, fmt.Sprintf("case %d (%v, %v)", i, shape, attrs))
	}
	if tried < 30 {
		t.Fatalf("only %d cases ran the unit-stride kernel", tried)
	}
}

// checkAvgPoolTwin requires AveragePool n of x (geometry g) to give at
// every level, through Run and Into, on each pool, the portable level's
// bits, and those to be sumPoolF32's except where both are NaN.
func checkAvgPoolTwin(t *testing.T, pools []*parallel.Pool, n *ir.Node, x *tensor.Tensor, g *geom, what string) {
	t.Helper()
	want, err := runAveragePool(ctxAt(nil, kernel.ISAPortable, nil), n, []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	wd := want[0].Data.([]float32)
	ref := make([]float32, len(wd))
	sumPoolF32(x.Data.([]float32), windowTable(g), x.Shape[0]*x.Shape[1], ref, n.Int("count_include_pad", 0) != 0, false, 0)
	for k := range ref {
		if math.Float32bits(ref[k]) != math.Float32bits(wd[k]) && !(ref[k] != ref[k] && wd[k] != wd[k]) {
			t.Fatalf("%s: y[%d] = %g, window walk %g", what, k, wd[k], ref[k])
		}
	}
	for _, l := range append([]kernel.ISA{kernel.ISAPortable}, vectorLevels()...) {
		for _, p := range pools {
			got, err := runAveragePool(ctxAt(p, l, nil), n, []*tensor.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			if d := sameF32(got[0].Data.([]float32), wd); d >= 0 {
				t.Fatalf("%s, level %v, %d workers: Run y[%d] = %g, portable %g", what, l, p.Workers(), d, got[0].Data.([]float32)[d], wd[d])
			}
			y := tensor.New(tensor.Float32, want[0].Shape...)
			if err := intoAveragePool(ctxAt(p, l, nil), n, []*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
				t.Fatal(err)
			}
			if d := sameF32(y.Data.([]float32), wd); d >= 0 {
				t.Fatalf("%s, level %v: Into y[%d] = %g, Run %g", what, l, d, y.Data.([]float32)[d], wd[d])
			}
		}
	}
}
