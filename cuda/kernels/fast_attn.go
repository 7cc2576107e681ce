package kernels

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
)

// fast_attn.cu holds fast mode's fused attention (issue 19). It uses the
// exact kernels' vx_exp and vx_canon and fast.cu's fragment helpers, so it
// is compiled only joined after them: the image of a fast plan
// (FastAttnImageSource).
//
//go:embed fast_attn.cu
var fastAttnCU string

// FastAttnName is fast_attn.cu's name in compiler messages.
const FastAttnName = "fast_attn.cu"

// FastAttnSource returns fast_attn.cu.
func FastAttnSource() string { return fastAttnCU }

// FastAttnDigest is the SHA-256 of FastAttnSource, hex.
func FastAttnDigest() string {
	h := sha256.Sum256([]byte(fastAttnCU))
	return hex.EncodeToString(h[:])
}

// fast_gelu.cu holds fast.cu's tiles with GELU last in the epilogue; it
// uses exact.cu's vx_gelu_erf and fast.cu's vf_tile, so it too is compiled
// only in a fast plan's image, after fast_attn.cu.
//
//go:embed fast_gelu.cu
var fastGeluCU string

// FastGeluName is fast_gelu.cu's name in compiler messages.
const FastGeluName = "fast_gelu.cu"

// FastAttnImageName names the joined source of a fast plan's image with
// the attention kernels (and the GELU tiles).
const FastAttnImageName = FastImageName + "+" + FastAttnName + "+" + FastGeluName

// FastAttnImageSource is a fast plan's image source: FastImageSource, then
// fast_attn.cu and fast_gelu.cu, one translation unit with Options.
func FastAttnImageSource() string { return FastImageSource() + fastAttnCU + fastGeluCU }

// FastLayerNorm is fast_attn.cu's LayerNormalization: vx_layernorm's
// operations in vx_layernorm's order (the exact bits), one warp per row of
// at most FastLayerNormMaxD values staged in shared memory,
// FastLayerNormRows rows a block.
const (
	FastLayerNorm     = "va_layernorm"
	FastLayerNormMaxD = 1024
	FastLayerNormRows = 4
)

// FastAttnBQ is the query rows of one attention block (fast_attn.cu's
// VA_BQ), FastAttnThreads its threads.
const (
	FastAttnBQ      = 32
	FastAttnThreads = 128
)

// FastAttnShapes are the (head size D, longest sequence SMAX) pairs
// fast_attn.cu has kernels for; a sequence S <= SMAX (a multiple of 16)
// runs on the smallest SMAX that holds it.
var FastAttnShapes = [][2]int{{64, 64}, {64, 128}, {32, 64}, {32, 128}}

// FastAttnKernel names fast_attn.cu's entry point for a precision (FastF16,
// FastBF16), head size and SMAX.
func FastAttnKernel(prec string, d, smax int) string {
	return fmt.Sprintf("va_%s_d%d_s%d", prec, d, smax)
}

// FastAttnKernels lists every entry point of fast_attn.cu: FastLayerNorm,
// then the attention kernels.
var FastAttnKernels = fastAttnKernels()

func fastAttnKernels() []string {
	a := []string{FastLayerNorm}
	for _, p := range []string{FastF16, FastBF16} {
		for _, s := range FastAttnShapes {
			a = append(a, FastAttnKernel(p, s[0], s[1]))
		}
	}
	return a
}

// FastGeluModes are the operand modes of fast_gelu.cu's GELU-epilogue
// tiles (a Gemm's: rows, or 1x1 when K is not a multiple of 4).
var FastGeluModes = []int{Fast1x1, FastRows}

// FastGeluKernel names fast_gelu.cu's fast.cu tile whose epilogue ends in
// vx_gelu_erf: FastKernel's name, then "_gelu".
func FastGeluKernel(prec string, mode, bm, bn int) string {
	return FastKernel(prec, mode, bm, bn) + "_gelu"
}

// FastGeluKernels lists those entry points: each precision, FastGeluModes,
// FastTiles.
var FastGeluKernels = fastGeluKernels()

func fastGeluKernels() []string {
	var a []string
	for _, p := range []string{FastF16, FastBF16} {
		for _, m := range FastGeluModes {
			for _, t := range FastTiles {
				a = append(a, FastGeluKernel(p, m, t[0], t[1]))
			}
		}
	}
	return a
}
