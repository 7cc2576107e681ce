//go:build !amd64

package amd64

// ScaleShiftZ needs amd64 (EnabledZ is false elsewhere).
func ScaleShiftZ(x, y *float32, n int, a, b float32, relu int) {
	panic("amd64: ScaleShiftZ called without AVX-512")
}
