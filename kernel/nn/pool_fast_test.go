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

// tieF32 is data dense in ties that only the tap order resolves (+0 and
// -0), NaNs with payloads and infinities.
func tieF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch r.Intn(8) {
		case 0:
			v[i] = float32(math.Copysign(0, -1))
		case 1:
			v[i] = 0
		case 2:
			v[i] = math.Float32frombits(0x7f800001 + uint32(r.Intn(1000)))
		case 3:
			v[i] = float32(math.Inf(-1))
		default:
			v[i] = float32(r.NormFloat64())
		}
	}
	return v
}

// TestMaxPoolTwin: the separable 2-D MaxPool, on the vector kernels and on
// the portable twin, gives the bits of the window-table reference
// (maxPoolInto), at 1 and 3 workers; Into gives Run's bits.
func TestMaxPoolTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(7))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := 0; i < 120; i++ {
		kh, kw := 1+r.Intn(4), 1+r.Intn(4)
		sh, sw := 1+r.Intn(2), 1+r.Intn(2)
		if i%5 == 0 {
			sw = 3
		}
		h, w := kh+r.Intn(40), kw+r.Intn(60)
		ph, pw := r.Intn(kh), r.Intn(kw)
		attrs := []*ir.Attr{ints("kernel_shape", int64(kh), int64(kw)), ints("strides", int64(sh), int64(sw)),
			ints("pads", int64(ph), int64(pw), int64(r.Intn(kh)), int64(r.Intn(kw)))}
		if i%3 == 0 {
			attrs = append(attrs, intAttr("ceil_mode", 1))
		}
		n := node("MaxPool", attrs...)
		xs := []int{1 + r.Intn(2), 1 + r.Intn(5), h, w}
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
		checkMaxPool(t, pools, n, x, g, func() string {
			return fmt.Sprintf("case %d (x %v, k %v s %v pads %v %v out %v)", i, xs, g.k, g.stride, g.padB, g.padE, g.out)
		})
	}
}

// BenchmarkMaxPoolResNet is resnet18's MaxPool (3x3, stride 2, pads 1) on
// 64x112x112, one worker.
func BenchmarkMaxPoolResNet(b *testing.B) {
	n := node("MaxPool", ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1))
	x := tensor.From(randF32(rand.New(rand.NewSource(1)), 64*112*112), 1, 64, 112, 112)
	y := tensor.New(tensor.Float32, 1, 64, 56, 56)
	p := parallel.New(1)
	defer p.Close()
	c := &kernel.Ctx{Pool: p}
	for i := 0; i < b.N; i++ {
		if err := intoMaxPool(c, n, []*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLayerNorm32Twin: the float32 LayerNormalization (inlined FMA fast
// path, direct scale and bias) gives the generic kernel's bits.
func TestLayerNorm32Twin(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for i := 0; i < 40; i++ {
		D, R := 1+r.Intn(200), 1+r.Intn(6)
		x := specialF32(r, R*D, i%3 == 0)
		if i%4 == 1 {
			for j := range x {
				x[j] = x[j]*1e18 + 3e19 // large, nearly equal: slow FMA cases
			}
		}
		sc, b := specialF32(r, D, false), specialF32(r, D, i%2 == 0)
		if i%5 == 0 {
			b = nil
		}
		id := make([]int, D)
		for j := range id {
			id[j] = j
		}
		want := layerNorm(x, sc, b, [][]int{id, id}, D, float32(1e-5))
		for _, w := range want {
			canonNaNs(w)
		}
		y, m, iv := make([]float32, R*D), make([]float32, R), make([]float32, R)
		layerNorm32(vmath.Vector(true), x, sc, b, nil, nil, D, 1e-5, y, m, iv)
		for k, got := range [][]float32{y, m, iv} {
			if d := sameF32(got, want[k]); d >= 0 {
				t.Fatalf("case %d (R %d, D %d): output %d [%d] = %#x, want %#x", i, R, D, k, d, math.Float32bits(got[d]), math.Float32bits(want[k][d]))
			}
		}
	}
}
