package emu

import (
	"fmt"
	"strings"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/plan"
)

// INT8 fast layers (fast_int8.cu): their products are exact int32 sums
// and their epilogue float32 operations in a stated order, so the
// kernels' Go twin, fast.Int8Conv, is their emulation: the same integers
// and the same float32 roundings on any CPU (TestInt8GPUTwin checks it on
// the GPU, TestInt8KernelsEmulated under an emulation of mma.sync). The
// weights are quantized per output channel as cuda/engine quantizes them
// at Open (a Conv's [M][C*KH*KW], a Gemm's B as its N features of K), the
// input with the activation scale the kernel name carries.

// int8Scale reads the activation scale of an INT8 fast kernel's name:
// fast.int8.conv(TILE x=BITS) or fast.int8.gemm(TILE x=BITS), BITS the
// float32's 8 hex digits (cuda/engine's int8Tile).
func int8Scale(kernel string) (float32, error) {
	_, op, _ := plan.ParseFastKernel(kernel)
	for _, pre := range []string{"conv(", "gemm("} {
		if s, ok := strings.CutPrefix(op, pre); ok {
			if s, ok := strings.CutSuffix(s, ")"); ok {
				_, sx, err := fast.ParseInt8Tile(s)
				return sx, err
			}
		}
	}
	return 0, fmt.Errorf("int8 fast kernel %q: want fast.int8.conv(TILE x=SCALEBITS) or fast.int8.gemm(...)", kernel)
}

// int8Product is the INT8 kernels' arithmetic with activation scale sx.
func int8Product(sx float32) product {
	return func(g mma.ConvGeom, x, w []float32, e mma.Epilogue, y []float32) error {
		oh, ow := g.Out()
		eg := exact.ConvGeom{N: g.N, C: g.C, H: g.H, W: g.W, M: g.M, OH: oh, OW: ow, G: 1, KH: g.KH, KW: g.KW,
			SH: g.SH, SW: g.SW, PH: g.PH, PW: g.PW, DH: g.DH, DW: g.DW}
		K := g.C * g.KH * g.KW
		q, err := fast.QuantizeWeights(w, g.M, K, K, 1)
		if err != nil {
			return err
		}
		act := exact.Act{Relu: e.Relu, HasLo: e.HasLo, HasHi: e.HasHi, Lo: e.Lo, Hi: e.Hi}
		out, err := fast.Int8Conv(eg, x, q, sx, e.Bias, e.Res, act)
		if err != nil {
			return err
		}
		copy(y, out)
		return nil
	}
}
