//go:build !amd64

package amd64

// HardSigmoidZ needs amd64 (EnabledZ is false elsewhere).
func HardSigmoidZ(x, y *float32, n int, a, b float32) int {
	panic("amd64: HardSigmoidZ called without AVX-512")
}
