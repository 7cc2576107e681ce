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

// FastAttnImageName names the joined source of a fast plan's image with
// the attention kernels.
const FastAttnImageName = FastImageName + "+" + FastAttnName

// FastAttnImageSource is a fast plan's image source: FastImageSource, then
// fast_attn.cu, one translation unit with Options.
func FastAttnImageSource() string { return FastImageSource() + fastAttnCU }

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
