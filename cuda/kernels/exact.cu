// exact.cu: vouch's exact-mode CUDA kernels. Every kernel performs the
// float32 operations of its CPU twin (kernel/nn, kernel/reduce,
// kernel/vmath) in the same order, so its bits equal the CPU's:
//
//   - a dot-product output is one __fmaf_rn chain over k ascending from +0
//     (Conv's k order: input channel, kernel row, kernel column; padding taps
//     are FMA(0, w, acc) as im2col's); tiles only choose which chains run
//     together, the K tail runs its exact count, never padded taps;
//   - exp/log/tanh/erf/sigmoid/GELU are vmath's polynomials, constant for
//     constant (the bit patterns below are vmath's float32 constants);
//   - reductions (softmax, layer norm, pooling) are the CPU's sequential
//     chains, one thread per chain;
//   - NaN results of dot products and layer norm are the canonical quiet
//     NaN 0x7fc00000, as on the CPU.
//
// It is compiled with --fmad=false --ftz=false --prec-div=true
// --prec-sqrt=true, so only the explicit __fmaf_rn calls fuse, subnormals
// are kept and division and square root are correctly rounded.

#define VX_log2e __int_as_float(0x3fb8aa3b) /* 1.442695 */
#define VX_ln2Hi __int_as_float(0x3f318000) /* 0.6933594 */
#define VX_ln2Lo __int_as_float(0xb95e8083) /* -0.00021219444 */
#define VX_expMax __int_as_float(0x42b17218) /* 88.72284 */
#define VX_expMin __int_as_float(0xc2aeac50) /* -87.33655 */
#define VX_expP0 __int_as_float(0x39506967) /* 0.00019875691 */
#define VX_expP1 __int_as_float(0x3ab743ce) /* 0.0013981999 */
#define VX_expP2 __int_as_float(0x3c088908) /* 0.008333452 */
#define VX_expP3 __int_as_float(0x3d2aa9c1) /* 0.041665796 */
#define VX_expP4 __int_as_float(0x3e2aaaaa) /* 0.16666666 */
#define VX_expP5 __int_as_float(0x3f000000) /* 0.5 */
#define VX_tanhSmall __int_as_float(0x3f200000) /* 0.625 */
#define VX_tanhBig __int_as_float(0x411028f6) /* 9.01 */
#define VX_tanhP0 __int_as_float(0xbbbaf0ea) /* -0.0057049887 */
#define VX_tanhP1 __int_as_float(0x3ca9134e) /* 0.020639088 */
#define VX_tanhP2 __int_as_float(0xbd5c1e2d) /* -0.053739715 */
#define VX_tanhP3 __int_as_float(0x3e088393) /* 0.13331442 */
#define VX_tanhP4 __int_as_float(0xbeaaaa99) /* -0.3333328 */
#define VX_erfS0 __int_as_float(0xba46980c) /* -0.00075757573 */
#define VX_erfS1 __int_as_float(0x3b97b426) /* 0.0046296297 */
#define VX_erfS2 __int_as_float(0xbcc30c31) /* -0.023809524 */
#define VX_erfS3 __int_as_float(0x3dcccccd) /* 0.1 */
#define VX_erfS4 __int_as_float(0xbeaaaaab) /* -0.33333334 */
#define VX_erfScale __int_as_float(0x3f906ebb) /* 1.1283792 */
#define VX_erfT __int_as_float(0x3ea7ba05) /* 0.3275911 */
#define VX_erfA0 __int_as_float(0x3f87dc22) /* 1.0614054 */
#define VX_erfA1 __int_as_float(0xbfba00e3) /* -1.4531521 */
#define VX_erfA2 __int_as_float(0x3fb5f0e3) /* 1.4214138 */
#define VX_erfA3 __int_as_float(0xbe91a98e) /* -0.28449672 */
#define VX_erfA4 __int_as_float(0x3e827906) /* 0.2548296 */
#define VX_geluRsqrt2 __int_as_float(0x3f3504f3) /* 0.70710677 */
#define VX_geluK __int_as_float(0x3d372713) /* 0.044715 */
#define VX_geluC __int_as_float(0x3f4c422a) /* 0.7978846 */
#define VX_logP0 __int_as_float(0x3d9021bb) /* 0.070376836 */
#define VX_logP1 __int_as_float(0xbdebd1b8) /* -0.1151461 */
#define VX_logP2 __int_as_float(0x3def251a) /* 0.116769984 */
#define VX_logP3 __int_as_float(0xbdfe5d4f) /* -0.12420141 */
#define VX_logP4 __int_as_float(0x3e11e9bf) /* 0.14249323 */
#define VX_logP5 __int_as_float(0xbe2aae50) /* -0.16668057 */
#define VX_logP6 __int_as_float(0x3e4cceac) /* 0.20000714 */
#define VX_logP7 __int_as_float(0xbe7ffffc) /* -0.24999994 */
#define VX_logP8 __int_as_float(0x3eaaaaaa) /* 0.3333333 */

#define VX_INF __int_as_float(0x7f800000)
#define VX_QNAN __int_as_float(0x7fc00000)

typedef long long i64;

__device__ __forceinline__ float vx_canon(float v) { return v != v ? VX_QNAN : v; }

// vx_pow2 is 2**n for n in [-126, 127].
__device__ __forceinline__ float vx_pow2(int n) { return __int_as_float((n + 127) << 23); }

// vx_ldexp is vmath.Ldexp32.
__device__ __forceinline__ float vx_ldexp(float y, int n) {
	if (n > 127) return __fmul_rn(__fmul_rn(y, vx_pow2(127)), vx_pow2(n - 127));
	if (n < -126) return __fmul_rn(__fmul_rn(y, vx_pow2(-126)), vx_pow2(n + 126));
	return __fmul_rn(y, vx_pow2(n));
}

// vx_exp is vmath.Exp32.
__device__ float vx_exp(float x) {
	if (x != x) return x;
	if (x > VX_expMax) return VX_INF;
	if (x < VX_expMin) return 0.0f;
	float n = rintf(__fmul_rn(x, VX_log2e));
	float r = __fmaf_rn(n, -VX_ln2Hi, x);
	r = __fmaf_rn(n, -VX_ln2Lo, r);
	float p = VX_expP0;
	p = __fmaf_rn(p, r, VX_expP1);
	p = __fmaf_rn(p, r, VX_expP2);
	p = __fmaf_rn(p, r, VX_expP3);
	p = __fmaf_rn(p, r, VX_expP4);
	p = __fmaf_rn(p, r, VX_expP5);
	float r2 = __fmul_rn(r, r);
	float y = __fmaf_rn(p, r2, r);
	y = __fadd_rn(y, 1.0f);
	return vx_ldexp(y, (int)n);
}

// vx_log is vmath.Log32.
__device__ float vx_log(float x) {
	if (x != x || x == VX_INF) return x;
	if (x < 0.0f) return VX_QNAN;
	if (x == 0.0f) return -VX_INF;
	unsigned bits = __float_as_uint(x);
	int e = 0;
	if (bits < 0x00800000u) {
		x = __fmul_rn(x, 8388608.0f);
		bits = __float_as_uint(x);
		e = -23;
	}
	e += (int)(bits >> 23) - 126;
	float m = __uint_as_float((bits & 0x007fffffu) | 0x3f000000u);
	if (m < VX_geluRsqrt2) { // 0.70710678118654752 as float32
		e--;
		m = __fsub_rn(__fadd_rn(m, m), 1.0f);
	} else {
		m = __fsub_rn(m, 1.0f);
	}
	float fe = (float)e;
	float z = __fmul_rn(m, m);
	float p = VX_logP0;
	p = __fmaf_rn(p, m, VX_logP1);
	p = __fmaf_rn(p, m, VX_logP2);
	p = __fmaf_rn(p, m, VX_logP3);
	p = __fmaf_rn(p, m, VX_logP4);
	p = __fmaf_rn(p, m, VX_logP5);
	p = __fmaf_rn(p, m, VX_logP6);
	p = __fmaf_rn(p, m, VX_logP7);
	p = __fmaf_rn(p, m, VX_logP8);
	float y = __fmul_rn(__fmul_rn(p, m), z);
	y = __fmaf_rn(fe, VX_ln2Lo, y);
	y = __fmaf_rn(-0.5f, z, y);
	float r = __fadd_rn(m, y);
	return __fmaf_rn(fe, VX_ln2Hi, r);
}

// vx_tanh is vmath.Tanh32.
__device__ float vx_tanh(float x) {
	if (x != x) return x;
	float a = fabsf(x);
	if (a < VX_tanhSmall) {
		float z = __fmul_rn(x, x);
		float p = VX_tanhP0;
		p = __fmaf_rn(p, z, VX_tanhP1);
		p = __fmaf_rn(p, z, VX_tanhP2);
		p = __fmaf_rn(p, z, VX_tanhP3);
		p = __fmaf_rn(p, z, VX_tanhP4);
		return __fmaf_rn(__fmul_rn(p, z), x, x);
	}
	if (a > VX_tanhBig) return copysignf(1.0f, x);
	float e = vx_exp(__fadd_rn(a, a));
	float t = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(e, 1.0f)));
	return x < 0.0f ? -t : t;
}

// vx_sigmoid is vmath.Sigmoid32.
__device__ float vx_sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, vx_exp(-x))); }

// vx_erf is vmath.Erf32.
__device__ float vx_erf(float x) {
	if (x != x) return x;
	float a = fabsf(x);
	float r;
	if (a < 0.5f) {
		float z = __fmul_rn(x, x);
		float p = VX_erfS0;
		p = __fmaf_rn(p, z, VX_erfS1);
		p = __fmaf_rn(p, z, VX_erfS2);
		p = __fmaf_rn(p, z, VX_erfS3);
		p = __fmaf_rn(p, z, VX_erfS4);
		p = __fmaf_rn(p, z, 1.0f);
		return __fmul_rn(p, __fmul_rn(x, VX_erfScale));
	} else if (a >= 4.0f) {
		r = 1.0f;
	} else {
		float t = __fdiv_rn(1.0f, __fmaf_rn(VX_erfT, a, 1.0f));
		float p = VX_erfA0;
		p = __fmaf_rn(p, t, VX_erfA1);
		p = __fmaf_rn(p, t, VX_erfA2);
		p = __fmaf_rn(p, t, VX_erfA3);
		p = __fmaf_rn(p, t, VX_erfA4);
		p = __fmul_rn(p, t);
		r = __fmaf_rn(-p, vx_exp(-__fmul_rn(a, a)), 1.0f);
	}
	return x < 0.0f ? -r : r;
}

// vx_gelu_erf is vmath.GeluErf32: (0.5*x) * (1 + erf(x/sqrt2)).
__device__ float vx_gelu_erf(float x) {
	return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, vx_erf(__fmul_rn(x, VX_geluRsqrt2))));
}

// vx_gelu_tanh is vmath.GeluTanh32.
__device__ float vx_gelu_tanh(float x) {
	float c = __fmul_rn(__fmul_rn(__fmul_rn(VX_geluK, x), x), x);
	float in = __fmul_rn(VX_geluC, __fadd_rn(x, c));
	return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, vx_tanh(in)));
}

// Unary operation codes (cuda/exact's Unary constants).
#define OP_RELU 0
#define OP_EXP 1
#define OP_LOG 2
#define OP_TANH 3
#define OP_SIGMOID 4
#define OP_ERF 5
#define OP_GELU_ERF 6
#define OP_GELU_TANH 7

// vx_unary sets y[i] = f(x[i]); relu is elementwise's Relu (NaN passes,
// -0 stays -0).
extern "C" __global__ void vx_unary(int op, const float* __restrict__ x, float* __restrict__ y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		float v = x[i], r;
		switch (op) {
		case OP_RELU: r = v < 0.0f ? 0.0f : v; break;
		case OP_EXP: r = vx_exp(v); break;
		case OP_LOG: r = vx_log(v); break;
		case OP_TANH: r = vx_tanh(v); break;
		case OP_SIGMOID: r = vx_sigmoid(v); break;
		case OP_ERF: r = vx_erf(v); break;
		case OP_GELU_ERF: r = vx_gelu_erf(v); break;
		default: r = vx_gelu_tanh(v); break;
		}
		y[i] = r;
	}
}

// vx_clip sets y[i] to elementwise's Clip of x[i]: below lo (when has_lo)
// it becomes lo, then above hi (when has_hi) hi; NaN passes, -0 stays -0.
extern "C" __global__ void vx_clip(const float* __restrict__ x, float* __restrict__ y, i64 n, float lo, float hi, int has_lo, int has_hi) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		float v = x[i];
		if (has_lo && v < lo) v = lo;
		if (has_hi && v > hi) v = hi;
		y[i] = v;
	}
}

// vx_add sets y[i] = a[i] + b[i] (one rounding).
extern "C" __global__ void vx_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		y[i] = __fadd_rn(a[i], b[i]);
	}
}

// copy_geom is cuda/exact.Copy's geometry: rank axes of dims[d] values,
// x advancing xs[d] floats and y ys[d] floats along axis d.
struct copy_geom {
	int rank;
	int dims[6];
	int xs[6];
	int ys[6];
};

// copy_offsets sets *xo and *yo to the offsets of index i of g's dims
// (the last axis fastest) along the xs and ys strides.
__device__ __forceinline__ void copy_offsets(const copy_geom& g, i64 i, i64* xo, i64* yo) {
	i64 r = i, a = 0, b = 0;
	for (int d = g.rank - 1; d >= 0; d--) {
		i64 q = r / g.dims[d];
		i64 k = r - q * g.dims[d];
		r = q;
		a += k * g.xs[d];
		b += k * g.ys[d];
	}
	*xo = a;
	*yo = b;
}

// vx_copy moves n values (the product of g's dims) from x to y, bits
// unchanged: the data movement of Transpose, Slice, Split, Concat and
// Gather. The last axis varies fastest.
extern "C" __global__ void vx_copy(copy_geom g, const float* __restrict__ x, float* __restrict__ y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		i64 xo, yo;
		copy_offsets(g, i, &xo, &yo);
		y[yo] = x[xo];
	}
}

// vx_add_bcast sets y[i] = a[ao] + b[bo] (one rounding, a first) for the
// n outputs of an ONNX broadcasting Add: g's dims are the output's, xs
// a's strides and ys b's (0 along an axis the operand broadcasts).
extern "C" __global__ void vx_add_bcast(copy_geom g, const float* a, const float* b, float* y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		i64 ao, bo;
		copy_offsets(g, i, &ao, &bo);
		y[i] = __fadd_rn(a[ao], b[bo]);
	}
}

// vx_div_bcast sets y[i] = a[ao] / b[bo] (correctly rounded: IEEE
// division, --prec-div=true) over the same broadcast geometry: ONNX Div
// as elementwise's.
extern "C" __global__ void vx_div_bcast(copy_geom g, const float* a, const float* b, float* y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		i64 ao, bo;
		copy_offsets(g, i, &ao, &bo);
		y[i] = __fdiv_rn(a[ao], b[bo]);
	}
}

// vx_gather sets y[(o*nidx + j)*inner + t] = x[(o*D + idx[j])*inner + t]:
// ONNX Gather along an axis of D values by nidx indices already checked
// and made non-negative on the host; bits unchanged.
extern "C" __global__ void vx_gather(const float* __restrict__ x, const int* __restrict__ idx, float* __restrict__ y,
	i64 outer, int nidx, int D, i64 inner) {
	i64 n = outer * nidx * inner;
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		i64 t = i % inner, q = i / inner;
		i64 j = q % nidx, o = q / nidx;
		y[i] = x[(o * D + idx[j]) * inner + t];
	}
}

// vx_channel_affine sets y = x*a[c] + b[c] (two roundings) over planes of
// S floats, c = plane % C: kernel/nn's inference BatchNormalization with
// a = scale/sqrt(var+eps) and b = bias - mean*a computed as the CPU does.
extern "C" __global__ void vx_channel_affine(const float* __restrict__ x, const float* __restrict__ a,
	const float* __restrict__ b, float* __restrict__ y, i64 planes, int S, int C) {
	i64 n = planes * S;
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		int c = (int)((i / S) % C);
		y[i] = __fadd_rn(__fmul_rn(x[i], a[c]), b[c]);
	}
}

// ---- Dot products -------------------------------------------------------
//
// gemm_tile runs one 64x64 output tile with 256 threads, 4x4 outputs each,
// K in blocks of 16 staged through shared memory. LA(i, k) and LB(k, j)
// read A and B (returning 0 outside the matrix rows/columns, which only
// feed discarded outputs); the K tail block runs its exact count. Each
// output's chain is acc = fma(A(i,k), B(k,j), acc), k = 0..K-1, from +0.

#define GT 64
#define GK 16

struct epilogue {
	const float* bias; // per row (output channel), or null
	const float* res;  // added after the bias, same layout as C, or null
	int relu;          // clamp below at 0 after the additions
};

// tile_step advances a thread's 4x4 chains by k step kk of the staged tile.
__device__ __forceinline__ void tile_step(const float (*As)[GT + 4], const float (*Bs)[GT + 4], int kk, int tx, int ty, float acc[4][4]) {
	float a[4], b[4];
#pragma unroll
	for (int i = 0; i < 4; i++) a[i] = As[kk][ty + 16 * i];
#pragma unroll
	for (int j = 0; j < 4; j++) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
}

template <class LA, class LB>
__device__ __forceinline__ void gemm_tile(int M, int N, int K, LA la, LB lb, float* __restrict__ C, i64 ldc, epilogue ep) {
	__shared__ float As[GK][GT + 4];
	__shared__ float Bs[GK][GT + 4];
	int tid = threadIdx.x;
	int tx = tid & 15, ty = tid >> 4;
	int m0 = blockIdx.y * GT, n0 = blockIdx.x * GT;
	float acc[4][4];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
	for (int k0 = 0; k0 < K; k0 += GK) {
		// 64x16 of A and 16x64 of B: 1024 values each, 4 per thread.
#pragma unroll
		for (int l = 0; l < 4; l++) {
			int e = tid + l * 256;
			int ai = e >> 4, ak = e & 15;     // A: row ai, column ak
			int bk = e >> 6, bj = e & 63;     // B: row bk, column bj
			int gi = m0 + ai, gk = k0 + ak;
			As[ak][ai] = (gi < M && gk < K) ? la(gi, gk) : 0.0f;
			int gk2 = k0 + bk, gj = n0 + bj;
			Bs[bk][bj] = (gk2 < K && gj < N) ? lb(gk2, gj) : 0.0f;
		}
		__syncthreads();
		int kn = min(GK, K - k0);
		if (kn == GK) {
#pragma unroll
			for (int kk = 0; kk < GK; kk++) tile_step(As, Bs, kk, tx, ty, acc);
		} else {
			for (int kk = 0; kk < kn; kk++) tile_step(As, Bs, kk, tx, ty, acc);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		int gi = m0 + ty + 16 * i;
		if (gi >= M) continue;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int gj = n0 + tx + 16 * j;
			if (gj >= N) continue;
			float v = vx_canon(acc[i][j]);
			i64 o = (i64)gi * ldc + gj;
			if (ep.bias) v = __fadd_rn(v, ep.bias[gi]);
			if (ep.res) v = __fadd_rn(v, ep.res[o]);
			if (ep.relu && v < 0.0f) v = 0.0f;
			C[o] = vx_canon(v);
		}
	}
}

struct strided {
	const float* p;
	i64 rs, cs;
	__device__ float operator()(int r, int c) const { return p[(i64)r * rs + (i64)c * cs]; }
};

// vx_sgemm sets C[i*ldc+j] to the chain over k of A(i,k) = a[i*ars+k*acs]
// and B(k,j) = b[k*brs+j*bcs] (kernel/nn's sgemm), for any shape and
// strides; blockIdx.z selects a batch: a, b and c advance by sa, sb, sc.
extern "C" __global__ void __launch_bounds__(256) vx_sgemm(int M, int N, int K,
	const float* __restrict__ a, i64 ars, i64 acs, i64 sa,
	const float* __restrict__ b, i64 brs, i64 bcs, i64 sb,
	float* __restrict__ c, i64 ldc, i64 sc) {
	i64 z = blockIdx.z;
	strided la = {a + z * sa, ars, acs}, lb = {b + z * sb, brs, bcs};
	epilogue ep = {0, 0, 0};
	gemm_tile(M, N, K, la, lb, c + z * sc, ldc, ep);
}

// conv_geom is a 2-D convolution's geometry (NCHW input, OIHW weights).
struct conv_geom {
	int C, H, W;       // input channels (all groups), height, width
	int M, OH, OW;     // output channels (all groups), output height, width
	int G, KH, KW;     // groups, kernel height, width
	int sh, sw, ph, pw, dh, dw;
};

// im2col_b reads B(k, p) of one image and group: the input value under
// kernel tap k = (c, kh, kw) for output pixel p, 0 for a padding tap.
struct im2col_b {
	const float* x; // this image's first channel of this group
	conv_geom g;
	__device__ float operator()(int k, int p) const {
		int khw = g.KH * g.KW;
		int c = k / khw, r = k - c * khw;
		int kh = r / g.KW, kw = r - kh * g.KW;
		int oh = p / g.OW, ow = p - oh * g.OW;
		int ih = oh * g.sh + kh * g.dh - g.ph, iw = ow * g.sw + kw * g.dw - g.pw;
		if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) return 0.0f;
		return x[((i64)c * g.H + ih) * g.W + iw];
	}
};

// vx_conv2d is Conv without an im2col buffer: per image and group
// (blockIdx.z = n*G + g) a GEMM of W[Mg, Cg*KH*KW] and the implicit im2col
// matrix, y = canon(acc) + bias[m] (+ res) (relu), as kernel/nn's Conv and
// its fused epilogue.
extern "C" __global__ void __launch_bounds__(256) vx_conv2d(conv_geom g,
	const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
	const float* __restrict__ res, int relu, float* __restrict__ y) {
	int n = blockIdx.z / g.G, gi = blockIdx.z - n * g.G;
	int Cg = g.C / g.G, Mg = g.M / g.G;
	int K = Cg * g.KH * g.KW, P = g.OH * g.OW;
	strided la = {w + (i64)gi * Mg * K, K, 1};
	im2col_b lb = {x + ((i64)n * g.C + (i64)gi * Cg) * g.H * g.W, g};
	i64 yo = ((i64)n * g.M + (i64)gi * Mg) * P;
	epilogue ep = {bias ? bias + gi * Mg : 0, res ? res + yo : 0, relu};
	gemm_tile(Mg, P, K, la, lb, y + yo, P, ep);
}

// mma8x8 advances a thread's 8x8 chains by one k step of a 128-wide tile
// pair: rows ty*4+{0..3} and 64+ty*4+{0..3} of as, the same columns of bs
// for tx (a warp reads 2 A and 16 B float4s).
__device__ __forceinline__ void mma8x8(const float* as, const float* bs, int tx, int ty, float acc[8][8]) {
	float4 a0 = *(const float4*)&as[ty * 4];
	float4 a1 = *(const float4*)&as[64 + ty * 4];
	float4 b0 = *(const float4*)&bs[tx * 4];
	float4 b1 = *(const float4*)&bs[64 + tx * 4];
	float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
	float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
	for (int i = 0; i < 8; i++)
#pragma unroll
		for (int j = 0; j < 8; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
}

// vx_sgemm128 is vx_sgemm for row-major A [M,K] and B [K,N] with M and N
// multiples of 128, K a multiple of BK and lda, ldb, ldc multiples of 4:
// 128x128 tiles, 256 threads with 8x8 outputs each, double-buffered
// shared memory, 16-byte loads. The same chains as vx_sgemm.
template <int BK>
__device__ __forceinline__ void sgemm128(int M, int N, int K, const float* __restrict__ A, int lda,
	const float* __restrict__ B, int ldb, float* __restrict__ C, int ldc) {
	__shared__ __align__(16) float As[2][BK][128];
	__shared__ __align__(16) float Bs[2][BK][128];
	const int LA = BK / 8;  // float4 loads of A per thread
	const int LB = BK / 8;  // float4 loads of B per thread
	int tid = threadIdx.x;
	int bm = blockIdx.y * 128, bn = blockIdx.x * 128;
	// A: 128 rows x BK columns as float4s along k; B: BK rows x 128 columns.
	const int AQ = BK / 4; // float4s per row of A's tile
	float4 ra[LA], rb[LB];
	const float* Ab = A + (i64)bm * lda;
	const float* Bb = B + bn;
	// SG_LOAD fetches the tiles at column (A) / row (B) k0 into registers;
	// SG_STORE puts them into shared buffer b (A transposed). Macros, not
	// lambdas: captured register arrays spilled to local memory (32 B in
	// the 16-deep variant, 11% slower).
#define SG_LOAD(k0) \
	_Pragma("unroll") for (int l = 0; l < LA; l++) { \
		int e = tid + l * 256, r = e / AQ, q = (e % AQ) * 4; \
		ra[l] = *(const float4*)(Ab + (i64)r * lda + (k0) + q); \
	} \
	_Pragma("unroll") for (int l = 0; l < LB; l++) { \
		int e = tid + l * 256, r = e >> 5, q = (e & 31) * 4; \
		rb[l] = *(const float4*)(Bb + (i64)((k0) + r) * ldb + q); \
	}
#define SG_STORE(b) \
	_Pragma("unroll") for (int l = 0; l < LA; l++) { \
		int e = tid + l * 256, r = e / AQ, q = (e % AQ) * 4; \
		As[b][q + 0][r] = ra[l].x; As[b][q + 1][r] = ra[l].y; \
		As[b][q + 2][r] = ra[l].z; As[b][q + 3][r] = ra[l].w; \
	} \
	_Pragma("unroll") for (int l = 0; l < LB; l++) { \
		int e = tid + l * 256, r = e >> 5, q = (e & 31) * 4; \
		*(float4*)&Bs[b][r][q] = rb[l]; \
	}
	SG_LOAD(0)
	SG_STORE(0)
	__syncthreads();
	// Thread (ty, tx) of a 16x16 grid owns rows ty*4+{0..3} and 64+ty*4+{0..3}
	// and the same columns of tx: a warp reads 2 A and 16 B float4s per k.
	int tx = tid & 15, ty = tid >> 4;
	float acc[8][8];
#pragma unroll
	for (int i = 0; i < 8; i++)
#pragma unroll
		for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
	int buf = 0;
	for (int k0 = 0; k0 < K; k0 += BK) {
		bool more = k0 + BK < K;
		if (more) {
			SG_LOAD(k0 + BK)
		}
#pragma unroll
		for (int kk = 0; kk < BK; kk++) {
			mma8x8(As[buf][kk], Bs[buf][kk], tx, ty, acc);
		}
		if (more) {
			buf ^= 1;
			SG_STORE(buf)
			__syncthreads();
		}
	}
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
		float* cr = C + (i64)row * ldc + bn;
		float4 v0 = make_float4(vx_canon(acc[i][0]), vx_canon(acc[i][1]), vx_canon(acc[i][2]), vx_canon(acc[i][3]));
		float4 v1 = make_float4(vx_canon(acc[i][4]), vx_canon(acc[i][5]), vx_canon(acc[i][6]), vx_canon(acc[i][7]));
		*(float4*)(cr + tx * 4) = v0;
		*(float4*)(cr + 64 + tx * 4) = v1;
	}
}

extern "C" __global__ void __launch_bounds__(256, 2) vx_sgemm128k8(int M, int N, int K, const float* __restrict__ A, int lda,
	const float* __restrict__ B, int ldb, float* __restrict__ C, int ldc) {
	sgemm128<8>(M, N, K, A, lda, B, ldb, C, ldc);
}

extern "C" __global__ void __launch_bounds__(256, 2) vx_sgemm128k16(int M, int N, int K, const float* __restrict__ A, int lda,
	const float* __restrict__ B, int ldb, float* __restrict__ C, int ldc) {
	sgemm128<16>(M, N, K, A, lda, B, ldb, C, ldc);
}

// ---- Pooling and normalizations -------------------------------------------

// pool_geom is a 2-D pooling window's geometry; pbh/pbw and peh/pew are the
// begin and end pads (count_include_pad's divisor counts taps inside them).
struct pool_geom {
	int H, W, OH, OW, KH, KW, sh, sw, pbh, pbw, peh, pew, dh, dw;
};

// vx_maxpool2d: each window's first largest tap in row-major tap order
// (-inf for a window of padding only), as kernel/nn's MaxPool.
extern "C" __global__ void vx_maxpool2d(pool_geom g, const float* __restrict__ x, float* __restrict__ y, i64 planes) {
	i64 total = planes * g.OH * g.OW;
	for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x) {
		i64 pl = t / (g.OH * g.OW);
		int p = (int)(t - pl * g.OH * g.OW), oh = p / g.OW, ow = p - oh * g.OW;
		const float* xc = x + pl * g.H * g.W;
		float best = -VX_INF;
		bool any = false;
		for (int kh = 0; kh < g.KH; kh++) {
			int ih = oh * g.sh + kh * g.dh - g.pbh;
			for (int kw = 0; kw < g.KW; kw++) {
				int iw = ow * g.sw + kw * g.dw - g.pbw;
				if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
				float v = xc[ih * g.W + iw];
				if (!any || v > best) best = v;
				any = true;
			}
		}
		y[t] = best;
	}
}

// vx_avgpool2d: the sequential sum of the window's taps inside the input,
// then one division by their count (or, with incl, by the taps inside the
// padded extent), as kernel/nn's AveragePool.
extern "C" __global__ void vx_avgpool2d(pool_geom g, int incl, const float* __restrict__ x, float* __restrict__ y, i64 planes) {
	i64 total = planes * g.OH * g.OW;
	for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x) {
		i64 pl = t / (g.OH * g.OW);
		int p = (int)(t - pl * g.OH * g.OW), oh = p / g.OW, ow = p - oh * g.OW;
		const float* xc = x + pl * g.H * g.W;
		float s = 0.0f;
		int n = 0, npad = 0;
		for (int kh = 0; kh < g.KH; kh++) {
			int ih = oh * g.sh + kh * g.dh - g.pbh;
			for (int kw = 0; kw < g.KW; kw++) {
				int iw = ow * g.sw + kw * g.dw - g.pbw;
				if (ih >= -g.pbh && ih < g.H + g.peh && iw >= -g.pbw && iw < g.W + g.pew) npad++;
				if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
				s = __fadd_rn(s, xc[ih * g.W + iw]);
				n++;
			}
		}
		y[t] = __fdiv_rn(s, (float)(incl ? npad : n));
	}
}

// vx_global_avg: per plane the sequential sum of S values, then / S.
extern "C" __global__ void vx_global_avg(const float* __restrict__ x, float* __restrict__ y, i64 planes, int S) {
	for (i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x; c < planes; c += (i64)gridDim.x * blockDim.x) {
		const float* r = x + c * S;
		float s = 0.0f;
		for (int i = 0; i < S; i++) s = __fadd_rn(s, r[i]);
		y[c] = __fdiv_rn(s, (float)S);
	}
}

// vx_softmax: per row of D values, the first NaN or else the first maximum
// m, e = exp(x - m) with the sequential sum of the e, then e / sum, as
// kernel/reduce's softmax over the last axis.
extern "C" __global__ void vx_softmax(const float* __restrict__ x, float* __restrict__ y, i64 rows, int D) {
	for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (i64)gridDim.x * blockDim.x) {
		const float* xr = x + r * D;
		float* yr = y + r * D;
		float mx = xr[0];
		for (int i = 1; i < D; i++) {
			float v = xr[i];
			if (v > mx || (v != v && mx == mx)) mx = v;
		}
		float s = 0.0f;
		for (int i = 0; i < D; i++) {
			float e = vx_exp(__fsub_rn(xr[i], mx));
			yr[i] = e;
			s = __fadd_rn(s, e);
		}
		for (int i = 0; i < D; i++) yr[i] = __fdiv_rn(yr[i], s);
	}
}

// vx_layernorm: per row of D values the sequential sum, m = s/D, the chain
// q = fma(x-m, x-m, q), inv = 1/sqrt(q/D + eps), y = ((x-m)*inv)*scale
// (+ bias), NaN canonical, as kernel/nn's LayerNormalization.
extern "C" __global__ void vx_layernorm(const float* __restrict__ x, const float* __restrict__ scale,
	const float* __restrict__ bias, float eps, float* __restrict__ y, i64 rows, int D) {
	for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (i64)gridDim.x * blockDim.x) {
		const float* xr = x + r * D;
		float* yr = y + r * D;
		float s = 0.0f;
		for (int i = 0; i < D; i++) s = __fadd_rn(s, xr[i]);
		float m = __fdiv_rn(s, (float)D);
		float q = 0.0f;
		for (int i = 0; i < D; i++) {
			float d = __fsub_rn(xr[i], m);
			q = __fmaf_rn(d, d, q);
		}
		float iv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(q, (float)D), eps)));
		for (int i = 0; i < D; i++) {
			float v = __fmul_rn(__fmul_rn(__fsub_rn(xr[i], m), iv), scale[i]);
			if (bias) v = __fadd_rn(v, bias[i]);
			yr[i] = vx_canon(v);
		}
	}
}

// ---- Conv, batch-folded register tiles ----------------------------------------
//
// vx_ct<BM>x<BN>[_1x1] compute the same chains as vx_conv2d (one fmaf chain
// per output over k = (input channel, kernel row, kernel column) ascending
// from +0, padding taps FMA(0, w, acc), the exact K tail) in tiles of BM
// output channels by BN columns, where a column is (image, output pixel):
// the batch is folded into the columns, so small images (7x7) fill a tile
// and the grid grows with the batch; blockIdx.z is the group. 256 threads
// in a 16x16 grid own TM x TN outputs each (BM = 16 TM, BN = 16 TN), K in
// blocks of BK double-buffered in shared memory, A rows padded by 4 floats
// so that its transposing stores do not conflict. The _1x1 variants are
// for 1x1 kernels without padding: every tap is inside the input, so the
// B operand is read at x[k*H*W] from the column's pixel without the tap
// table or bounds checks. The epilogue is vx_conv2d's, with the fused
// activation: act bit 0 ReLU, bit 1 (v < lo -> lo), bit 2 (v > hi -> hi).

// ct_idx is the tile row (or column) of a thread's i-th output: for T = 8
// two groups of 4 half a tile apart (16-byte shared loads that do not
// conflict), else T consecutive.
template <int T, int B>
__device__ __forceinline__ int ct_idx(int t, int i) {
	if (T == 8) return i < 4 ? t * 4 + i : B / 2 + t * 4 + i - 4;
	return t * T + i;
}

template <int T, int B>
__device__ __forceinline__ void ct_frag(const float* s, int t, float* v) {
	if constexpr (T == 8) {
		float4 a = *(const float4*)&s[t * 4];
		float4 b = *(const float4*)&s[B / 2 + t * 4];
		v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
		v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
	} else if constexpr (T == 4) {
		float4 a = *(const float4*)&s[t * 4];
		v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
	} else if constexpr (T == 2) {
		float2 a = *(const float2*)&s[t * 2];
		v[0] = a.x; v[1] = a.y;
	} else {
		v[0] = s[t];
	}
}

__device__ __forceinline__ float ct_act(float v, int act, float lo, float hi) {
	if ((act & 1) && v < 0.0f) v = 0.0f;
	if ((act & 2) && v < lo) v = lo;
	if ((act & 4) && v > hi) v = hi;
	return v;
}

// ct_step advances a thread's TM x TN chains by one k step of the staged
// tiles.
template <int TM, int TN, int BM, int BN>
__device__ __forceinline__ void ct_step(const float* as, const float* bs, int tx, int ty, float acc[TM][TN]) {
	float a[TM], b[TN];
	ct_frag<TM, BM>(as, ty, a);
	ct_frag<TN, BN>(bs, tx, b);
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
}

// conv_tile: see above. BK is the k block: the small tiles take longer
// blocks, so that each block's loads are covered by more arithmetic.
template <int TM, int TN, int BK, bool ONE, bool VA, bool VB, bool K3 = false>
__device__ __forceinline__ void conv_tile(const conv_geom& g, int N, const float* __restrict__ x, const float* __restrict__ w,
	const int4* __restrict__ taps, const float* __restrict__ bias, const float* __restrict__ res, int act, float lo, float hi,
	float* __restrict__ y) {
	constexpr int BM = 16 * TM, BN = 16 * TN;
	constexpr int NA = BM * BK, LA = (NA + 255) / 256; // A values per k block, per thread
	constexpr int BSTEP = 256 / BN;                    // k rows between a thread's B values
	constexpr int LB = BSTEP >= BK ? 1 : BK / BSTEP;
	__shared__ __align__(16) float As[2][BK][BM + 4];
	__shared__ __align__(16) float Bs[2][BK][BN];
	int gi = blockIdx.z;
	int Cg = g.C / g.G, Mg = g.M / g.G;
	int K = Cg * g.KH * g.KW, P = g.OH * g.OW;
	i64 HW = (i64)g.H * g.W;
	i64 NP = (i64)N * P;
	int tid = threadIdx.x;
	int m0 = blockIdx.y * BM;
	i64 j0 = (i64)blockIdx.x * BN;
	const float* wg = w + ((i64)gi * Mg + m0) * K;
	int bcol = tid % BN, bk0 = tid / BN;
	i64 jc = j0 + bcol;
	bool jok = jc < NP && bk0 < BK;
	int n = jok ? (int)(jc / P) : 0;
	int p = jok ? (int)(jc - (i64)n * P) : 0;
	int oh = p / g.OW, ow = p - oh * g.OW;
	int ih0 = oh * g.sh - g.ph, iw0 = ow * g.sw - g.pw;
	int xo = ih0 * g.W + iw0;
	const float* xb = x + ((i64)n * g.C + (i64)gi * Cg) * HW + (ONE ? xo : 0);
	// VA: A as 16-byte loads of 4 k (K a multiple of 4, BK = 8): thread
	// e < BM*2 takes row e/2, k (e&1)*4. VB (1x1, stride 1, P a multiple of
	// 4: four columns of one image are four adjacent floats): thread takes
	// k row tid/32 and columns (tid&31)*4.. of the BK = 8 x 128 block.
	const int var = tid >> 1, vaq = (tid & 1) * 4;
	const bool vaok = tid < BM * 2 && m0 + var < Mg;
	const float* vap = wg + (i64)var * K + vaq;
	const int vbr = tid >> 5, vbc = (tid & 31) * 4;
	const i64 vj = j0 + vbc;
	const bool vbok = vj < NP;
	const int vbn = vbok ? (int)(vj / P) : 0;
	const float* vbp = x + ((i64)vbn * g.C + (i64)gi * Cg) * HW + (vj - (i64)vbn * P);
	float ra[VA ? 4 : LA], rb[VB ? 4 : LB];
#define CT_LOAD(k0) \
	if (VA) { \
		float4 v = (vaok && (k0) + vaq < K) ? *(const float4*)(vap + (k0)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f); \
		ra[0] = v.x; ra[1] = v.y; ra[2] = v.z; ra[3] = v.w; \
	} else { \
		_Pragma("unroll") for (int l = 0; l < LA; l++) { \
			int e = tid + l * 256, r = e / BK, kk = (k0) + (e % BK); \
			ra[l] = (e < NA && m0 + r < Mg && kk < K) ? wg[(i64)r * K + kk] : 0.0f; \
		} \
	} \
	if (VB) { \
		int k = (k0) + vbr; \
		float4 v = (vbok && k < K) ? *(const float4*)(vbp + (i64)k * HW) : make_float4(0.0f, 0.0f, 0.0f, 0.0f); \
		rb[0] = v.x; rb[1] = v.y; rb[2] = v.z; rb[3] = v.w; \
	} else { \
		_Pragma("unroll") for (int l = 0; l < LB; l++) { \
			int k = (k0) + bk0 + l * BSTEP; \
			float v = 0.0f; \
			if (jok && k < K) { \
				if (ONE) { \
					v = xb[(i64)k * HW]; \
				} else if (K3) { \
					int c = k / 9, r = k - c * 9, kh = r / 3, kw = r - kh * 3; \
					int ih = ih0 + kh, iw = iw0 + kw; \
					if ((unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W) v = xb[(i64)c * HW + ih * g.W + iw]; \
				} else { \
					int4 t = taps[k]; \
					int ih = ih0 + t.y, iw = iw0 + t.z; \
					if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) v = xb[t.x + xo]; \
				} \
			} \
			rb[l] = v; \
		} \
	}
#define CT_STORE(b) \
	if (VA) { \
		if (tid < BM * 2) { \
			_Pragma("unroll") for (int q = 0; q < 4; q++) As[b][vaq + q][var] = ra[q]; \
		} \
	} else { \
		_Pragma("unroll") for (int l = 0; l < LA; l++) { \
			int e = tid + l * 256; \
			if (e < NA) As[b][e % BK][e / BK] = ra[l]; \
		} \
	} \
	if (VB) { \
		*(float4*)&Bs[b][vbr][vbc] = make_float4(rb[0], rb[1], rb[2], rb[3]); \
	} else { \
		_Pragma("unroll") for (int l = 0; l < LB; l++) { \
			if (bk0 + l * BSTEP < BK) Bs[b][bk0 + l * BSTEP][bcol] = rb[l]; \
		} \
	}
	CT_LOAD(0)
	CT_STORE(0)
	__syncthreads();
	int tx = tid & 15, ty = tid >> 4;
	float acc[TM][TN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
	int buf = 0;
	for (int k0 = 0; k0 < K; k0 += BK) {
		bool more = k0 + BK < K;
		if (more) CT_LOAD(k0 + BK)
		if (k0 + BK <= K) {
			// A whole block: no per-step test, so the steps' shared loads
			// and FMAs schedule together.
#pragma unroll
			for (int kk = 0; kk < BK; kk++) ct_step<TM, TN, BM, BN>(As[buf][kk], Bs[buf][kk], tx, ty, acc);
		} else {
			// The K tail: its exact count.
			for (int kk = 0; kk < K - k0; kk++) ct_step<TM, TN, BM, BN>(As[buf][kk], Bs[buf][kk], tx, ty, acc);
		}
		if (more) {
			buf ^= 1;
			CT_STORE(buf)
			__syncthreads();
		}
	}
#undef CT_LOAD
#undef CT_STORE
	int M0 = gi * Mg;
#pragma unroll
	for (int j = 0; j < TN; j++) {
		i64 col = j0 + ct_idx<TN, BN>(tx, j);
		if (col >= NP) continue;
		int cn = (int)(col / P);
		int cp = (int)(col - (i64)cn * P);
		i64 base = (i64)cn * g.M * P + cp;
#pragma unroll
		for (int i = 0; i < TM; i++) {
			int row = m0 + ct_idx<TM, BM>(ty, i);
			if (row >= Mg) continue;
			i64 o = base + (i64)(M0 + row) * P;
			float v = vx_canon(acc[i][j]);
			if (bias) v = __fadd_rn(v, bias[M0 + row]);
			if (res) v = __fadd_rn(v, res[o]);
			y[o] = vx_canon(ct_act(v, act, lo, hi));
		}
	}
}

#define CT_KERNEL(name, TM, TN, BK, ONE, VA, VB, K3) \
	extern "C" __global__ void __launch_bounds__(256, 2) name(conv_geom g, int N, const float* __restrict__ x, \
		const float* __restrict__ w, const int4* __restrict__ taps, const float* __restrict__ bias, \
		const float* __restrict__ res, int act, float lo, float hi, float* __restrict__ y) { \
		conv_tile<TM, TN, BK, ONE, VA, VB, K3>(g, N, x, w, taps, bias, res, act, lo, hi, y); \
	}

// _va: 16-byte weight loads (K a multiple of 4, 16-byte aligned operands);
// _1x1_vab: also 16-byte input loads (1x1, stride 1, P a multiple of 4);
// _3x3: _va for 3x3 kernels without dilation, the tap decoded from k by
// constant divisions instead of the tap table's load.
CT_KERNEL(vx_ct128x128, 8, 8, 8, false, false, false, false)
CT_KERNEL(vx_ct128x128_1x1, 8, 8, 8, true, false, false, false)
CT_KERNEL(vx_ct128x128_va, 8, 8, 8, false, true, false, false)
CT_KERNEL(vx_ct128x128_1x1_va, 8, 8, 8, true, true, false, false)
CT_KERNEL(vx_ct128x128_1x1_vab, 8, 8, 8, true, true, true, false)
CT_KERNEL(vx_ct128x128_3x3, 8, 8, 8, false, true, false, true)
CT_KERNEL(vx_ct64x128, 4, 8, 8, false, false, false, false)
CT_KERNEL(vx_ct64x128_1x1, 4, 8, 8, true, false, false, false)
CT_KERNEL(vx_ct64x128_va, 4, 8, 8, false, true, false, false)
CT_KERNEL(vx_ct64x128_1x1_va, 4, 8, 8, true, true, false, false)
CT_KERNEL(vx_ct64x128_1x1_vab, 4, 8, 8, true, true, true, false)
CT_KERNEL(vx_ct64x128_3x3, 4, 8, 8, false, true, false, true)
CT_KERNEL(vx_ct64x64, 4, 4, 16, false, false, false, false)
CT_KERNEL(vx_ct64x64_1x1, 4, 4, 16, true, false, false, false)
CT_KERNEL(vx_ct32x32, 2, 2, 32, false, false, false, false)
CT_KERNEL(vx_ct32x32_1x1, 2, 2, 32, true, false, false, false)
CT_KERNEL(vx_ct16x16, 1, 1, 64, false, false, false, false)
CT_KERNEL(vx_ct16x16_1x1, 1, 1, 64, true, false, false, false)

// vx_conv_direct is vx_conv2d's arithmetic with one thread per output (for
// depthwise and narrow grouped convolutions, where a tile of output
// channels would be mostly empty): output (n, m, oh, ow) is the chain over
// its group's (c, kh, kw) from +0, padding taps FMA(0, w, acc), then the
// same epilogue. Consecutive threads take consecutive output columns.
extern "C" __global__ void vx_conv_direct(conv_geom g, int N, const float* __restrict__ x, const float* __restrict__ w,
	const float* __restrict__ bias, const float* __restrict__ res, int act, float lo, float hi, float* __restrict__ y) {
	int Cg = g.C / g.G, Mg = g.M / g.G;
	int P = g.OH * g.OW;
	i64 total = (i64)N * g.M * P;
	for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x) {
		i64 nm = t / P;
		int p = (int)(t - nm * P);
		int n = (int)(nm / g.M), m = (int)(nm - (i64)n * g.M);
		int gi = m / Mg;
		int oh = p / g.OW, ow = p - oh * g.OW;
		int ih0 = oh * g.sh - g.ph, iw0 = ow * g.sw - g.pw;
		const float* xc = x + ((i64)n * g.C + (i64)gi * Cg) * g.H * g.W;
		const float* wm = w + (i64)m * Cg * g.KH * g.KW;
		float acc = 0.0f;
		for (int c = 0; c < Cg; c++) {
			for (int kh = 0; kh < g.KH; kh++) {
				int ih = ih0 + kh * g.dh;
				bool rok = ih >= 0 && ih < g.H;
				for (int kw = 0; kw < g.KW; kw++) {
					int iw = iw0 + kw * g.dw;
					float v = (rok && iw >= 0 && iw < g.W) ? xc[(i64)ih * g.W + iw] : 0.0f;
					acc = __fmaf_rn(wm[(c * g.KH + kh) * g.KW + kw], v, acc);
				}
			}
			xc += (i64)g.H * g.W;
		}
		float v = vx_canon(acc);
		if (bias) v = __fadd_rn(v, bias[m]);
		if (res) v = __fadd_rn(v, res[t]);
		y[t] = vx_canon(ct_act(v, act, lo, hi));
	}
}
