// Package q8 implements vouch's reduced-precision layers (domain "vouch"):
// int8 Conv/Gemm/MatMul layers with symmetric per-output-channel int8
// weights and per-tensor int8 activations, and fp16-weight layers.
//
// Integer arithmetic is exact: the AVX2 kernels (VPMADDWD over 16-bit
// widened values, VPADDD), the AVX512_VNNI tile used where the CPU has it
// (VPDPWSSD on the same int16 pairs, one instruction for both steps) and
// their portable twins produce the same int32 sums whatever the blocking
// or the unfolding (im2col, or for stride-1 convolutions B panels packed
// straight from a zero-padded copy of the input), K is capped so sums
// cannot overflow, and the
// conversion back to float32 (dequantize, bias, residual, activation) is a
// fixed sequence of float32 operations performed identically by the AVX2
// epilogue and its Go twin. fp16 weights are converted to float32 with F16C
// or the identical portable conversion, and computed in float32 by the nn
// kernels. UsePortable forces the twins (tests, and machines without AVX2).
package q8
