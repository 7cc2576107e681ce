package amd64

// ScaleShiftZ (AVX-512F, where EnabledZ) sets y[i] = float32(x[i]*a) + b
// for i < n (n a multiple of 16), then, when relu is not 0, y[i] = 0
// where y[i] < 0 (Relu's comparison: NaN and -0 pass through): package
// nn's ScaleShift layer, one channel plane at a time.
//
//go:noescape
func ScaleShiftZ(x, y *float32, n int, a, b float32, relu int)

// ScaleShift (AVX2, where Enabled) is ScaleShiftZ for n a multiple of 8,
// with the same bits: VMULPS then VADDPS (no FMA), and the Relu as VMAXPS
// with +0 first, 0 > y ? 0 : y.
//
//go:noescape
func ScaleShift(x, y *float32, n int, a, b float32, relu int)
