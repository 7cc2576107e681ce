package amd64

// SiLUZ (AVX-512F, where EnabledZ) sets y[i] = x[i]·Sigmoid32(x[i]) (with
// sigFirst, Sigmoid32(x[i])·x[i]: which NaN a NaN input gives) for i < n,
// any n (the last partial vector masked): vmath's Sigmoid32 (1/(1 +
// Exp32(-x))) and the Mul's float32 product, step by step, 16 lanes at a
// time, so the bits of the Sigmoid and Mul nodes. x and y may be the
// same array.
//
//go:noescape
func SiLUZ(x, y *float32, n int, tab *[SiLUConsts]float32, sigFirst bool)

// HardSwishZ (AVX-512F, where EnabledZ) sets y[i] = x[i]·h, h =
// max(0, min(1, float32(a*x[i])+b)) (HardSigmoidZ's h; Go's min and max,
// max(0, -0) is +0), for i < n, any n (the last partial vector masked): the
// HardSigmoid and Mul nodes of MobileNetV3's HardSwish, 16 lanes at a
// time. It stops before the first group of 16 in which float32(a*x[i])+b
// is a NaN, writing nothing of it, and returns how many values it did (n
// when there was none): the caller runs that group through Go's min and
// max and the product in the model's order. Without a NaN, which operand
// of the product comes first changes nothing. x and y may be the same
// array.
//
//go:noescape
func HardSwishZ(x, y *float32, n int, a, b float32) int

// ScaleZ (AVX-512F, where EnabledZ) sets y[i] = x[i]·s for i < n, any n
// (the last partial vector masked), x[i] the product's first operand
// (Intel's src1: its NaN is the one a product of two NaNs returns, as in
// package elementwise's compiled Mul loops for a broadcast operand, in
// either operand order): one channel plane of a Mul by a per-channel
// operand (a squeeze-excitation block's scale). x and y may be the same
// array.
//
//go:noescape
func ScaleZ(x, y *float32, n int, s float32)
