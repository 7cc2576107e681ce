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
//go:noescape
func Conv6x16(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *float32, ldo int)

// EnabledZ reports whether the AVX-512 direct convolution kernels
// (ConvZ) can run here: AVX-512 F on top of Enabled.
var EnabledZ = Enabled && cpu.X86.HasAVX512F
