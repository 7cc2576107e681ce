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

// SiLUY needs amd64 (Enabled is false elsewhere).
func SiLUY(x, y *float32, n int, sigFirst bool) { panic("amd64: SiLUY called without AVX2") }
