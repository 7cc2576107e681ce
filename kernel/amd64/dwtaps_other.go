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
