//go:build !amd64

package amd64

// DwTapsZ needs amd64 (EnabledZ is false elsewhere).
func DwTapsZ(n, taps int, offs *int32, w *float32, x *float32, y *float32) {
	panic("amd64: DwTapsZ called without AVX-512")
}

// DwTapsA needs amd64 (Enabled is false elsewhere).
func DwTapsA(n, taps int, offs *int32, w *float32, x *float32, y *float32) {
	panic("amd64: DwTapsA called without AVX2")
}

// DwStoreA needs amd64 (Enabled is false elsewhere).
func DwStoreA(src *float32, lds int, dst *float32, ldd int, rows, cols int, bias, lo, hi float32) {
	panic("amd64: DwStoreA called without AVX2")
}

// Deint2A needs amd64 (Enabled is false elsewhere).
func Deint2A(src *float32, n, rows, lds int, ev *float32, nev int, od *float32, nod, ldd int) {
	panic("amd64: Deint2A called without AVX2")
}

// DwTapsMA needs amd64 (Enabled is false elsewhere).
func DwTapsMA(n, taps int, offs *int32, w *float32, ldw int, x *float32, y *float32, ldy int) {
	panic("amd64: DwTapsMA called without AVX2")
}

// CopyRowsA needs amd64 (Enabled is false elsewhere).
func CopyRowsA(src *float32, n, rows, lds int, dst *float32, ldd int) {
	panic("amd64: CopyRowsA called without AVX2")
}
