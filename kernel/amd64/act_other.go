//go:build !amd64

package amd64

// SiLUZ needs amd64 (EnabledZ is false elsewhere).
func SiLUZ(x, y *float32, n int, tab *[SiLUConsts]float32, sigFirst bool) {
	panic("amd64: SiLUZ called without AVX-512")
}

// HardSwishZ needs amd64 (EnabledZ is false elsewhere).
func HardSwishZ(x, y *float32, n int, a, b float32) int {
	panic("amd64: HardSwishZ called without AVX-512")
}

// ScaleZ needs amd64 (EnabledZ is false elsewhere).
func ScaleZ(x, y *float32, n int, s float32) {
	panic("amd64: ScaleZ called without AVX-512")
}
