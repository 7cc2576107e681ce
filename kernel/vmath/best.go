package vmath

// The slice functions at the CPU's best level, for code that has no
// kernel.Ctx to take a Vec from. A kernel uses its Ctx's Vec instead
// (kernel.Ctx.Vec), so that the caller, not the CPU alone, chooses the
// twin; both give the same bits.

// Exp32s is Vector(true).Exp32s.
func Exp32s(dst, src []float32) { Vector(true).Exp32s(dst, src) }

// Sigmoid32s is Vector(true).Sigmoid32s.
func Sigmoid32s(dst, src []float32) { Vector(true).Sigmoid32s(dst, src) }

// Tanh32s is Vector(true).Tanh32s.
func Tanh32s(dst, src []float32) { Vector(true).Tanh32s(dst, src) }

// Erf32s is Vector(true).Erf32s.
func Erf32s(dst, src []float32) { Vector(true).Erf32s(dst, src) }

// GeluErf32s is Vector(true).GeluErf32s.
func GeluErf32s(dst, src []float32) { Vector(true).GeluErf32s(dst, src) }

// GeluTanh32s is Vector(true).GeluTanh32s.
func GeluTanh32s(dst, src []float32) { Vector(true).GeluTanh32s(dst, src) }
