// Package vmath holds vouch's own float32 elementary functions: the exact
// sequences of IEEE operations that every kernel, portable or vectorised,
// must perform, so that results never depend on the platform's libm or on
// compiler contraction.
//
// Rules for code here and for its vector twins:
//   - Each step is one correctly rounded float32 operation. Multiply-adds are
//     written as FMA32 (one rounding); a product that must be rounded on its
//     own is wrapped in an explicit float32 conversion, which the Go spec
//     guarantees is not fused with a following add.
//   - Polynomial coefficients and the order of evaluation (Horner) are fixed.
//
// Accuracy (measured on random float32 inputs over the ranges in
// vmath_test.go): Exp32 and Log32 relative error below 3e-7; Tanh32 and Sigmoid32
// a relative error below 5e-7; Erf32 absolute error below 4e-7
// (relative below 4e-7 for |x| < 0.5). Exp32 flushes results below 2^-126 to
// zero.
package vmath

import "math"

// FMA32 returns a*b+c rounded once to float32, exactly as a hardware fused
// multiply-add (VFMADD*PS) does.
func FMA32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24+24 bits fit in 53
	s := p + float64(c)
	if math.IsInf(s, 0) || s != s {
		return float32(s)
	}
	// Fast path: s is a normal float32-range value whose bits below
	// float32 precision are not exactly a half: one rounding suffices.
	bits := math.Float64bits(s)
	if exp := (bits >> 52) & 0x7ff; exp > 1023-126 && exp < 1023+127 && bits&(1<<29-1) != 1<<28 {
		return float32(s)
	}
	r := float32(s)
	if float64(r) == s {
		return r
	}
	// s was rounded once already; a second rounding to float32 goes wrong
	// only when s lands exactly halfway between two float32 values. Then the
	// sign of the first rounding's error decides.
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	if e == 0 {
		return r
	}
	var other float32
	if float64(r) < s {
		other = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		other = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	mid := (float64(r) + float64(other)) / 2
	if s != mid {
		return r
	}
	lo, hi := min(r, other), max(r, other)
	if e > 0 {
		return hi
	}
	return lo
}

// RoundEven32 rounds to the nearest integer, ties to even (VROUNDPS mode 0).
func RoundEven32(x float32) float32 { return float32(math.RoundToEven(float64(x))) }

const (
	log2e  float32 = 1.44269504088896341
	ln2Hi  float32 = 0.693359375
	ln2Lo  float32 = -2.12194440e-4
	expMax float32 = 88.72283935546875
	expMin float32 = -87.33654475

	// Exp32's polynomial, highest degree first.
	expP0 float32 = 1.9875691500e-4
	expP1 float32 = 1.3981999507e-3
	expP2 float32 = 8.3334519073e-3
	expP3 float32 = 4.1665795894e-2
	expP4 float32 = 1.6666665459e-1
	expP5 float32 = 5.0000001201e-1

	// Tanh32: the polynomial for |x| < tanhSmall, ±1 beyond tanhBig.
	tanhSmall float32 = 0.625
	tanhBig   float32 = 9.01
	tanhP0    float32 = -5.70498872745e-3
	tanhP1    float32 = 2.06390887954e-2
	tanhP2    float32 = -5.37397155531e-2
	tanhP3    float32 = 1.33314422036e-1
	tanhP4    float32 = -3.33332819422e-1

	// Erf32: the Taylor polynomial (in x², times x·2/√π) below erfSmall,
	// Abramowitz and Stegun 7.1.26 (t = 1/(1+erfT·|x|)) up to erfBig.
	erfSmall float32 = 0.5
	erfBig   float32 = 4
	erfS0    float32 = -1.0 / 1320
	erfS1    float32 = 1.0 / 216
	erfS2    float32 = -1.0 / 42
	erfS3    float32 = 1.0 / 10
	erfS4    float32 = -1.0 / 3
	erfS5    float32 = 1
	erfScale float32 = 1.1283791670955126
	erfT     float32 = 0.3275911
	erfA0    float32 = 1.061405429
	erfA1    float32 = -1.453152027
	erfA2    float32 = 1.421413741
	erfA3    float32 = -0.284496736
	erfA4    float32 = 0.254829592
)

// Exp32 returns e**x.
func Exp32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > expMax:
		return float32(math.Inf(1))
	case x < expMin:
		return 0
	}
	n := RoundEven32(float32(x * log2e))
	r := FMA32(n, -ln2Hi, x)
	r = FMA32(n, -ln2Lo, r)
	p := expP0
	p = FMA32(p, r, expP1)
	p = FMA32(p, r, expP2)
	p = FMA32(p, r, expP3)
	p = FMA32(p, r, expP4)
	p = FMA32(p, r, expP5)
	r2 := float32(r * r)
	y := FMA32(p, r2, r)
	y = y + 1
	return Ldexp32(y, int32(n))
}

// Ldexp32 returns y * 2**n for n in [-127, 128], by multiplying with exact
// powers of two (in two steps where 2**n itself is not a normal float32).
func Ldexp32(y float32, n int32) float32 {
	switch {
	case n > 127:
		return float32(float32(y*pow2(127)) * pow2(n-127))
	case n < -126:
		return float32(float32(y*pow2(-126)) * pow2(n+126))
	}
	return y * pow2(n)
}

func pow2(n int32) float32 { return math.Float32frombits(uint32(n+127) << 23) }

// Log32 returns the natural logarithm of x.
func Log32(x float32) float32 {
	switch {
	case x != x || math.IsInf(float64(x), 1):
		return x
	case x < 0:
		return float32(math.NaN())
	case x == 0:
		return float32(math.Inf(-1))
	}
	bits := math.Float32bits(x)
	e := int32(0)
	if bits < 0x00800000 { // subnormal: scale up by 2^23
		x = float32(x * 8388608)
		bits = math.Float32bits(x)
		e = -23
	}
	e += int32(bits>>23) - 126
	m := math.Float32frombits(bits&0x007fffff | 0x3f000000) // in [0.5, 1)
	if m < 0.70710678118654752 {
		e--
		m = m + m - 1
	} else {
		m = m - 1
	}
	fe := float32(e)
	z := float32(m * m)
	p := float32(7.0376836292e-2)
	p = FMA32(p, m, -1.1514610310e-1)
	p = FMA32(p, m, 1.1676998740e-1)
	p = FMA32(p, m, -1.2420140846e-1)
	p = FMA32(p, m, 1.4249322787e-1)
	p = FMA32(p, m, -1.6668057665e-1)
	p = FMA32(p, m, 2.0000714765e-1)
	p = FMA32(p, m, -2.4999993993e-1)
	p = FMA32(p, m, 3.3333331174e-1)
	y := float32(float32(p*m) * z)
	y = FMA32(fe, ln2Lo, y)
	y = FMA32(-0.5, z, y)
	r := m + y
	return FMA32(fe, ln2Hi, r)
}

// Tanh32 returns the hyperbolic tangent of x.
func Tanh32(x float32) float32 {
	if x != x {
		return x
	}
	a := float32(math.Abs(float64(x)))
	if a < tanhSmall {
		z := float32(x * x)
		p := tanhP0
		p = FMA32(p, z, tanhP1)
		p = FMA32(p, z, tanhP2)
		p = FMA32(p, z, tanhP3)
		p = FMA32(p, z, tanhP4)
		return FMA32(float32(p*z), x, x)
	}
	if a > tanhBig {
		return float32(math.Copysign(1, float64(x)))
	}
	e := Exp32(a + a)
	t := 1 - 2/(e+1)
	if x < 0 {
		return -t
	}
	return t
}

// Sigmoid32 returns 1 / (1 + e**-x).
func Sigmoid32(x float32) float32 {
	return 1 / (1 + Exp32(-x))
}

// Erf32 returns the error function of x: a Taylor polynomial below 0.5 in
// magnitude, Abramowitz and Stegun 7.1.26 above it, ±1 beyond 4.
func Erf32(x float32) float32 {
	if x != x {
		return x
	}
	a := float32(math.Abs(float64(x)))
	var r float32
	switch {
	case a < erfSmall:
		z := float32(x * x)
		p := erfS0
		p = FMA32(p, z, erfS1)
		p = FMA32(p, z, erfS2)
		p = FMA32(p, z, erfS3)
		p = FMA32(p, z, erfS4)
		p = FMA32(p, z, erfS5)
		return float32(p * float32(x*erfScale))
	case a >= erfBig:
		r = 1
	default:
		t := 1 / FMA32(erfT, a, 1)
		p := erfA0
		p = FMA32(p, t, erfA1)
		p = FMA32(p, t, erfA2)
		p = FMA32(p, t, erfA3)
		p = FMA32(p, t, erfA4)
		p = float32(p * t)
		r = FMA32(-p, Exp32(-float32(a*a)), 1)
	}
	if x < 0 {
		return -r
	}
	return r
}
