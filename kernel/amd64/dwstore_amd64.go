package amd64

// DwStoreZ (AVX-512F, where EnabledZ) sets dst[i*ldd+j], i < rows, j <
// cols, to v = src[i*lds+j] + bias (src the sum's first operand), then v =
// lo > v ? lo : v and v = hi < v ? hi : v (Epi's bounds: -Inf and +Inf
// leave v as it is): a depthwise kernel's flat rows of chains (package
// nn's dwAny computes lds >= cols of them a row) stored into the output
// plane with the bias and the clamp, in one pass.
//
//go:noescape
func DwStoreZ(src *float32, lds int, dst *float32, ldd int, rows, cols int, bias, lo, hi float32)

// Deint2Z (AVX-512F, where EnabledZ) splits rows rows of floats into
// their even and odd elements: for row r (src r·lds floats on, ev and od
// r·ldd on), ev[i] = src[2i] for i < nev and od[i] = src[2i+1] for i < nod
// (each may be 0), reading src[0 .. n-1] of the row only: input rows split
// into the two column phases of a stride-2 convolution, the rows of one
// row phase in one call. idx must hold Deint2Idx.
//
//go:noescape
func Deint2Z(src *float32, n, rows, lds int, ev *float32, nev int, od *float32, nod, ldd int, idx *[32]int32)

// CopyRowsZ (AVX-512F, where EnabledZ) copies rows rows of n floats:
// dst[r·ldd+i] = src[r·lds+i] (an input plane's rows into a zero-padded
// phase plane, in one call).
//
//go:noescape
func CopyRowsZ(src *float32, n, rows, lds int, dst *float32, ldd int)
