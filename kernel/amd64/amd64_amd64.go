package amd64

import "golang.org/x/sys/cpu"

// Enabled reports whether this CPU (and OS) supports the AVX2 and FMA
// instructions the kernels use.
var Enabled = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX

// Sgemm6x16 computes one 6x16 tile of C from a packed A panel (k steps of
// 6 floats, a[kk*6+i]) and a packed B panel (k steps of 16 floats,
// b[kk*16+j]): for each of the 96 outputs acc = FMA(a, b, acc) for kk
// ascending, starting from +0 when load is 0 and from the float32 already
// in C when load is 1 (a chain parked in memory between k blocks). The
// tile is stored to c with a row stride of ldc floats; a NaN lane is
// stored as the canonical quiet NaN 0x7fc00000.
//
//go:noescape
func Sgemm6x16(k int, a, b, c *float32, ldc int, load int)

// Dw3x3S1 computes n outputs (n a multiple of 8) of a 3x3 stride-1
// depthwise convolution row: y[j] is the chain over the 9 taps in row-major
// order, acc = FMA(x_r[j+t], w[3r+t], acc) from +0, where x0, x1, x2 point at
// the three input rows at the first output's leftmost tap.
//
//go:noescape
func Dw3x3S1(x0, x1, x2, w, y *float32, n int)

// FMALoop runs n iterations of 12 independent VFMADD231PS on ymm
// registers (192 flops each): a measure of the core's FMA peak.
//
//go:noescape
func FMALoop(n int)
