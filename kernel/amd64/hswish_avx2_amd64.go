package amd64

// The AVX2 twins of HardSigmoidZ, HardSwishZ and ScaleZ (where Enabled),
// for hosts without AVX-512: the same operations, 8 lanes at a time, so
// the same bits as the portable loops and the AVX-512 kernels. Each takes
// any n (the last partial vector masked).

// HardSigmoidY sets y[i] = max(0, min(1, float32(a*x[i])+b)), Go's min and
// max (max(0, -0) is +0), for i < n. It stops before the first group of 8
// in which float32(a*x[i])+b is a NaN, writing nothing of it, and returns
// how many values it did (n when there was none): the caller runs that
// group (up to 8 values) through Go's min and max.
//
//go:noescape
func HardSigmoidY(x, y *float32, n int, a, b float32) int

// HardSwishY sets y[i] = x[i]·h, h = max(0, min(1, float32(a*x[i])+b))
// (HardSigmoidY's h), for i < n, stopping before the first group of 8 in
// which float32(a*x[i])+b is a NaN as HardSigmoidY does, and returns how
// many values it did. Without a NaN, which operand of the product comes
// first changes nothing. x and y may be the same array.
//
//go:noescape
func HardSwishY(x, y *float32, n int, a, b float32) int

// ScaleY sets y[i] = x[i]·s for i < n, x[i] the product's first operand
// (the NaN a product of two NaNs returns), as ScaleZ. x and y may be the
// same array.
//
//go:noescape
func ScaleY(x, y *float32, n int, s float32)
