package amd64

import (
	"math"
	"math/rand/v2"
	"testing"
)

// yInputs returns n random values with NaNs (both signs, several
// payloads), ±Inf, ±0, subnormals and values at HardSigmoid's bends mixed
// in at random places (none with nan false).
func yInputs(r *rand.Rand, n int, nan bool) []float32 {
	special := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), math.Float32frombits(0x807fffff), -3, 3, -2.5, 2.5, 2.9999998, -3.0000002}
	nans := []float32{math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00000), math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc12345)}
	x := make([]float32, n)
	for i := range x {
		switch k := r.IntN(10); {
		case k == 0 && nan:
			x[i] = nans[r.IntN(len(nans))]
		case k <= 2:
			x[i] = special[r.IntN(len(special))]
		default:
			x[i] = float32(r.NormFloat64() * 4)
		}
	}
	return x
}

func hsigRef(v, a, b float32) float32 { return max(0, min(1, float32(a*v)+b)) }

// firstNaNGroup is where HardSigmoidY and HardSwishY must stop: the start
// of the first group of 8 holding a NaN float32(a*x)+b, or len(x).
func firstNaNGroup(x []float32, a, b float32) int {
	for i, v := range x {
		if t := float32(a*v) + b; t != t {
			return i &^ 7
		}
	}
	return len(x)
}

func sameBits32(t *testing.T, name string, got, want, x []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] x=%v (%#08x): got %#08x, want %#08x", name, i, x[i], math.Float32bits(x[i]), math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

// TestHardSigmoidY, TestHardSwishY: every length 0..100 at several
// offsets, with and without NaNs, for several (alpha, beta): where the
// kernel stops is the first group of 8 with a NaN, everything before it
// has the portable loop's bits, and nothing past n (or past the stop) is
// written; in place too.
func TestHardSigmoidY(t *testing.T) { testHardY(t, false) }
func TestHardSwishY(t *testing.T)   { testHardY(t, true) }

func testHardY(t *testing.T, swish bool) {
	if !Enabled {
		t.Skip("no AVX2")
	}
	name, f := "HardSigmoidY", HardSigmoidY
	if swish {
		name, f = "HardSwishY", HardSwishY
	}
	r := rand.New(rand.NewPCG(16, 8))
	// -0 for beta makes float32(a*x)+b a -0 (max(0, -0) is +0); an
	// infinite alpha makes the masked-off lanes' 0·a a NaN.
	negZero := float32(math.Copysign(0, -1))
	for _, ab := range [][2]float32{{1.0 / 6, 0.5}, {0.2, 0.5}, {-1, 0}, {0.25, negZero}, {float32(math.Inf(1)), 0.5}} {
		a, b := ab[0], ab[1]
		for n := 0; n <= 100; n++ {
			for _, off := range []int{0, 1, 5} {
				for _, nan := range []bool{false, true} {
					buf := yInputs(r, off+n+1, nan)
					x := buf[off : off+n]
					want := make([]float32, n)
					for i, v := range x {
						want[i] = hsigRef(v, a, b)
						if swish {
							want[i] = v * want[i]
						}
					}
					stop := firstNaNGroup(x, a, b)
					const guard = 42
					for _, inPlace := range []bool{false, true} {
						y := make([]float32, off+n+1)
						for i := range y {
							y[i] = guard
						}
						if inPlace {
							copy(y, buf)
						}
						src := buf
						if inPlace {
							src = y
						}
						k := f(&src[off], &y[off], n, a, b)
						if k != stop {
							t.Fatalf("%s a=%v n=%d off=%d in place=%v: stopped at %d, want %d", name, a, n, off, inPlace, k, stop)
						}
						sameBits32(t, name, y[off:off+k], want[:k], x)
						for i := off + k; i < len(y); i++ {
							w := float32(guard)
							if inPlace {
								w = buf[i]
							}
							if math.Float32bits(y[i]) != math.Float32bits(w) {
								t.Fatalf("%s a=%v n=%d off=%d: wrote y[%d] past the stop %d", name, a, n, off, i-off, k)
							}
						}
					}
				}
			}
		}
	}
}

// TestScaleY: every length 0..100 at several offsets, NaNs in both
// operands, the bits of Go's compiled product loop x·s, out of place and
// in place, nothing written past n.
func TestScaleY(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(16, 9))
	for n := 0; n <= 100; n++ {
		for _, off := range []int{0, 3} {
			for _, s := range []float32{0.75, float32(math.Inf(-1)), 0, math.Float32frombits(0xffa00001)} {
				x := yInputs(r, off+n+1, true)
				want := make([]float32, len(x))
				scaleRef(want, x, s)
				y := make([]float32, len(x))
				y[off+n] = 42
				ScaleY(&x[off], &y[off], n, s)
				sameBits32(t, "ScaleY", y[off:off+n], want[off:off+n], x[off:])
				if y[off+n] != 42 {
					t.Fatalf("ScaleY n=%d: wrote past the end", n)
				}
				ScaleY(&x[off], &x[off], n, s)
				sameBits32(t, "ScaleY in place", x[off:off+n], want[off:off+n], x[off:])
			}
		}
	}
}

//go:noinline
func scaleRef(d, a []float32, s float32) {
	a = a[:len(d)]
	for i := range d {
		d[i] = a[i] * s
	}
}

func BenchmarkHardSwishY(b *testing.B) {
	if !Enabled {
		b.Skip("no AVX2")
	}
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%1000)/100 - 5
	}
	y := make([]float32, len(x))
	for b.Loop() {
		HardSwishY(&x[0], &y[0], len(x), 1.0/6, 0.5)
	}
	b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gvalues/s")
}
