package fused

import (
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
)

// The SiLU activation as a kernel.Epilogue.Act, so that the base kernel
// applies x·Sigmoid(x) to each block of outputs as it finishes it (in
// cache, one pass) instead of the Elementwise pass over the whole output
// after it. Every form computes, per element, s = vmath.Sigmoid32(x) and
// then the Mul's float32 product in the model's operand order (x·s, or
// s·x with act_sigmoid_first: the order decides only which NaN a NaN
// input gives): the Sigmoid and Mul nodes' bits (TestSiLUAct,
// TestFusedSiLU).

// siluXS and siluSX are the SiLU Acts of the vector kernels' levels (AVX2,
// amd64.SiLUY, and the portable twins: the Ctx's Vec chooses), siluXSZ and
// siluSXZ those of AVX-512 (amd64.SiLUZ); XS multiplies x·s, SX s·x.
func siluXS(v vmath.Vec, dst, src []float32) { SiLUVec(v, dst, src, false) }
func siluSX(v vmath.Vec, dst, src []float32) { SiLUVec(v, dst, src, true) }

func siluXSZ(_ vmath.Vec, dst, src []float32) { siluZ(dst, src, false) }
func siluSXZ(_ vmath.Vec, dst, src []float32) { siluZ(dst, src, true) }

func siluZ(dst, src []float32, sigFirst bool) {
	if len(src) == 0 {
		return
	}
	_ = dst[len(src)-1]
	amd64.SiLUZ(&src[0], &dst[0], len(src), &amd64.SiLUTab, sigFirst)
}

// SiLUVec is SiLU at v's level below AVX-512 (kernel/q8's int8 epilogue
// uses it too): amd64.SiLUY where v is not the portable Vec (an AVX2 Ctx's),
// else vmath.Sigmoid32 and the product in blocks of a stack buffer. dst
// and src may be the same slice: each x is read before its output is
// written.
func SiLUVec(v vmath.Vec, dst, src []float32, sigFirst bool) {
	if !v.Portable() && amd64.Enabled {
		// AVX2: the vector Sigmoid's instructions and the product in
		// one pass (amd64.SiLUY).
		if len(src) > 0 {
			_ = dst[len(src)-1]
			amd64.SiLUY(&src[0], &dst[0], len(src), sigFirst)
		}
		return
	}
	var buf [64]float32 // blocks change no value; small, as it is zeroed on every call (callers pass runs of 16)
	dst = dst[:len(src)]
	for i := 0; i < len(src); i += len(buf) {
		x := src[i:min(i+len(buf), len(src))]
		s := buf[:len(x)]
		v.Sigmoid32s(s, x)
		d := dst[i : i+len(x)]
		if sigFirst {
			for j, xv := range x {
				d[j] = s[j] * xv
			}
		} else {
			for j, xv := range x {
				d[j] = xv * s[j]
			}
		}
	}
}

// siluAct returns the SiLU Act for c's instruction set.
func siluAct(c *kernel.Ctx, sigFirst bool) func(v vmath.Vec, dst, src []float32) {
	switch {
	case c.AVX512() && amd64.EnabledZ && sigFirst:
		return siluSXZ
	case c.AVX512() && amd64.EnabledZ:
		return siluXSZ
	case sigFirst:
		return siluSX
	}
	return siluXS
}

// hardSwishActs returns HardSigmoidMul's epilogue Acts for a HardSigmoid
// of alpha a and beta b: [0] the one of every level below AVX-512 (the
// AVX2 amd64.HardSwishY where the Vec it is given is not the portable one,
// as the Ctx's Vec of an AVX2 level is not; the portable twin
// hardSwishLoop otherwise), [1] the AVX-512 one (amd64.HardSwishZ). All
// compute, per element, h = max(0, min(1, float32(a*x)+b)) with Go's min
// and max (elementwise's HardSigmoid) and then the Mul's product in the
// model's operand order (x·h, or h·x with sigFirst); HardSwishY and
// HardSwishZ leave a group of 8 (16) holding a NaN to the portable loop.
// Made once per layer (the parts), so that a call allocates nothing.
func hardSwishActs(a, b float32, sigFirst bool) *[2]func(vmath.Vec, []float32, []float32) {
	portable := func(_ vmath.Vec, dst, src []float32) { hardSwishLoop(dst, src, a, b, sigFirst) }
	// vec runs f (HardSwishY or HardSwishZ, groups of g) and the portable
	// loop over the groups where f stops.
	vec := func(f func(x, y *float32, n int, a, b float32) int, g int, dst, src []float32) {
		dst = dst[:len(src)]
		for len(src) > 0 {
			k := f(&src[0], &dst[0], len(src), a, b)
			src, dst = src[k:], dst[k:]
			if len(src) > 0 { // a group with a NaN: Go's min and max
				m := min(g, len(src))
				hardSwishLoop(dst[:m], src[:m], a, b, sigFirst)
				src, dst = src[m:], dst[m:]
			}
		}
	}
	y := func(v vmath.Vec, dst, src []float32) {
		if v.Portable() {
			hardSwishLoop(dst, src, a, b, sigFirst)
			return
		}
		vec(amd64.HardSwishY, 8, dst, src)
	}
	z := func(_ vmath.Vec, dst, src []float32) { vec(amd64.HardSwishZ, 16, dst, src) }
	if !amd64.Enabled {
		y = portable
	}
	if !amd64.EnabledZ {
		z = portable
	}
	return &[2]func(vmath.Vec, []float32, []float32){y, z}
}

// hardSwishLoop is x·HardSigmoid(x): elementwise's HardSigmoid
// expression into a block buffer, then the product in the model's order,
// written as elementwise's Mul loop (d[i] = a[i] * b[i]: the compiled
// product's first operand, whose NaN a product of two NaNs returns, is
// a[i]; HardSigmoid's NaN is Go's min's, not x's). dst and src may be the
// same slice.
func hardSwishLoop(dst, src []float32, a, b float32, sigFirst bool) {
	var buf [64]float32 // blocks change no value; small, as it is zeroed on every call (callers pass runs of 16)
	dst = dst[:len(src)]
	for i := 0; i < len(src); i += len(buf) {
		x := src[i:min(i+len(buf), len(src))]
		h := buf[:len(x)]
		for j, v := range x {
			h[j] = max(0, min(1, float32(a*v)+b))
		}
		if sigFirst {
			mulRow(dst[i:i+len(x)], h, x)
		} else {
			mulRow(dst[i:i+len(x)], x, h)
		}
	}
}

// mulRow is elementwise's float32 Mul loop: d[i] = a[i] * b[i]. Not
// inlined, so that its product keeps that shape (a[i] loaded, b[i] the
// memory operand) wherever it is called (TestHardSwishAct).
//
//go:noinline
func mulRow(d, a, b []float32) {
	a, b = a[:len(d)], b[:len(d)]
	for i := range d {
		d[i] = a[i] * b[i]
	}
}
