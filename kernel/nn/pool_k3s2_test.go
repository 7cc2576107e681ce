package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestMaxPoolK3S2Twin: windows 3 columns wide at column stride 2 (the
// amd64.MaxPoolK3S2 path: ResNet's 3x3/2 pad 1, and its neighbours: any
// window height and row stride, left pad 0 or 1, right pads, ceil mode,
// odd and even widths) give the window-table reference's bits, on the
// vector kernel and on the portable twin, at 1 and 3 workers.
func TestMaxPoolK3S2Twin(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	fired := 0
	for i := 0; i < 150; i++ {
		kh, sh := 1+r.Intn(4), 1+r.Intn(3)
		h, w := kh+r.Intn(20), 3+r.Intn(70)
		ph, pl, pr := r.Intn(kh), r.Intn(2), r.Intn(3)
		if i == 0 {
			kh, sh, h, w, ph, pl, pr = 3, 2, 112, 112, 1, 1, 1
		}
		attrs := []*ir.Attr{ints("kernel_shape", int64(kh), 3), ints("strides", int64(sh), 2),
			ints("pads", int64(ph), int64(pl), int64(r.Intn(kh)), int64(pr))}
		if i%3 == 0 {
			attrs = append(attrs, intAttr("ceil_mode", 1))
		}
		n := node("MaxPool", attrs...)
		xs := []int{1 + r.Intn(2), 1 + r.Intn(4), h, w}
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
		if _, _, ok := maxPoolK3S2OK(fastOK(), g); ok {
			fired++
		}
		NC := xs[0] * xs[1]
		want := make([]float32, NC*prod(g.out))
		maxPoolInto(xv, windowTable(g), NC, want, nil)
		for _, portable := range kernel.ISAs() {
			for _, p := range pools {
				y := tensor.New(tensor.Float32, xs[0], xs[1], g.out[0], g.out[1])
				if err := intoMaxPool(ctxAt(p, portable, nil), n, []*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
					t.Fatal(err)
				}
				if d := sameF32(y.Data.([]float32), want); d >= 0 {
					t.Fatalf("case %d (x %v, k %v s %v pads %v %v out %v), %v, %d workers: y[%d] = %x, want %x", i, xs, g.k, g.stride, g.padB, g.padE, g.out, portable, p.Workers(), d,
						math.Float32bits(y.Data.([]float32)[d]), math.Float32bits(want[d]))
				}
			}
		}
	}
	if fastOK() && fired < 50 {
		t.Fatalf("only %d cases took the MaxPoolK3S2 path", fired)
	}
}
