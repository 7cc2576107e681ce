// fast_gelu.cu: fast.cu's tiles with GELU as their epilogue's last step
// (issue 19), joined after the exact kernels (vx_gelu_erf), fast.cu
// (vf_tile) and fast_attn.cu into a fast plan's image.
//
// The fast MatMul with GELU in its epilogue (an FFN's first product):
// fast.cu's tile (modes 1 and 2, the Gemm operand modes) whose last
// epilogue step is vx_gelu_erf, the function, roundings and order of the
// exact pass vx_unary(GELU_ERF) that it replaces: acc (NaN canonical),
// + bias, + residual, act, then y = vx_gelu_erf(v). Its chains are
// fast.cu's, so its bits are the product's, then the pass's.
struct va_gelu {
	__device__ static __forceinline__ float f(float v) { return vx_gelu_erf(v); }
};

#define VA_GELU_ENTRY(NAME, BM, BN, MODE, BF) \
	extern "C" __global__ void __launch_bounds__(256) NAME(const vf_geom g, const float* __restrict__ x, \
		const unsigned short* __restrict__ w, const int4* __restrict__ taps, const float* __restrict__ bias, \
		const float* __restrict__ res, int act, float lo, float hi, float* __restrict__ y) { \
		vf_tile<BM, BN, MODE, BF, va_gelu>(g, x, w, taps, bias, res, act, lo, hi, y); \
	}

#define VA_GELU_TILES(P, MODE, BF) \
	VA_GELU_ENTRY(vf_##P##_m##MODE##_128x128_gelu, 128, 128, MODE, BF) \
	VA_GELU_ENTRY(vf_##P##_m##MODE##_128x64_gelu, 128, 64, MODE, BF) \
	VA_GELU_ENTRY(vf_##P##_m##MODE##_64x64_gelu, 64, 64, MODE, BF) \
	VA_GELU_ENTRY(vf_##P##_m##MODE##_64x32_gelu, 64, 32, MODE, BF)

VA_GELU_TILES(f16, 1, false)
VA_GELU_TILES(f16, 2, false)
VA_GELU_TILES(bf16, 1, true)
VA_GELU_TILES(bf16, 2, true)
