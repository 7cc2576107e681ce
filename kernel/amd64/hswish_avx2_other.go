//go:build !amd64

package amd64

// HardSigmoidY needs amd64 (Enabled is false elsewhere).
func HardSigmoidY(x, y *float32, n int, a, b float32) int {
	panic("amd64: HardSigmoidY called without AVX2")
}

// HardSwishY needs amd64 (Enabled is false elsewhere).
func HardSwishY(x, y *float32, n int, a, b float32) int {
	panic("amd64: HardSwishY called without AVX2")
}

// ScaleY needs amd64 (Enabled is false elsewhere).
func ScaleY(x, y *float32, n int, s float32) { panic("amd64: ScaleY called without AVX2") }

// MulY needs amd64 (Enabled is false elsewhere).
func MulY(d, a, b *float32, n int) { panic("amd64: MulY called without AVX2") }
