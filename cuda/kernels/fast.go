package kernels

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
)

// fast.cu holds the fast-mode tensor-core kernels (issue 19). It is its own
// translation unit for its golden PTX (testdata/fast.ptx), so that the
// exact kernels' golden does not change with it, and it is joined after
// the exact sources into a fast plan's image (FastImageSource).
//
//go:embed fast.cu
var fastCU string

// FastName is fast.cu's name in compiler messages and golden headers.
const FastName = "fast.cu"

// FastSource returns fast.cu.
func FastSource() string { return fastCU }

// FastDigest is the SHA-256 of FastSource, hex.
func FastDigest() string {
	h := sha256.Sum256([]byte(fastCU))
	return hex.EncodeToString(h[:])
}

// FastImageName names the joined source of a fast plan's image.
const FastImageName = "exact.cu+fast.cu+fast_int8.cu"

// FastImageSource is what a fast plan's image is compiled from: the exact
// kernels (the layers that stay exact), then fast.cu and fast_int8.cu, one
// translation unit with Options.
func FastImageSource() string { return exactSource + fastCU + fastInt8CU }

// Fast precisions (the 16-bit operand formats of fast.cu's kernels).
const (
	FastF16  = "f16"
	FastBF16 = "bf16"
)

// Fast operand modes: how a kernel gathers its input (fast.cu's MODE).
const (
	FastGather = 0 // any 2-D convolution
	Fast1x1    = 1 // 1x1, no padding
	FastRows   = 2 // rows of k-contiguous floats (a Gemm's input, K a multiple of 4)
	FastWide   = 3 // 1x1, stride 1, no padding, H*W a multiple of 4: 16-byte loads of 4 columns
)

// FastModes are the operand modes, in fast.cu's order.
var FastModes = []int{FastGather, Fast1x1, FastRows, FastWide}

// FastModeTiles are the tiles fast.cu has for a mode (FastWide: those of
// 64 columns or more).
func FastModeTiles(mode int) [][2]int {
	if mode == FastWide {
		return FastTiles[:3]
	}
	return FastTiles
}

// FastTiles are fast.cu's tile shapes (output channels x columns), largest
// first.
var FastTiles = [][2]int{{128, 128}, {128, 64}, {64, 64}, {64, 32}}

// FastKernel names fast.cu's entry point for a precision, mode and tile.
func FastKernel(prec string, mode, bm, bn int) string {
	return fmt.Sprintf("vf_%s_m%d_%dx%d", prec, mode, bm, bn)
}

// FastKernels lists every entry point of fast.cu.
var FastKernels = fastKernels()

func fastKernels() []string {
	var a []string
	for _, p := range []string{FastF16, FastBF16} {
		for _, m := range FastModes {
			for _, t := range FastModeTiles(m) {
				a = append(a, FastKernel(p, m, t[0], t[1]))
			}
		}
	}
	return a
}
