//go:build !amd64

package amd64

// DwStoreZ needs amd64 (EnabledZ is false elsewhere).
func DwStoreZ(src *float32, lds int, dst *float32, ldd int, rows, cols int, bias, lo, hi float32) {
	panic("amd64: DwStoreZ called without AVX-512")
}

// Deint2Z needs amd64 (EnabledZ is false elsewhere).
func Deint2Z(src *float32, n, rows, lds int, ev *float32, nev int, od *float32, nod, ldd int, idx *[32]int32) {
	panic("amd64: Deint2Z called without AVX-512")
}

// CopyRowsZ needs amd64 (EnabledZ is false elsewhere).
func CopyRowsZ(src *float32, n, rows, lds int, dst *float32, ldd int) {
	panic("amd64: CopyRowsZ called without AVX-512")
}
