//go:build !amd64

package amd64

// Enabled is false off amd64: callers use the portable kernels.
const Enabled = false

func Sgemm6x16(k int, a, b, c *float32, ldc int, load int) { panic("amd64: not available") }

func Dw3x3S1(x0, x1, x2, w, y *float32, n int) { panic("amd64: not available") }

func FMALoop(n int) { panic("amd64: not available") }
