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

// TestAvgPoolSTwin: the strided float32 AveragePool (avgPoolPlanes) gives at
// every level, through Run and Into, at 1 and 3 workers, the portable
// level's bits, and those are the generic window walk's (sumPoolF32's)
// except where both are NaN: strides 2 and 3 (and a 1-D stride), kernels
// 1-5, even and uneven pads, ceil mode, count_include_pad on and off,
// DenseNet's 2x2/2, unit strides without pads (planes read in place),
// many small planes, specials in the data, dense NaNs of
// many payloads.
func TestAvgPoolSTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(22))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	tried := 0
	for i := 0; i < 80; i++ {
		kh, kw := 1+r.Intn(5), 1+r.Intn(5)
		s := 2 + r.Intn(2)
		if i%3 != 0 {
			s = 2
		}
		h, w := kh+r.Intn(14), kw+r.Intn(40)
		attrs := []*ir.Attr{ints("kernel_shape", int64(kh), int64(kw)), ints("strides", int64(s), int64(s)),
			ints("pads", int64(r.Intn(kh)), int64(r.Intn(kw)), int64(r.Intn(kh)), int64(r.Intn(kw))),
			intAttr("ceil_mode", int64(r.Intn(2))), intAttr("count_include_pad", int64(r.Intn(2)))}
		shape := []int{1 + r.Intn(2), 1 + r.Intn(5), h, w}
		switch i % 8 {
		case 5:
			attrs = []*ir.Attr{ints("kernel_shape", int64(kw)), ints("strides", int64(s)), ints("pads", int64(r.Intn(kw)), int64(r.Intn(kw))),
				intAttr("count_include_pad", int64(r.Intn(2)))}
			shape = []int{1, 1 + r.Intn(5), w}
		case 4:
			// Unit strides without pads, groups of planes read in place.
			attrs = []*ir.Attr{ints("kernel_shape", int64(kh), int64(kw))}
			shape = []int{1, 30 + r.Intn(60), 16 + r.Intn(24), 16 + r.Intn(24)}
		case 6:
			// DenseNet's transitions: 2x2/2, no pads, even and odd
			// planes, groups of planes read in place.
			attrs = []*ir.Attr{ints("kernel_shape", 2, 2), ints("strides", 2, 2), intAttr("ceil_mode", int64(r.Intn(2)))}
			shape = []int{1, 30 + r.Intn(60), 6 + r.Intn(40), 6 + r.Intn(40)}
		case 7:
			// Many small planes: several groups at once, the last partial.
			shape = []int{2, 150 + r.Intn(150), 3 + r.Intn(6), 3 + r.Intn(6)}
			attrs = []*ir.Attr{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1), intAttr("count_include_pad", int64(i%2))}
		}
		n := node("AveragePool", attrs...)
		xv := specialF32(r, prod(shape), i%2 == 0)
		if i%4 == 1 {
			// Dense NaNs of many payloads: the sums keep the first's.
			for k := range xv {
				if r.Intn(3) == 0 {
					xv[k] = math.Float32frombits(0x7f800001 | r.Uint32()&0x807fffff)
				}
			}
		}
		x := tensor.From(xv, shape...)
		g, err := poolSetup(n, shape)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !avgPoolSOK(g) && !(i%8 == 4 && avgPoolS1OK(g)) {
			continue
		}
		tried++
		checkAvgPoolTwin(t, pools, n, x, g, fmt.Sprintf("case %d (%v, %v)", i, shape, attrs))
	}
	if tried < 50 {
		t.Fatalf("only %d cases ran the strided kernel", tried)
	}
}

// BenchmarkAvgPoolS is DenseNet-121's transition pools (2x2/2) and
// Inception-v3's 3x3/1 pad 1 (count_include_pad), one worker, Into
// (thread CPU time: cpuLoop).
func BenchmarkAvgPoolS(b *testing.B) {
	for _, c := range []struct{ ch, hw, k, s int }{{128, 56, 2, 2}, {256, 28, 2, 2}, {512, 14, 2, 2}, {288, 35, 3, 1}, {768, 17, 3, 1}, {1280, 8, 3, 1}} {
		b.Run(fmt.Sprintf("c%dhw%dk%ds%d", c.ch, c.hw, c.k, c.s), func(b *testing.B) {
			n := node("AveragePool", ints("kernel_shape", int64(c.k), int64(c.k)), ints("strides", int64(c.s), int64(c.s)))
			if c.s == 1 {
				n = node("AveragePool", ints("kernel_shape", 3, 3), ints("pads", 1, 1, 1, 1), intAttr("count_include_pad", 1))
			}
			xs := []int{1, c.ch, c.hw, c.hw}
			x := tensor.From(randF32(rand.New(rand.NewSource(1)), prod(xs)), xs...)
			y := tensor.New(tensor.Float32, 1, c.ch, c.hw/c.s, c.hw/c.s)
			p := parallel.New(1)
			defer p.Close()
			ctx := &kernel.Ctx{Pool: p, State: new(kernel.State)}
			cpuLoop(b, func() {
				if err := intoAveragePool(ctx, n, []*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
