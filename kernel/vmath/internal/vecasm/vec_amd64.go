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

// SumRows8 sets sum[l], for the 8 rows l of D floats at x, to the
// sequential float32 sum s = s + x[l*D+k] over k < n in order, from s = 0
// (n a multiple of 8, n <= D).
//
//go:noescape
func SumRows8(x *float32, D, n int, sum *[8]float32)

// SqDevRows8 sets q[l], for the 8 rows l of D floats at x, to the chain
// q = FMA32(x-m, x-m, q) over x = x[l*D+k], k < n in order, m = mean[l],
// from q = 0 (n a multiple of 8, n <= D).
//
//go:noescape
func SqDevRows8(x *float32, D, n int, mean, q *[8]float32)

// NormAffine sets y[j] = float32(float32((x[j]-m)*iv)*sc[j]) + bs[j] for
// j < n (n a multiple of 8); with bs nil, without the addition. NaN
// results are written as the canonical quiet NaN 0x7fc00000.
//
//go:noescape
func NormAffine(y, x *float32, n int, m, iv float32, sc, bs *float32)

// AddVV sets dst[i] = x[i] + y[i] for i < n (n a multiple of 8); dst may
// be x or y.
//
//go:noescape
func AddVV(dst, x, y *float32, n int)

// Enabled512 reports whether this CPU (and OS) also supports AVX-512F,
// for the 16-lane routines (GeluErf16).
var Enabled512 = Enabled && cpu.X86.HasAVX512F

// GeluErf16 computes vmath.GeluErf32 of each element, 16 lanes at a time
// with AVX-512F (n a multiple of 16): GeluErf's instructions on ZMM
// registers, the same bits.
//
//go:noescape
func GeluErf16(dst, src *float32, n int, tab *[NumConsts][8]float32)

// SubBy sets dst[i] = src[i] - s for n floats (n a multiple of 8).
//
//go:noescape
func SubBy(dst, src *float32, n int, s float32)
