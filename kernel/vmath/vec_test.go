package vmath

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel/vmath/internal/vecasm"
)

var sliceFuncs = []struct {
	name   string
	vec    func(v Vec, dst, src []float32)
	scalar func(float32) float32
}{
	{"Exp32s", Vec.Exp32s, Exp32},
	{"Sigmoid32s", Vec.Sigmoid32s, Sigmoid32},
	{"Tanh32s", Vec.Tanh32s, Tanh32},
	{"Erf32s", Vec.Erf32s, Erf32},
	{"GeluErf32s", Vec.GeluErf32s, GeluErf32},
	{"GeluTanh32s", Vec.GeluTanh32s, GeluTanh32},
}

// specialInputs are the values where the functions branch or the hardware
// has special rules: NaNs (quiet and signalling, both signs, payloads),
// infinities, zeros, subnormals, the extremes, and each range boundary with
// its neighbours on both sides and both signs.
func specialInputs() []float32 {
	f := math.Float32frombits
	v := []float32{
		f(0x7fc00000), f(0xffc00000), f(0x7f800001), f(0xff800001), f(0x7fa12345), f(0xffb54321), f(0x7fc0beef),
		float32(math.Inf(1)), float32(math.Inf(-1)), 0, f(1 << 31),
		f(1), f(0x80000001), f(0x007fffff), f(0x807fffff), f(0x00400000), f(0x00000123),
		f(0x00800000), f(0x80800000), math.MaxFloat32, -math.MaxFloat32, 1, -1, 2, 3,
	}
	bounds := []float32{
		expMax, expMin, 87.3, 88.7, 88.72284, 87.33654, 88, 89, 103, 104,
		126 * 0.6931472, 127 * 0.6931472, 128 * 0.6931472, 0.34657359, // ln2/2: rounding ties of n
		tanhSmall, tanhBig, 9.01, 0.625, 4.505, 9, 10,
		erfSmall, erfBig, 0.5, 4,
		erfSmall * math.Sqrt2, erfBig * math.Sqrt2, 0.625 * 1.2533, 9.01 * 1.2533,
		1e-20, 1e-10, 1e-5, 1e-3, 0.1, 10, 20, 50, 100, 1e10, 1e30,
	}
	for _, b := range bounds {
		for _, s := range []float32{1, -1} {
			x := s * b
			v = append(v, x, math.Nextafter32(x, float32(math.Inf(1))), math.Nextafter32(x, float32(math.Inf(-1))))
			x2 := math.Nextafter32(math.Nextafter32(x, 0), 0)
			v = append(v, x2)
		}
	}
	// Around every rounding tie of n = RoundEven32(x·log2e): x·log2e = k + 0.5.
	for k := -127; k <= 128; k += 1 {
		x := float32((float64(k) + 0.5) / math.Log2E)
		v = append(v, x, math.Nextafter32(x, 0), math.Nextafter32(x, float32(math.Inf(1))), -x)
	}
	return v
}

// randomInputs mixes normal values at scales from 2^-30 to 2^8, uniform
// values over the functions' interesting ranges, and raw random bits.
func randomInputs(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch r.IntN(4) {
		case 0:
			v[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(39)-30))
		case 1:
			v[i] = float32(r.Float64()*200 - 100)
		case 2:
			v[i] = float32(r.Float64()*20 - 10)
		default:
			v[i] = math.Float32frombits(r.Uint32())
		}
	}
	return v
}

// vecs are the vector Vecs this CPU can run: the 8-lane one, and the
// 16-lane one where the CPU has AVX-512F.
func vecs() []Vec {
	v := []Vec{Vector(false)}
	if vecasm.Enabled512 {
		v = append(v, Vector(true))
	}
	return v
}

// twin runs fn on the portable and on every vector path and requires the
// same bits, also in place.
func twin(t *testing.T, name string, fn func(v Vec, dst, src []float32), x []float32) {
	t.Helper()
	want := make([]float32, len(x))
	fn(Vec{}, want, x)
	for _, v := range vecs() {
		got := make([]float32, len(x))
		fn(v, got, x)
		in := append([]float32(nil), x...)
		fn(v, in, in)
		for i := range x {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(in[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s(%g = %#08x) at %d of %d (%+v): vector %#08x (in place %#08x), portable %#08x",
					name, x[i], math.Float32bits(x[i]), i, len(x), v, math.Float32bits(got[i]), math.Float32bits(in[i]), math.Float32bits(want[i]))
			}
		}
	}
}

func TestSliceFuncsTwin(t *testing.T) {
	if !vecasm.Enabled {
		t.Skip("no AVX2+FMA: only the portable path exists")
	}
	r := rand.New(rand.NewPCG(7, 8))
	special := specialInputs()
	for _, f := range sliceFuncs {
		// The portable path is the scalar function itself.
		y := make([]float32, len(special))
		f.vec(Vec{}, y, special)
		for i, x := range special {
			if want := f.scalar(x); math.Float32bits(y[i]) != math.Float32bits(want) {
				t.Fatalf("%s portable differs from the scalar at %g", f.name, x)
			}
		}
		twin(t, f.name, f.vec, special)
		// Every special value in every lane position.
		for sh := 1; sh < 8; sh++ {
			twin(t, f.name, f.vec, special[sh:])
		}
		for it := 0; it < 20; it++ {
			twin(t, f.name, f.vec, randomInputs(r, 50000))
		}
		// Every length from 0 to 70 (whole blocks and tails), at unaligned
		// starts, with specials mixed in.
		for n := 0; n <= 70; n++ {
			for rep := 0; rep < 4; rep++ {
				x := randomInputs(r, n+3)
				for i := range x {
					if r.IntN(4) == 0 {
						x[i] = special[r.IntN(len(special))]
					}
				}
				twin(t, f.name, f.vec, x[rep%4:][:n])
			}
		}
	}
}

// TestSliceFuncsDense sweeps every 7th float32 bit pattern of the
// ranges where the functions do their work.
func TestSliceFuncsDense(t *testing.T) {
	if !vecasm.Enabled {
		t.Skip("no AVX2+FMA")
	}
	if testing.Short() {
		t.Skip("short")
	}
	var x []float32
	for _, s := range []uint32{0, 1 << 31} {
		for b := uint32(0x30000000); b < 0x42c00000; b += 97 { // 4.7e-10 .. 96
			x = append(x, math.Float32frombits(b|s))
		}
	}
	for _, f := range sliceFuncs {
		twin(t, f.name, f.vec, x)
	}
}

func BenchmarkSliceFuncs(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	y := make([]float32, len(x))
	for _, portable := range []bool{false, true} {
		for _, f := range sliceFuncs {
			name := f.name
			if portable {
				name += "/portable"
			}
			v := Vector(true)
			if portable {
				v = Vec{}
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(4 * len(x)))
				for b.Loop() {
					f.vec(v, y, x)
				}
			})
		}
	}
}

func TestMaxAndDivTwin(t *testing.T) {
	if !vecasm.Enabled {
		t.Skip("no AVX2+FMA")
	}
	r := rand.New(rand.NewPCG(9, 10))
	special := specialInputs()
	ref := func(x []float32) float32 {
		m := x[0]
		for _, v := range x[1:] {
			if v > m || (v != v && m == m) {
				m = v
			}
		}
		return m
	}
	for n := 1; n <= 70; n++ {
		for rep := 0; rep < 200; rep++ {
			x := randomInputs(r, n)
			switch rep % 5 {
			case 0: // zeros of both signs, negatives
				for i := range x {
					x[i] = []float32{0, float32(math.Copysign(0, -1)), -1, -3}[r.IntN(4)]
				}
			case 1: // a few specials
				for i := range x {
					if r.IntN(6) == 0 {
						x[i] = special[r.IntN(len(special))]
					}
				}
			case 2: // all negative, with -Inf
				for i := range x {
					x[i] = -float32(math.Abs(float64(x[i])))
					if r.IntN(5) == 0 {
						x[i] = float32(math.Inf(-1))
					}
				}
			case 3: // ordinary
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
			}
			for _, v := range append([]Vec{{}}, vecs()...) {
				if got, want := v.MaxFirstNaN32(x), ref(x); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("MaxFirstNaN32(%v) %+v: %#08x, want %#08x", x, v, math.Float32bits(got), math.Float32bits(want))
				}
			}
			s := x[r.IntN(n)]
			if rep%3 == 0 {
				s = float32(r.NormFloat64() * 100)
			}
			var res [2][]float32
			for p, v := range []Vec{{}, Vector(true)} {
				res[p] = make([]float32, n)
				v.DivScalar32s(res[p], x, s)
			}
			for i := range x {
				want := x[i] / s
				if math.Float32bits(res[0][i]) != math.Float32bits(want) || math.Float32bits(res[1][i]) != math.Float32bits(want) {
					t.Fatalf("DivScalar32s(%g / %g): %g %g, want %g", x[i], s, res[0][i], res[1][i], want)
				}
			}
		}
	}
}
