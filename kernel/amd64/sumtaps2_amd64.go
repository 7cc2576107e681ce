package amd64

// SumTapsS2 (AVX2, where Enabled) sets y[i], i < n (n a multiple of 8),
// to the sum acc = acc + x[2i+offs[t]] over t < taps (at least one)
// ascending from +0, each addition VADDPS with acc its first source (a
// NaN acc keeps its payload, quieted, as vmath.Add32(acc, x) does); x is
// read up to one float past the last tap, x[2(n-1)+offs[t]+1]. Package
// nn's AveragePool of strides 2 sums its windows so, over flat zero-padded
// planes, one offset per tap (SumTapsZ's layout at stride 2).
//
//go:noescape
func SumTapsS2(n, taps int, offs *int32, x *float32, y *float32)

// SumTaps8 (AVX2, where Enabled) is SumTapsZ in 8 lanes, n a multiple of
// 8: y[i] = acc + x[i+offs[t]] over t < taps from +0, VADDPS with acc its
// first source (vmath.Add32's rule), with SumTapsZ's bits.
//
//go:noescape
func SumTaps8(n, taps int, offs *int32, x *float32, y *float32)

// SumTapsS2R (AVX2, where Enabled) is SumTapsS2 over rows rows of n >= 8
// outputs (any n), y[r*ys+i] = the sum over t of x[r*xs+2i+offs[t]], a
// row's last vector overlapping the one before where n is not a multiple
// of 8 (the same sums written twice): AveragePool rows at stride 2 without
// the sums between rows that SumTapsS2's flat run computes.
//
//go:noescape
func SumTapsS2R(rows, n, taps int, offs *int32, x *float32, xs int, y *float32, ys int)
