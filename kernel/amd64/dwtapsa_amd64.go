package amd64

// DwTapsA (AVX2+FMA, where Enabled) is DwTapsZ for CPUs without AVX-512:
// y[i], i < n (n a multiple of 16), is the chain acc = FMA(x[offs[t]+i],
// w[t], acc) over t < taps (at least one) ascending from +0, a NaN stored
// as 0x7fc00000; the same operations in the same order, so DwTapsZ's bits.
//
//go:noescape
func DwTapsA(n, taps int, offs *int32, w *float32, x *float32, y *float32)

// DwStoreA (AVX2, where Enabled) is DwStoreZ for CPUs without AVX-512:
// dst[i*ldd+j], i < rows, j < cols, is v = src[i*lds+j] + bias (src the
// sum's first operand), then v = lo > v ? lo : v and v = hi < v ? hi : v;
// the same instructions (the columns after the last whole vector as one
// more vector: nothing past cols is read; where ldd = cols a row's
// vector may write the next rows' first lanes before their own stores
// do, and nothing outside the rows x ldd floats is written), so
// DwStoreZ's bits.
//
//go:noescape
func DwStoreA(src *float32, lds int, dst *float32, ldd int, rows, cols int, bias, lo, hi float32)

// Deint2A (AVX2, where Enabled) is Deint2Z for CPUs without AVX-512:
// for row r (src r·lds floats on, ev and od r·ldd on), r < rows, ev[i] =
// src[2i] for i < nev and od[i] = src[2i+1] for i < nod (each may be 0,
// nev <= (n+1)/2, nod <= n/2), reading src[0 .. n-1] of the row only: the
// two column phases of a stride-2 convolution's input rows, the rows of
// one row phase in one call. The floats are moved, not computed: their
// bits, NaN payloads included, are the source's. Besides, in rows but the
// last (where lds >= 16 and ldd >= 8), up to 7 floats after a row's nev
// (nod) outputs may be set to +0: in dwAny's phase planes those are
// padding, +0 already, or the next rows' outputs, stored after.
//
//go:noescape
func Deint2A(src *float32, n, rows, lds int, ev *float32, nev int, od *float32, nod, ldd int)

// DwTapsMA (AVX2+FMA, where Enabled) is DwTapsA for four output channels
// over the same taps (a grouped convolution's channels of one group):
// y[j·ldy+i], j < 4, i < n (n a multiple of 16), is the chain acc =
// FMA(x[offs[t]+i], w[j·ldw+t], acc) over t < taps (at least one)
// ascending from +0, a NaN stored as 0x7fc00000: DwTapsA's operations in
// its order for each channel, so its bits (and DwTapsZ's), with each tap's
// input loaded once for the four.
//
//go:noescape
func DwTapsMA(n, taps int, offs *int32, w *float32, ldw int, x *float32, y *float32, ldy int)

// CopyRowsA (AVX2, where Enabled) is CopyRowsZ for CPUs without AVX-512:
// dst[r·ldd+i] = src[r·lds+i] for r < rows, i < n (an input plane's rows
// into a zero-padded phase plane, in one call), reading nothing else;
// besides, up to 7 floats after a row but the last (the gap to the next
// row, or the next rows' first floats, which are copied after) may be set
// to +0: in dwAny's phase planes those are padding, +0 already. Nothing
// after the last row's n floats is written.
//
//go:noescape
func CopyRowsA(src *float32, n, rows, lds int, dst *float32, ldd int)
