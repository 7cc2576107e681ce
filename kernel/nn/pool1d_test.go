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

// TestMaxPool1DTwin: a 1-D float32 MaxPool runs as one row of the 2-D
// kernels (the vector twins at every level, any worker count) and gives
// maxPoolInto's bits — ties, NaNs, ±0, padding, ceil mode, strides 1–3
// and kernels 1–7 — by Run and by Into.
func TestMaxPool1DTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(11))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := 0; i < 150; i++ {
		k, s := 1+r.Intn(7), 1+r.Intn(3)
		l := k + r.Intn(300)
		pb, pe := r.Intn(k), r.Intn(k)
		attrs := []*ir.Attr{ints("kernel_shape", int64(k)), ints("strides", int64(s)), ints("pads", int64(pb), int64(pe))}
		if i%3 == 0 {
			attrs = append(attrs, intAttr("ceil_mode", 1))
		}
		n := node("MaxPool", attrs...)
		xs := []int{1 + r.Intn(2), 1 + r.Intn(9), l}
		var xv []float32
		if i%2 == 0 {
			xv = tieF32(r, prod(xs))
		} else {
			xv = specialF32(r, prod(xs), true)
		}
		x := tensor.From(xv, xs...)
		g, err := poolSetup(n, xs)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !maxPool2DOK(g) {
			t.Fatalf("case %d: a 1-D pool (k %d, s %d) does not take the row kernels", i, k, s)
		}
		checkMaxPool(t, pools, n, x, g, func() string {
			return fmt.Sprintf("case %d (x %v, k %d s %d pads %d %d out %v)", i, xs, k, s, pb, pe, g.out)
		})
	}
}

// checkMaxPool runs the float32 MaxPool n of x by Run and by Into at every
// instruction-set level on every pool and fails on the first output whose
// bits are not maxPoolInto's.
func checkMaxPool(t *testing.T, pools []*parallel.Pool, n *ir.Node, x *tensor.Tensor, g *geom, what func() string) {
	t.Helper()
	xv := x.Data.([]float32)
	NC := x.Shape[0] * x.Shape[1]
	want := make([]float32, NC*prod(g.out))
	maxPoolInto(xv, windowTable(g), NC, want, nil)
	for _, isa := range kernel.ISAs() {
		for _, p := range pools {
			got, err := runMaxPool(ctxAt(p, isa, nil), n, []*tensor.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			if d := sameF32(got[0].Data.([]float32), want); d >= 0 {
				t.Fatalf("%s, %v, %d workers: y[%d] = %x, want %x", what(), isa, p.Workers(), d,
					math.Float32bits(got[0].Data.([]float32)[d]), math.Float32bits(want[d]))
			}
			y := tensor.New(tensor.Float32, got[0].Shape...)
			if err := intoMaxPool(ctxAt(p, isa, nil), n, []*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
				t.Fatal(err)
			}
			if d := sameF32(y.Data.([]float32), want); d >= 0 {
				t.Fatalf("%s, %v: Into y[%d] differs", what(), isa, d)
			}
		}
	}
}

// BenchmarkMaxPool1D is the ECG network's MaxPool (k 2, s 2) on 64×2048.
func BenchmarkMaxPool1D(b *testing.B) {
	n := node("MaxPool", ints("kernel_shape", 2), ints("strides", 2))
	x := tensor.From(make([]float32, 64*2048), 1, 64, 2048)
	p := parallel.New(1)
	defer p.Close()
	c := ctxAt(p, kernel.ISAs()[len(kernel.ISAs())-1], nil)
	y := tensor.New(tensor.Float32, 1, 64, 1024)
	for b.Loop() {
		if err := intoMaxPool(c, n, []*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
			b.Fatal(err)
		}
	}
}
