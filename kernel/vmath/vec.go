package vmath

import (
	"math"
	"unsafe"

	"github.com/vouchml/vouch/kernel/vmath/internal/vecasm"
)

// The slice forms below (Exp32s, Sigmoid32s, Tanh32s, Erf32s, GeluErf32s,
// GeluTanh32s, and the arithmetic ones) are methods of Vec, the choice of
// implementation: set dst[i] = f(src[i]) for every i of src. Vector(...)
// runs the vector twins in package vecasm where the CPU has AVX2+FMA; they
// perform f's float32 operations lane by lane in the same order and so give
// the same bits as the scalar loop of the zero Vec, their portable twin.
// dst must be at least as long as src, and dst and src must be the same
// slice or not overlap.

// Vec chooses how the slice functions run. The zero value runs the
// portable (scalar) twins; Vector returns the vector ones. A Vec is a plain
// value: the caller (kernel.Ctx.Vec) decides, no package state does.
type Vec struct {
	fast bool // the AVX2+FMA twins
	wide bool // the 16-lane (AVX-512F) form of those that have one (the same bits)
}

// Vector returns the Vec that runs the vector twins where this CPU has
// AVX2 and FMA (else the portable ones), and with wide also the 16-lane
// AVX-512F forms where the CPU has AVX-512F.
func Vector(wide bool) Vec {
	return Vec{fast: vecasm.Enabled, wide: wide && vecasm.Enabled512}
}

// Portable reports whether v runs the portable twins only.
func (v Vec) Portable() bool { return !v.fast }

// GeluErf32 is the exact GELU, 0.5·x·(1 + erf(x/√2)), as the ONNX Gelu
// operator computes it on float32: (0.5·x)·(1 + Erf32(x·float32(1/√2))).
func GeluErf32(x float32) float32 {
	return 0.5 * x * (1 + Erf32(x*geluRsqrt2))
}

// GeluTanh32 is GELU's tanh approximation, 0.5·x·(1 + tanh(c·(x +
// 0.044715·x³))), c = √(2/π), with each product rounded on its own:
// (0.5·x)·(1 + Tanh32(c·(x + ((0.044715·x)·x)·x))).
func GeluTanh32(x float32) float32 {
	in := geluC * (x + float32(geluK*x*x*x))
	return 0.5 * x * (1 + Tanh32(in))
}

const (
	geluRsqrt2 = float32(1 / math.Sqrt2)
	geluK      = float32(0.044715)
	geluC      = float32(0.7978845608028654) // sqrt(2/pi)
)

// Exp32s sets dst[i] = Exp32(src[i]).
func (v Vec) Exp32s(dst, src []float32) { v.apply(dst, src, vExp, Exp32) }

// Sigmoid32s sets dst[i] = Sigmoid32(src[i]).
func (v Vec) Sigmoid32s(dst, src []float32) { v.apply(dst, src, vSigmoid, Sigmoid32) }

// Tanh32s sets dst[i] = Tanh32(src[i]).
func (v Vec) Tanh32s(dst, src []float32) { v.apply(dst, src, vTanh, Tanh32) }

// Erf32s sets dst[i] = Erf32(src[i]).
func (v Vec) Erf32s(dst, src []float32) { v.apply(dst, src, vErf, Erf32) }

// GeluErf32s sets dst[i] = GeluErf32(src[i]).
func (v Vec) GeluErf32s(dst, src []float32) { v.apply(dst, src, vGeluErf, GeluErf32) }

// GeluTanh32s sets dst[i] = GeluTanh32(src[i]).
func (v Vec) GeluTanh32s(dst, src []float32) { v.apply(dst, src, vGeluTanh, GeluTanh32) }

// The vector routines, by number: apply calls them directly (not through
// a function value), so that its tail buffer stays on the stack.
const (
	vExp = iota
	vSigmoid
	vTanh
	vErf
	vGeluErf
	vGeluTanh
)

func (vv Vec) call(v int, dst, src *float32, n int) {
	switch v {
	case vExp:
		vecasm.Exp(dst, src, n, &table)
	case vSigmoid:
		vecasm.Sigmoid(dst, src, n, &table)
	case vTanh:
		vecasm.Tanh(dst, src, n, &table)
	case vErf:
		vecasm.Erf(dst, src, n, &table)
	case vGeluErf:
		if m := n &^ 15; vv.wide && m > 0 {
			vecasm.GeluErf16(dst, src, m, &table)
			if m == n {
				return
			}
			dst, src, n = (*float32)(unsafe.Add(unsafe.Pointer(dst), 4*m)), (*float32)(unsafe.Add(unsafe.Pointer(src), 4*m)), n-m
		}
		vecasm.GeluErf(dst, src, n, &table)
	case vGeluTanh:
		vecasm.GeluTanh(dst, src, n, &table)
	}
}

// apply runs vector routine number v over whole blocks of 8 and over the last
// partial block padded in a local buffer (its padding lanes are
// discarded), or the scalar f over everything on the portable path.
func (vv Vec) apply(dst, src []float32, v int, f func(float32) float32) {
	n := len(src)
	dst = dst[:n]
	if !vv.fast {
		for i, x := range src {
			dst[i] = f(x)
		}
		return
	}
	m := n &^ 7
	if m > 0 {
		vv.call(v, &dst[0], &src[0], m)
	}
	if m < n {
		var buf [8]float32
		copy(buf[:], src[m:])
		vv.call(v, &buf[0], &buf[0], 8)
		copy(dst[m:], buf[:n-m])
	}
}

// table holds the vector routines' constants, each broadcast to 8 lanes:
// the scalar functions' own constants, so both use the same float32 values.
var table = func() (t [vecasm.NumConsts][8]float32) {
	set := func(k int, v float32) {
		for i := range t[k] {
			t[k][i] = v
		}
	}
	bits := func(k int, b uint32) { set(k, math.Float32frombits(b)) }
	set(vecasm.KLog2e, log2e)
	set(vecasm.KNegLn2Hi, -ln2Hi)
	set(vecasm.KNegLn2Lo, -ln2Lo)
	set(vecasm.KExpP0, expP0)
	set(vecasm.KExpP1, expP1)
	set(vecasm.KExpP2, expP2)
	set(vecasm.KExpP3, expP3)
	set(vecasm.KExpP4, expP4)
	set(vecasm.KExpP5, expP5)
	set(vecasm.KExpMax, expMax)
	set(vecasm.KExpMin, expMin)
	set(vecasm.KInf, float32(math.Inf(1)))
	bits(vecasm.KI127, 127)
	bits(vecasm.KIM126, 0xffffffff-125) // int32 -126
	set(vecasm.KOne, 1)
	set(vecasm.KTwo, 2)
	set(vecasm.KHalf, 0.5)
	bits(vecasm.KSign, 1<<31)
	bits(vecasm.KAbs, 1<<31-1)
	set(vecasm.KTanhP0, tanhP0)
	set(vecasm.KTanhP1, tanhP1)
	set(vecasm.KTanhP2, tanhP2)
	set(vecasm.KTanhP3, tanhP3)
	set(vecasm.KTanhP4, tanhP4)
	set(vecasm.KTanhSmall, tanhSmall)
	set(vecasm.KTanhBig, tanhBig)
	set(vecasm.KErfS0, erfS0)
	set(vecasm.KErfS1, erfS1)
	set(vecasm.KErfS2, erfS2)
	set(vecasm.KErfS3, erfS3)
	set(vecasm.KErfS4, erfS4)
	set(vecasm.KErfS5, erfS5)
	set(vecasm.KErfScale, erfScale)
	set(vecasm.KErfSmall, erfSmall)
	set(vecasm.KErfBig, erfBig)
	set(vecasm.KErfT, erfT)
	set(vecasm.KErfA0, erfA0)
	set(vecasm.KErfA1, erfA1)
	set(vecasm.KErfA2, erfA2)
	set(vecasm.KErfA3, erfA3)
	set(vecasm.KErfA4, erfA4)
	set(vecasm.KGeluRsqrt2, geluRsqrt2)
	set(vecasm.KGeluK, geluK)
	set(vecasm.KGeluC, geluC)
	return t
}()

// MaxFirstNaN32 returns what the sequential loop
//
//	m := x[0]; for each later v: if v > m || (v != v && m == m) { m = v }
//
// returns: the first NaN of x if it has one, else its first maximum. x must
// not be empty. The vector path takes a maximum in any order and keeps it
// only where that order cannot matter (no NaN, a maximum other than ±0,
// whose bits are then unique); otherwise it runs the loop.
func (v Vec) MaxFirstNaN32(x []float32) float32 {
	if n := len(x) &^ 7; v.fast && n > 0 {
		m, nan := vecasm.MaxNaN(&x[0], n)
		if !nan {
			for _, v := range x[n:] {
				if v != v {
					nan = true
				}
				if v > m {
					m = v
				}
			}
			if !nan && m != 0 {
				return m
			}
		}
	}
	m := x[0]
	for _, v := range x[1:] {
		if v > m || (v != v && m == m) {
			m = v
		}
	}
	return m
}

// DivScalar32s sets dst[i] = src[i] / s (one correctly rounded division
// each, on either path). dst and src must be the same slice or not overlap.
func (v Vec) DivScalar32s(dst, src []float32, s float32) {
	dst = dst[:len(src)]
	m := 0
	if v.fast {
		m = len(src) &^ 7
		if m > 0 {
			vecasm.DivBy(&dst[0], &src[0], m, s)
		}
	}
	for i := m; i < len(src); i++ {
		dst[i] = src[i] / s
	}
}

// Add32s sets dst[i] = x[i] + y[i] for every i of x (the float32
// addition, x the first operand). y and dst must be at least as long as
// x; dst must be x, y or not overlap them.
func (v Vec) Add32s(dst, x, y []float32) {
	n := len(x)
	dst, y = dst[:n], y[:n]
	m := 0
	if v.fast {
		m = n &^ 7
		if m > 0 {
			vecasm.AddVV(&dst[0], &x[0], &y[0], m)
		}
	}
	for i := m; i < n; i++ {
		dst[i] = Add32(x[i], y[i])
	}
}

// Add32 is the float32 addition a + b with the vector instructions' NaN
// rule made explicit: a NaN a gives a (quieted), else a NaN b gives b
// (quieted). Plain Go a + b leaves it to the compiler which operand the
// hardware sees first, and so which NaN payload survives when both are
// NaN (a -race build orders them differently); every value but such a
// NaN is a + b's.
func Add32(a, b float32) float32 {
	if a != a {
		return math.Float32frombits(math.Float32bits(a) | 0x00400000)
	}
	if b != b {
		return math.Float32frombits(math.Float32bits(b) | 0x00400000)
	}
	return a + b
}

// SubScalar32s sets dst[i] = src[i] - s (the float32 subtraction, src[i]
// the first operand, on either path). dst and src must be the same slice
// or not overlap.
func (v Vec) SubScalar32s(dst, src []float32, s float32) {
	dst = dst[:len(src)]
	m := 0
	if v.fast {
		m = len(src) &^ 7
		if m > 0 {
			vecasm.SubBy(&dst[0], &src[0], m, s)
		}
	}
	for i := m; i < len(src); i++ {
		dst[i] = src[i] - s
	}
}
