package vmath

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel/vmath/internal/vecasm"
)

func rowsInput(r *rand.Rand, n int, special bool) []float32 {
	x := make([]float32, n)
	sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1e38, -1e38, 1e-45}
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(20)-10)))
		if special && r.IntN(50) == 0 {
			x[i] = sp[r.IntN(len(sp))]
		}
	}
	return x
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s at %d: vector %g (%#08x), portable %g (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestRowsTwin checks SumRows32, SqDevRows32 and NormAffine32 against their
// portable twins bit for bit, on random shapes (row and column tails) with
// NaN, ±Inf, ±0, huge and subnormal values mixed in.
func TestRowsTwin(t *testing.T) {
	if !vecasm.Enabled {
		t.Skip("no AVX2+FMA: only the portable path exists")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 400; it++ {
		R, D := r.IntN(20), r.IntN(70)
		if it%10 == 0 {
			R, D = 8+r.IntN(70), 8*(1+r.IntN(40))
		}
		special := it%3 == 0
		x := rowsInput(r, R*D+r.IntN(9), special)
		sc, bs := rowsInput(r, D, special), rowsInput(r, D, special)
		run := func(v Vec) (sum, mean, q, y, y2 []float32) {
			sum, mean, q = make([]float32, R), make([]float32, R), make([]float32, R)
			v.SumRows32(sum, x, D)
			for i := range mean {
				mean[i] = sum[i] / float32(D)
			}
			v.SqDevRows32(q, x, D, mean)
			y, y2 = make([]float32, R*D), make([]float32, R*D)
			for i := 0; i < R; i++ {
				iv := 1 / float32(math.Sqrt(float64(q[i]/float32(D)+1e-5)))
				v.NormAffine32(y[i*D:(i+1)*D], x[i*D:(i+1)*D], mean[i], iv, sc, bs)
				v.NormAffine32(y2[i*D:(i+1)*D], x[i*D:(i+1)*D], mean[i], iv, sc, nil)
			}
			return
		}
		s0, m0, q0, y0, z0 := run(Vec{})
		s1, m1, q1, y1, z1 := run(Vector(true))
		sameBits(t, "SumRows32", s1, s0)
		sameBits(t, "mean", m1, m0)
		sameBits(t, "SqDevRows32", q1, q0)
		sameBits(t, "NormAffine32", y1, y0)
		sameBits(t, "NormAffine32 without bias", z1, z0)
	}
}

// TestRowsPortable checks the portable twins against the plain loops.
func TestRowsPortable(t *testing.T) {
	var v Vec
	r := rand.New(rand.NewPCG(5, 6))
	R, D := 5, 13
	x := rowsInput(r, R*D, false)
	sum, q, mean := make([]float32, R), make([]float32, R), make([]float32, R)
	v.SumRows32(sum, x, D)
	for i := range mean {
		mean[i] = float32(i) / 3
	}
	v.SqDevRows32(q, x, D, mean)
	for i := 0; i < R; i++ {
		var s, v float32
		for _, e := range x[i*D : (i+1)*D] {
			s += e
			v = FMA32(e-mean[i], e-mean[i], v)
		}
		if s != sum[i] || v != q[i] {
			t.Fatalf("row %d: got %g %g want %g %g", i, sum[i], q[i], s, v)
		}
	}
}

func BenchmarkRows(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	R, D := 64, 256
	x := rowsInput(r, R*D, false)
	sc, bs := rowsInput(r, D, false), rowsInput(r, D, false)
	sum, q, y := make([]float32, R), make([]float32, R), make([]float32, R*D)
	for _, p := range []bool{true, false} {
		name := "vector"
		if p {
			name = "portable"
		}
		v := Vector(true)
		if p {
			v = Vec{}
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				v.SumRows32(sum, x, D)
				v.SqDevRows32(q, x, D, sum)
				for i := 0; i < R; i++ {
					v.NormAffine32(y[i*D:(i+1)*D], x[i*D:(i+1)*D], sum[i], q[i], sc, bs)
				}
			}
		})
	}
}
