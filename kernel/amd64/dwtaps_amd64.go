package amd64

// DwTapsZ (AVX-512F, where EnabledZ) sets y[i], i < n (n a multiple of 16),
// to the chain acc = FMA(x[offs[t]+i], w[t], acc) over t < taps (at least
// one) ascending from +0, a NaN stored as 0x7fc00000: a depthwise
// convolution's outputs over a flat, zero-padded input plane, one offset
// per kernel tap (package nn's dwAny lays the planes out so that every tap
// of every output is such a load).
//
//go:noescape
func DwTapsZ(n, taps int, offs *int32, w *float32, x *float32, y *float32)
