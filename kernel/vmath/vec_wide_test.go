package vmath

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel/vmath/internal/vecasm"
)

// TestAdd32sTwin checks Add32s on the vector path against the scalar
// float32 additions, bit for bit, on every length up to 100 (tails
// included), with NaN, ±Inf, ±0 and subnormals mixed in, in place too.
func TestAdd32sTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
		float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3e38}
	gen := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 10)
			if r.IntN(8) == 0 {
				v[i] = sp[r.IntN(len(sp))]
			}
		}
		return v
	}
	for n := 0; n <= 100; n++ {
		x, y := gen(n), gen(n)
		want := make([]float32, n)
		for i := range x {
			want[i] = x[i] + y[i]
		}
		for _, v := range append([]Vec{{}}, vecs()...) {
			portable := v.Portable()
			got := make([]float32, n)
			v.Add32s(got, x, y)
			in := append([]float32{}, x...)
			v.Add32s(in, in, y)
			for i := range want {
				w := math.Float32bits(want[i])
				if g := math.Float32bits(got[i]); g != w {
					t.Fatalf("n=%d portable=%v i=%d: %#x + %#x = %#x, want %#x", n, portable, i, math.Float32bits(x[i]), math.Float32bits(y[i]), g, w)
				}
				if g := math.Float32bits(in[i]); g != w {
					t.Fatalf("n=%d portable=%v i=%d in place: %#x, want %#x", n, portable, i, g, w)
				}
			}
		}
	}
}

// TestGeluErfWideTwin runs the GeluErf32s twin checks with the 16-lane
// (AVX-512F) routine and with the 8-lane one alone, so that both vector
// forms are held to the portable bits (specials in every lane position of
// a 16-lane block, random values, every length to 70 and a dense sweep).
func TestGeluErfWideTwin(t *testing.T) {
	if !vecasm.Enabled {
		t.Skip("no AVX2+FMA")
	}
	r := rand.New(rand.NewPCG(9, 10))
	special := specialInputs()
	var dense []float32
	for _, s := range []uint32{0, 1 << 31} {
		for b := uint32(0x3e000000); b < 0x41200000; b += 331 { // 0.125 .. 10
			dense = append(dense, math.Float32frombits(b|s))
		}
	}
	for _, w := range []bool{false, true} {
		if w && !vecasm.Enabled512 {
			continue
		}
		ge := func(v Vec, dst, src []float32) {
			if v.Portable() {
				v.GeluErf32s(dst, src) // twin's reference: the scalar loop
				return
			}
			Vector(w).GeluErf32s(dst, src)
		}
		for sh := 0; sh < 16; sh++ {
			twin(t, "GeluErf32s", ge, special[sh:])
		}
		for it := 0; it < 10; it++ {
			twin(t, "GeluErf32s", ge, randomInputs(r, 20000))
		}
		for n := 0; n <= 70; n++ {
			x := randomInputs(r, n)
			for i := range x {
				if r.IntN(4) == 0 {
					x[i] = special[r.IntN(len(special))]
				}
			}
			twin(t, "GeluErf32s", ge, x)
		}
		twin(t, "GeluErf32s", ge, dense)
	}
}

// TestSubScalar32sTwin checks SubScalar32s against the scalar float32
// subtractions, bit for bit, vector and portable, with specials (NaN
// operands on either side included) and every length up to 70.
func TestSubScalar32sTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	special := specialInputs()
	for n := 0; n <= 70; n++ {
		for rep := 0; rep < 20; rep++ {
			x := randomInputs(r, n)
			for i := range x {
				if r.IntN(4) == 0 {
					x[i] = special[r.IntN(len(special))]
				}
			}
			s := randomInputs(r, 1)[0]
			if rep%3 == 0 {
				s = special[r.IntN(len(special))]
			}
			for _, v := range append([]Vec{{}}, vecs()...) {
				portable := v.Portable()
				got := make([]float32, n)
				v.SubScalar32s(got, x, s)
				in := append([]float32{}, x...)
				v.SubScalar32s(in, in, s)
				for i, v := range x {
					w := math.Float32bits(v - s)
					if math.Float32bits(got[i]) != w || math.Float32bits(in[i]) != w {
						t.Fatalf("n=%d portable=%v: %#x - %#x = %#x (in place %#x), want %#x", n, portable,
							math.Float32bits(v), math.Float32bits(s), math.Float32bits(got[i]), math.Float32bits(in[i]), w)
					}
				}
			}
		}
	}
}

// BenchmarkGeluErf32sWide is GeluErf32s over 8192 values in L1 on the
// 16-lane routine (two vectors a pass: 5.3 -> 3.6 us).
func BenchmarkGeluErf32sWide(b *testing.B) {
	if !vecasm.Enabled512 {
		b.Skip("no AVX-512F")
	}
	x := make([]float32, 8192)
	for i := range x {
		x[i] = float32(i%1000)/100 - 5
	}
	y := make([]float32, len(x))
	for i := 0; i < b.N; i++ {
		Vector(true).GeluErf32s(y, x)
	}
	b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gvalues/s")
}
