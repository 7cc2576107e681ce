package kernels

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
)

// fast_int8.cu holds fast mode's INT8 tensor-core kernels (issue 19). It
// is its own translation unit for its golden PTX (testdata/fast_int8.ptx)
// and is joined after fast.cu into a fast plan's image (FastImageSource).
//
//go:embed fast_int8.cu
var fastInt8CU string

// FastInt8Name is fast_int8.cu's name in compiler messages and golden
// headers.
const FastInt8Name = "fast_int8.cu"

// FastInt8Source returns fast_int8.cu.
func FastInt8Source() string { return fastInt8CU }

// FastInt8Digest is the SHA-256 of FastInt8Source, hex.
func FastInt8Digest() string {
	h := sha256.Sum256([]byte(fastInt8CU))
	return hex.EncodeToString(h[:])
}

// FastInt8Quant is fast_int8.cu's quantization pass (NCHW float32 to
// channels-last int8).
const FastInt8Quant = "v8_quant"

// FastInt8Kernel names fast_int8.cu's GEMM entry point for a tile (the
// tiles are FastTiles).
func FastInt8Kernel(bm, bn int) string {
	return fmt.Sprintf("v8_%dx%d", bm, bn)
}

// FastInt8NarrowKernel names the GEMM entry point for a tile of a layer
// of at most 4 input channels (fast_int8.cu's V8_NARROW: one 32-bit word
// a pixel).
func FastInt8NarrowKernel(bm, bn int) string {
	return fmt.Sprintf("v8_n_%dx%d", bm, bn)
}

// FastInt8Kernels lists every entry point of fast_int8.cu.
var FastInt8Kernels = fastInt8Kernels()

func fastInt8Kernels() []string {
	a := []string{FastInt8Quant}
	for _, t := range FastTiles {
		a = append(a, FastInt8Kernel(t[0], t[1]))
	}
	for _, t := range FastTiles {
		a = append(a, FastInt8NarrowKernel(t[0], t[1]))
	}
	return a
}
