//go:build !amd64

package amd64

// DwTapsZ needs amd64 (EnabledZ is false elsewhere).
func DwTapsZ(n, taps int, offs *int32, w *float32, x *float32, y *float32) {
	panic("amd64: DwTapsZ called without AVX-512")
}
