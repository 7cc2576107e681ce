package vecasm

import "golang.org/x/sys/cpu"

// Enabled reports whether this CPU (and OS) supports AVX2 and FMA.
var Enabled = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX

// Exp computes vmath.Exp32 of each element.
//
//go:noescape
func Exp(dst, src *float32, n int, tab *[NumConsts][8]float32)

// Sigmoid computes vmath.Sigmoid32 of each element.
//
//go:noescape
func Sigmoid(dst, src *float32, n int, tab *[NumConsts][8]float32)

// Tanh computes vmath.Tanh32 of each element.
//
//go:noescape
func Tanh(dst, src *float32, n int, tab *[NumConsts][8]float32)

// Erf computes vmath.Erf32 of each element.
//
//go:noescape
func Erf(dst, src *float32, n int, tab *[NumConsts][8]float32)

// GeluErf computes vmath.GeluErf32 of each element.
//
//go:noescape
func GeluErf(dst, src *float32, n int, tab *[NumConsts][8]float32)

// GeluTanh computes vmath.GeluTanh32 of each element.
//
//go:noescape
func GeluTanh(dst, src *float32, n int, tab *[NumConsts][8]float32)

// MaxNaN returns a maximum of the n floats at x (n a positive multiple of
// 8), found by VMAXPS in no particular order, and whether any is a NaN. The
// maximum is exact only when there is no NaN and it is not ±0 (then its
// bits are unique); callers check.
//
//go:noescape
func MaxNaN(x *float32, n int) (max float32, nan bool)

// DivBy sets dst[i] = src[i] / s for n floats (n a multiple of 8).
//
//go:noescape
func DivBy(dst, src *float32, n int, s float32)
