package amd64

// DwTapsA (AVX2+FMA, where Enabled) is DwTapsZ for CPUs without AVX-512:
// y[i], i < n (n a multiple of 16), is the chain acc = FMA(x[offs[t]+i],
// w[t], acc) over t < taps (at least one) ascending from +0, a NaN stored
// as 0x7fc00000; the same operations in the same order, so DwTapsZ's bits.
//
//go:noescape
func DwTapsA(n, taps int, offs *int32, w *float32, x *float32, y *float32)
