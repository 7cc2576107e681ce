package vmath

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fmaExact computes a*b+c rounded once to float32 with big.Float.
func fmaExact(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

func TestFMA32Exact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		a := float32(r.NormFloat64())
		b := float32(r.NormFloat64())
		c := float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(60)-30)))
		if i%3 == 0 { // provoke near-cancellation and ties
			c = -float32(float64(a) * float64(b))
		}
		got, want := FMA32(a, b, c), fmaExact(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("FMA32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	// A constructed double-rounding case: a*b+c sits exactly on a float32
	// midpoint after rounding to float64, with a tiny error below it.
	a, b := float32(1+1.0/(1<<12)), float32(1+1.0/(1<<12)) // a*b = 1 + 2^-11 + 2^-24
	c := float32(-1.0 / (1 << 24))
	if got, want := FMA32(a, b, c), fmaExact(a, b, c); got != want {
		t.Fatalf("midpoint case: got %g want %g", got, want)
	}
}

func relErr(got float32, want float64) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got)-want) / math.Abs(want)
}

func TestAccuracy(t *testing.T) {
	cases := []struct {
		name   string
		f      func(float32) float32
		ref    func(float64) float64
		lo, hi float64
		bound  float64
		abs    bool
	}{
		{"Exp32", Exp32, math.Exp, -87, 88.7, 3e-7, false},
		{"Log32", Log32, math.Log, 1e-30, 1e30, 3e-7, false},
		{"Tanh32", Tanh32, math.Tanh, -10, 10, 5e-7, false},
		{"Sigmoid32", Sigmoid32, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, -80, 80, 5e-7, false},
		{"Erf32", Erf32, math.Erf, -5, 5, 4e-7, true},
		{"Erf32small", Erf32, math.Erf, -0.5, 0.5, 4e-7, false},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		worst := 0.0
		for i := 0; i < 200000; i++ {
			var x float32
			if c.name == "Log32" {
				x = float32(math.Exp(r.Float64()*math.Log(c.hi/c.lo) + math.Log(c.lo)))
			} else {
				x = float32(c.lo + r.Float64()*(c.hi-c.lo))
			}
			got := c.f(x)
			want := c.ref(float64(x))
			var e float64
			if c.abs {
				e = math.Abs(float64(got) - want)
			} else {
				e = relErr(got, want)
			}
			if e > worst {
				worst = e
			}
		}
		if worst > c.bound {
			t.Errorf("%s: worst error %.3g exceeds documented bound %.3g", c.name, worst, c.bound)
		}
	}
}

func TestSpecialValues(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	if Exp32(inf) != inf || Exp32(-inf) != 0 || Exp32(0) != 1 || Exp32(nan) == Exp32(nan) {
		t.Error("Exp32 special values")
	}
	if Log32(1) != 0 || !math.IsInf(float64(Log32(0)), -1) || Log32(-1) == Log32(-1) || Log32(inf) != inf {
		t.Error("Log32 special values")
	}
	if Tanh32(20) != 1 || Tanh32(-20) != -1 || Tanh32(0) != 0 {
		t.Error("Tanh32 special values")
	}
	if Erf32(10) != 1 || Erf32(-10) != -1 || Erf32(0) != 0 {
		t.Error("Erf32 special values")
	}
	if v := Log32(1e-40); math.Abs(float64(v)-math.Log(1e-40)) > 1e-4 {
		t.Errorf("Log32 subnormal = %g", v)
	}
}
