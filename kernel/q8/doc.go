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
// epilogue and its Go twin. On CPUs with AVX-512 (VNNI, BW) most
// convolutions instead run as a direct convolution (direct.go): 16 output
// channels in the int32 lanes of a zmm accumulator per output pixel, the
// pixels' channel pairs broadcast from a pair-interleaved, zero-padded
// copy of the quantized input, and an in-register transpose back to
// channel rows before the same epilogue; its sums are the same exact
// integers, so its output bits are those of the GEMM path and of the
// portable twins. Where the CPU has AVX512_VNNI the layers run u8 × s8
// VPDPBUSD tiles instead (four byte products per int32 lane): the
// activations shifted to q + 128 as the unsigned operand, every
// accumulator starting from its channel's correction −128·Σ w, so that the
// non-saturating wrap-around ends at the same exact sum — linear layers and
// squeeze-excitation's 1×1 maps as rows × 64 columns (vnni.go), most
// convolutions as the direct tiles on channel quads (vnni_direct.go), the
// remaining 1×1 convolutions as channels × 64-position panels; the
// portable and AVX2 paths, without VNNI, compute the same integers. The
// epilogue may end with a SiLU or HardSwish activation, applied to each
// run of outputs in cache with the bits of the unfused Sigmoid/HardSigmoid
// and Mul nodes (act.go). fp16 weights are converted to float32 with F16C
// or the identical portable conversion, and computed in float32 by the nn
// kernels. The kernel.Ctx level chooses the twins (ISAPortable: the portable
// ones, as on a machine without AVX2; ISAAVX2: no VNNI or direct kernels).
package q8

//go:generate python3 gen_asm.py
//go:generate python3 gen_direct_q8.py
//go:generate python3 gen_vnni.py
//go:generate python3 gen_vnni7.py
