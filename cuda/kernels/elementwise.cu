
// ---- elementwise.cu: the elementwise family -----------------------------
//
// Appended to exact.cu (one translation unit): it uses exact.cu's vmath
// polynomials (vx_exp, vx_log, vx_tanh, vx_sigmoid) and copy_geom. Every
// kernel is its CPU twin's float32 expression, operation by operation:
// kernel/elementwise's Sub, Mul (Go's float32 a - b, a * b: one rounding,
// the first operand first), Cast to float32, the unary operators' scalar
// functions (each product that feeds an addition is rounded on its own, as
// the Go code's explicit float32 conversions make it), kernel/nn's
// ScaleShift and kernel/image's linear and cubic Resize (one fma chain per
// axis, innermost first, over weights computed on the host by the CPU's
// own code). Go's min and max are spelled out: a NaN operand gives NaN
// and max(0, -0) is +0 (fminf and fmaxf would drop the NaN).

// Arithmetic codes (cuda/exact's Arith constants).
#define AR_ADD 0
#define AR_SUB 1
#define AR_MUL 2
#define AR_DIV 3

__device__ __forceinline__ float vx_arith_op(int op, float a, float b) {
	switch (op) {
	case AR_ADD: return __fadd_rn(a, b);
	case AR_SUB: return __fsub_rn(a, b);
	case AR_MUL: return __fmul_rn(a, b);
	default: return __fdiv_rn(a, b);
	}
}

// vx_arith sets y[i] = a[i] op b[i] for operands of one shape. y may be a
// or b (each element is read before it is written).
extern "C" __global__ void vx_arith(int op, const float* a, const float* b, float* y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		y[i] = vx_arith_op(op, a[i], b[i]);
	}
}

// vx_arith_bcast sets y[i] = a[ao] op b[bo] over an ONNX broadcast (g's
// dims are the output's, xs a's strides and ys b's, 0 where an operand
// broadcasts), as vx_add_bcast.
extern "C" __global__ void vx_arith_bcast(copy_geom g, int op, const float* a, const float* b, float* y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		i64 ao, bo;
		copy_offsets(g, i, &ao, &bo);
		y[i] = vx_arith_op(op, a[ao], b[bo]);
	}
}

// Cast source codes (cuda/exact's CastFrom constants).
#define CAST_F32 0
#define CAST_I64 1
#define CAST_I32 2
#define CAST_BOOL 3

// vx_cast sets y[i] to kernel/elementwise's Cast of x[i] to float32: a
// float32's bits unchanged (NaN payloads too), an integer rounded to
// nearest, ties to even (Go's float32(int64), one rounding), a bool 0 or 1.
extern "C" __global__ void vx_cast(int from, const void* x, float* y, i64 n) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		float r;
		switch (from) {
		case CAST_F32: r = __int_as_float(((const int*)x)[i]); break;
		case CAST_I64: r = __ll2float_rn(((const long long*)x)[i]); break;
		case CAST_I32: r = __int2float_rn(((const int*)x)[i]); break;
		default: r = ((const unsigned char*)x)[i] != 0 ? 1.0f : 0.0f; break;
		}
		y[i] = r;
	}
}

// vx_gomin and vx_gomax are Go's min(a, b) and max(a, b) for float32: NaN
// if either is NaN, -0 below +0.
__device__ __forceinline__ float vx_gomin(float a, float b) {
	if (a != a || b != b) return VX_QNAN;
	if (a == b) return __int_as_float(__float_as_int(a) | __float_as_int(b)); // -0 if either is -0
	return a < b ? a : b;
}

__device__ __forceinline__ float vx_gomax(float a, float b) {
	if (a != a || b != b) return VX_QNAN;
	if (a == b) return __int_as_float(__float_as_int(a) & __float_as_int(b)); // +0 unless both are -0
	return a > b ? a : b;
}

// vx_hardsig is elementwise's HardSigmoid: max(0, min(1, float32(a*x)+b)).
__device__ __forceinline__ float vx_hardsig(float x, float a, float b) {
	return vx_gomax(0.0f, vx_gomin(1.0f, __fadd_rn(__fmul_rn(a, x), b)));
}

// vx_softplus is elementwise's softplus32.
__device__ __forceinline__ float vx_softplus(float x) {
	if (x > 0.0f) return __fadd_rn(x, vx_log(__fadd_rn(1.0f, vx_exp(-x))));
	return vx_log(__fadd_rn(1.0f, vx_exp(x)));
}

// Activation codes (cuda/exact's Act* constants): the unary operators
// that vx_unary does not run, and the fused layers' gated activations.
#define ACT_LEAKY_RELU 0     // x < 0 ? p0*x : x
#define ACT_HARD_SIGMOID 1   // HardSigmoid(x; p0, p1)
#define ACT_HARD_SWISH 2     // x * HardSigmoid(x; 1/6, 0.5)
#define ACT_SILU 3           // x * Sigmoid(x)
#define ACT_SILU_SF 4        // Sigmoid(x) * x
#define ACT_HARD_SIG_MUL 5   // x * HardSigmoid(x; p0, p1)
#define ACT_HARD_SIG_MUL_SF 6 // HardSigmoid(x; p0, p1) * x
#define ACT_NEG 7
#define ACT_ABS 8
#define ACT_SQRT 9
#define ACT_RECIPROCAL 10
#define ACT_ELU 11           // x < 0 ? p0*(exp(x)-1) : x
#define ACT_SOFTPLUS 12
#define ACT_SOFTSIGN 13      // x / (1 + |x|)
#define ACT_MISH 14          // x * tanh(softplus(x))
#define ACT_SELU 15          // x <= 0 ? p1*(float32(p0*exp(x)) - p0) : p1*x
#define ACT_CELU 16          // x < 0 ? p0*(exp(x/p0)-1) : x
#define ACT_THRESHOLDED_RELU 17 // x > p0 ? x : 0
#define ACT_SIGN 18
#define ACT_FLOOR 19
#define ACT_CEIL 20
#define ACT_ROUND 21         // ties to even
#define ACT_RELU_CLAMP 22    // ScaleShift's Relu: v < 0 ? 0 : v

__device__ __forceinline__ float vx_act_op(int op, float x, float p0, float p1) {
	switch (op) {
	case ACT_LEAKY_RELU: return x < 0.0f ? __fmul_rn(p0, x) : x;
	case ACT_HARD_SIGMOID: return vx_hardsig(x, p0, p1);
	case ACT_HARD_SWISH: return __fmul_rn(x, vx_gomax(0.0f, vx_gomin(1.0f, __fadd_rn(__fmul_rn(x, __int_as_float(0x3e2aaaab)), 0.5f))));
	case ACT_SILU: return __fmul_rn(x, vx_sigmoid(x));
	case ACT_SILU_SF: return __fmul_rn(vx_sigmoid(x), x);
	case ACT_HARD_SIG_MUL: return __fmul_rn(x, vx_hardsig(x, p0, p1));
	case ACT_HARD_SIG_MUL_SF: return __fmul_rn(vx_hardsig(x, p0, p1), x);
	case ACT_NEG: return __int_as_float(__float_as_int(x) ^ 0x80000000);
	case ACT_ABS: return __int_as_float(__float_as_int(x) & 0x7fffffff);
	case ACT_SQRT: return __fsqrt_rn(x);
	case ACT_RECIPROCAL: return __fdiv_rn(1.0f, x);
	case ACT_ELU: return x < 0.0f ? __fmul_rn(p0, __fsub_rn(vx_exp(x), 1.0f)) : x;
	case ACT_SOFTPLUS: return vx_softplus(x);
	case ACT_SOFTSIGN: return __fdiv_rn(x, __fadd_rn(1.0f, fabsf(x)));
	case ACT_MISH: return __fmul_rn(x, vx_tanh(vx_softplus(x)));
	case ACT_SELU: return x <= 0.0f ? __fmul_rn(p1, __fsub_rn(__fmul_rn(p0, vx_exp(x)), p0)) : __fmul_rn(p1, x);
	case ACT_CELU: return x < 0.0f ? __fmul_rn(p0, __fsub_rn(vx_exp(__fdiv_rn(x, p0)), 1.0f)) : x;
	case ACT_THRESHOLDED_RELU: return x > p0 ? x : 0.0f;
	case ACT_SIGN: return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
	case ACT_FLOOR: return floorf(x);
	case ACT_CEIL: return ceilf(x);
	case ACT_ROUND: return rintf(x);
	default: return x < 0.0f ? 0.0f : x;
	}
}

// vx_act sets y[i] = f(x[i]) for an activation code with parameters p0,
// p1. y may be x.
extern "C" __global__ void vx_act(int op, const float* x, float* y, i64 n, float p0, float p1) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		y[i] = vx_act_op(op, x[i], p0, p1);
	}
}

// vx_scale_shift is kernel/nn's ScaleShift: y = float32(x*a[c]) + b[c]
// over planes of S floats (c = plane % C), then with relu y < 0 -> 0 (NaN
// and -0 pass). y may be x.
extern "C" __global__ void vx_scale_shift(const float* x, const float* __restrict__ a, const float* __restrict__ b, float* y,
	i64 planes, int S, int C, int relu) {
	i64 n = planes * S;
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		int c = (int)((i / S) % C);
		float v = __fadd_rn(__fmul_rn(x[i], a[c]), b[c]);
		if (relu && v < 0.0f) v = 0.0f;
		y[i] = v;
	}
}

// resize_geom is cuda/exact.ResizeGeom: a rank-4 Resize's input and
// output shapes and, per axis, where its stencils are in the table tab:
// output index o of axis d reads taps tab[off[d]+o] .. tab[off[d]+o+1]-1
// (indices into the axis' idx and w arrays, at tab[idx[d]] and
// tab[w[d]], the weights as float32 bits).
struct resize_geom {
	int in[4];
	int out[4];
	int off[4];
	int idx[4];
	int w[4];
	int canon;
};

// vx_resize is kernel/image's interpInto for float32 of rank 4: the
// nested weighted sum, innermost axis first, each axis one chain
// acc = fma(w, v, acc) from +0 over its taps in order, the weights as the
// CPU rounds them; NaN canonical where the CPU's separable path applies
// (g.canon).
extern "C" __global__ void vx_resize(resize_geom g, const int* __restrict__ tab, const float* __restrict__ x, float* __restrict__ y) {
	i64 n = (i64)g.out[0] * g.out[1] * g.out[2] * g.out[3];
	i64 s2 = g.in[3], s1 = s2 * g.in[2], s0 = s1 * g.in[1];
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		i64 q = i;
		int o3 = (int)(q % g.out[3]);
		q /= g.out[3];
		int o2 = (int)(q % g.out[2]);
		q /= g.out[2];
		int o1 = (int)(q % g.out[1]);
		int o0 = (int)(q / g.out[1]);
		int a0 = tab[g.off[0] + o0], e0 = tab[g.off[0] + o0 + 1];
		int a1 = tab[g.off[1] + o1], e1 = tab[g.off[1] + o1 + 1];
		int a2 = tab[g.off[2] + o2], e2 = tab[g.off[2] + o2 + 1];
		int a3 = tab[g.off[3] + o3], e3 = tab[g.off[3] + o3 + 1];
		float acc0 = 0.0f;
		for (int j0 = a0; j0 < e0; j0++) {
			const float* x0 = x + tab[g.idx[0] + j0] * s0;
			float acc1 = 0.0f;
			for (int j1 = a1; j1 < e1; j1++) {
				const float* x1 = x0 + tab[g.idx[1] + j1] * s1;
				float acc2 = 0.0f;
				for (int j2 = a2; j2 < e2; j2++) {
					const float* x2 = x1 + tab[g.idx[2] + j2] * s2;
					float acc3 = 0.0f;
					for (int j3 = a3; j3 < e3; j3++) acc3 = __fmaf_rn(__int_as_float(tab[g.w[3] + j3]), x2[tab[g.idx[3] + j3]], acc3);
					acc2 = __fmaf_rn(__int_as_float(tab[g.w[2] + j2]), acc3, acc2);
				}
				acc1 = __fmaf_rn(__int_as_float(tab[g.w[1] + j1]), acc2, acc1);
			}
			acc0 = __fmaf_rn(__int_as_float(tab[g.w[0] + j0]), acc1, acc0);
		}
		y[i] = g.canon ? vx_canon(acc0) : acc0;
	}
}
