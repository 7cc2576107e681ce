package amd64

import "golang.org/x/sys/cpu"

// Conv6x16 computes a tile of a direct convolution: 6 output pixels by 16
// output channels, each output the chain acc = FMA(x, w, acc) over the k
// steps in order from +0. Step kk reads pixel i's tap at
// px[i][offs[kk]] (the pixel's base in the input planes plus the tap's
// offset: channel, row and column of the kernel window) and the 16
// channels' weights at w[kk*16:] (packed panels). Pixel i's 16 outputs are
// stored at out[i*ldo:], canon(acc) (a NaN lane as the canonical quiet NaN
// 0x7fc00000) plus bias[0:16] when bias is not nil (acc the first
// operand): the GEMM microkernels' store with a per-column bias.
//
// flags splits a chain into k blocks: with DirLoad the chains continue
// from the partial sums at out (as a block without DirFinal stored them)
// instead of +0; without DirFinal the partial sums are stored as they
// are (no canon, no bias). A chain run in blocks, the first without
// DirLoad and the last with DirFinal, has the bits of the chain run at
// once: a float parked in memory is the float in the register.
//
//go:noescape
func Conv6x16(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *float32, ldo int, flags int)

// Conv6x16's flags.
const (
	DirLoad  = 1 // continue from the partial sums at out
	DirFinal = 2 // the last k block: canon and bias
)

// EnabledZ reports whether the AVX-512 direct convolution kernels
// (ConvZ) can run here: AVX-512 F on top of Enabled.
var EnabledZ = Enabled && cpu.X86.HasAVX512F

// TransposeZ16 writes the transpose of an n x rows block (n, rows <= 16):
// for r < rows and t < n, dst[r*ldd+t] = src[t*lds+r], by an in-register
// 16x16 transpose (AVX-512) and masked stores. It reads 16 rows of 16
// floats from src, lds apart (rows n..15 are read and ignored), and moves
// floats only.
//
//go:noescape
func TransposeZ16(src *float32, lds, n int, dst *float32, ldd, rows int)

// TransposeZ16E is TransposeZ16 with a residual layer's epilogue in the
// store: each stored value v becomes v + r[...] (v the first operand; r
// laid out as dst, ldd apart; none when r is nil), then, when clamp is not
// nil, lo > v ? lo : v and hi < v ? hi : v (amd64.Epi's operations in its
// order). Only the n valid lanes of r are read.
//
//go:noescape
func TransposeZ16E(src *float32, lds, n int, dst *float32, ldd, rows int, r *float32, clamp *[2]float32)
