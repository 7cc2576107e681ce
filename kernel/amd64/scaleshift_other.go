//go:build !amd64

package amd64

// ScaleShiftZ needs amd64 (EnabledZ is false elsewhere).
func ScaleShiftZ(x, y *float32, n int, a, b float32, relu int) {
	panic("amd64: ScaleShiftZ called without AVX-512")
}

// ScaleShift needs amd64 (Enabled is false elsewhere).
func ScaleShift(x, y *float32, n int, a, b float32, relu int) {
	panic("amd64: ScaleShift called without AVX2")
}
