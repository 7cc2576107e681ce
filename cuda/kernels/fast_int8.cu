// fast_int8.cu: vouch's fast-mode INT8 tensor-core kernels (issue 19).
// Each output is an exact integer sum, so its bits do not depend on the
// batch, the tile, the grid or the stream, and the portable Go twin
// (package cuda/fast, Int8Conv) computes the same bits on a CPU:
//
//   - weights: int8, symmetric per output channel (quant.WeightScales:
//     s_w[m] = float32(max|w[m,:]| / 127), q = clamp(RNE(w / s_w), ±127)),
//     quantized once, on the host, at upload;
//   - input: quantized once per layer by v8_quant, with the layer's
//     per-tensor scale s_x and inv = float32(1 / s_x) (the host's IEEE
//     division): v = x * inv rounded to float32 (__fmul_rn), then
//     q = cvt.rni.s32.f32(v) (round to nearest even; NaN -> 0, beyond
//     the int32 range saturated), clamped to [-127, 127]: kernel/q8's
//     quantization, the same integers as the CPU's int8 layers. v8_quant
//     writes them channels-last, [N][H][W][Cp] bytes (Cp = C rounded up
//     to 16, zeros in the padding), so that the GEMM stages 16 channels
//     of one pixel with one 16-byte load, and each value is quantized
//     once, not once per tap and channel block;
//   - the chain: mma.sync m16n8k32 s8 x s8 -> s32 steps k = 0, 32, 64, ...
//     of the padded reduction Kp into one int32 accumulator, in that
//     order (any order gives the same integer: |q| <= 127 and K <=
//     V8_MAXK keep every partial sum inside int32), no split-K, no atomics;
//   - epilogue, float32, every operation rounded to nearest even in this
//     order: f = float32(acc) (cvt.rn), v = f * mult[m] with mult[m] =
//     float32(s_x * s_w[m]) computed on the host, then v + bias[m], then
//     v + residual, then the activation (Relu; Clip's lower, then upper
//     bound), as the exact kernels order them.
//
// Layout: C[m][col] = sum_k A[m][k] * B[k][col], m an output channel (or
// a Gemm's output feature), col an (image, output pixel) pair of the
// batch-folded convolution (or a Gemm's row: a Gemm is the 1x1
// convolution of 1x1 images of K channels). k runs tap by tap, channels
// within a tap: k = (kh * KW + kw) * Cp + c. A: the int8 weights as
// [Mp][Kp] bytes in that order (Mp a multiple of 128, Kp = KH*KW*Cp
// rounded up to V8_BK, zeros in the padding); B: the channels-last input,
// 16-byte chunks of one pixel's channels, zero outside the image.
// 256 threads: 8 warps as 2 (m) x 4 (col), each warp a (BM/2) x (BN/4)
// block of m16n8 tiles. Shared memory holds A as [m][k] and B as [col][k]
// bytes (a 32-bit word: the four int8 values k..k+3 of one fragment
// register, the lowest k in the low byte), double buffered.

#define V8_BK 64
#define V8_LD (V8_BK + 16) // row stride of the shared tiles, in bytes
#define V8_MAXK 131072     // 131072 * 127 * 127 < 2^31
#define V8_CLD(BN) ((BN) + 8) // row stride of the staged accumulators, in words
#define V8_NARROW 4           // inputs of at most this many channels: Cp = 4
#define V8_CP(C) ((C) <= V8_NARROW ? 4 : ((C) + 15) / 16 * 16)

// The instruction helpers. The CPU emulation test defines V8_EMU and its
// own versions.
#ifndef V8_EMU
__device__ __forceinline__ void v8_mma(int* c, const unsigned* a, const unsigned* b) {
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// ldmatrix (.b16, the bytes as pairs): four (x4) or two (x2) 8x8
// matrices of 16-byte rows, lane 8*j + r giving row r of matrix j;
// register j of lane l holds bytes 4*(l%4)..+3 of row l/4 of matrix j.
__device__ __forceinline__ void v8_ldm4(unsigned* d, const unsigned char* p) {
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(a));
}
__device__ __forceinline__ void v8_ldm2(unsigned* d, const unsigned char* p) {
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(d[0]), "=r"(d[1]) : "r"(a));
}
#endif

// v8_q quantizes one input value (see the header).
__device__ __forceinline__ int v8_q(float x, float inv) {
	int q = __float2int_rn(__fmul_rn(x, inv));
	return q < -127 ? -127 : q > 127 ? 127 : q;
}

__device__ __forceinline__ unsigned v8_pack(int q0, int q1, int q2, int q3) {
	return (unsigned)(q0 & 0xff) | (unsigned)(q1 & 0xff) << 8 | (unsigned)(q2 & 0xff) << 16 | (unsigned)(q3 & 0xff) << 24;
}

// v8_geom: the batch-folded convolution (a Gemm: the 1x1 convolution of N
// images of C = K channels and one pixel).
struct v8_geom {
	int C, H, W, M, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW;
	int N;  // images (a Gemm's rows)
	int Kp; // the weights' row length in bytes: KH*KW*Cp rounded up to V8_BK
};

__device__ __forceinline__ float v8_act(float v, int act, float lo, float hi) {
	if ((act & 1) && v < 0.0f) v = 0.0f;
	if ((act & 2) && v < lo) v = lo;
	if ((act & 4) && v > hi) v = hi;
	return v;
}

// v8_out is output o (channel m) from its accumulator: the epilogue of
// the header, each operation rounded on its own.
__device__ __forceinline__ float v8_out(int acc, int m, const float* __restrict__ mult, const float* __restrict__ bias,
	const float* __restrict__ res, long long o, int act, float lo, float hi) {
	float v = __fmul_rn(__int2float_rn(acc), mult[m]);
	if (bias) v = __fadd_rn(v, bias[m]);
	if (res) v = __fadd_rn(v, res[o]);
	return v8_act(v, act, lo, hi);
}

// v8_quant: x (NCHW float32, N images of C channels of HW pixels) to xq
// ([N][HW][Cp] int8, Cp = C rounded up to 16). One thread a pixel's 16
// channels; consecutive threads take consecutive pixels.
extern "C" __global__ void __launch_bounds__(256) v8_quant(const float* __restrict__ x, unsigned char* __restrict__ xq,
	int N, int C, int HW, float inv) {
	const int G = (C + 15) / 16, Cp = V8_CP(C);
	const long long i = (long long)blockIdx.x * 256 + threadIdx.x, tot = (long long)N * G * HW;
	if (i >= tot) return;
	int p, cg, n;
	if (tot <= 0x7fffffff) { // 32-bit divisions (a 64-bit one is a long routine)
		const unsigned u = (unsigned)i, r = u / (unsigned)HW;
		p = (int)(u - r * (unsigned)HW);
		n = (int)(r / (unsigned)G);
		cg = (int)(r - (unsigned)n * (unsigned)G);
	} else {
		const long long r = i / HW;
		p = (int)(i - r * HW);
		n = (int)(r / G);
		cg = (int)(r - (long long)n * G);
	}
	const float* xp = x + ((long long)n * C + cg * 16) * HW + p;
	if (C <= V8_NARROW) { // Cp = 4: the pixel's one 32-bit word
		int q[4];
#pragma unroll
		for (int c = 0; c < 4; c++) q[c] = c < C ? v8_q(xp[(long long)c * HW], inv) : 0;
		*(unsigned*)(xq + ((long long)n * HW + p) * 4) = v8_pack(q[0], q[1], q[2], q[3]);
		return;
	}
	unsigned v[4];
#pragma unroll
	for (int j = 0; j < 4; j++) {
		int q[4];
#pragma unroll
		for (int h = 0; h < 4; h++) {
			int c = j * 4 + h;
			q[h] = cg * 16 + c < C ? v8_q(xp[(long long)c * HW], inv) : 0;
		}
		v[j] = v8_pack(q[0], q[1], q[2], q[3]);
	}
	*(uint4*)(xq + ((long long)n * HW + p) * Cp + cg * 16) = make_uint4(v[0], v[1], v[2], v[3]);
}

template <int BM, int BN, bool NARROW>
__device__ __forceinline__ void v8_tile(const v8_geom& g, const unsigned char* __restrict__ xq, const unsigned char* __restrict__ w,
	const float* __restrict__ mult, const float* __restrict__ bias, const float* __restrict__ res, int act, float lo, float hi,
	float* __restrict__ y) {
	constexpr int WM = BM / 2, WN = BN / 4;  // a warp's block
	constexpr int MI = WM / 16, NI = WN / 8; // its m16n8 tiles
	constexpr int LA = BM * 4 / 256;         // 16-byte A chunks per thread per k block
	constexpr int NB = BN * 4;               // 16-byte B chunks per k block
	constexpr int LB = (NB + 255) / 256;     // per thread (BN = 32: half the threads)
	// Shared memory: the double-buffered A and B tiles, and after the k
	// loop the int32 accumulators of half the tile's rows (one wm's) at a
	// time, rows of V8_CLD(BN) words, for the coalesced epilogue.
	constexpr int SA = 2 * BM * V8_LD, SB = 2 * BN * V8_LD, SC = BM / 2 * V8_CLD(BN) * 4;
	__shared__ __align__(16) unsigned char smem[SA + SB > SC ? SA + SB : SC];
	unsigned char(*As)[BM][V8_LD] = reinterpret_cast<unsigned char(*)[BM][V8_LD]>(smem);
	unsigned char(*Bs)[BN][V8_LD] = reinterpret_cast<unsigned char(*)[BN][V8_LD]>(smem + SA);
	int(*Cs)[V8_CLD(BN)] = reinterpret_cast<int(*)[V8_CLD(BN)]>(smem);
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp & 1, wn = warp >> 1;
	const int gid = lane >> 2, tig = lane & 3;
	const int P = g.OH * g.OW, Cp = NARROW ? 4 : (g.C + 15) / 16 * 16;
	const long long NP = (long long)g.N * P;
	const int m0 = blockIdx.y * BM;
	const long long c0 = (long long)blockIdx.x * BN;
	const unsigned char* wb = w + (long long)m0 * g.Kp;

	// This thread's B chunks: column e/4 of the block, k offset 16*(e%4)
	// in each k block, e = tid + 256*l; the column's image and the top
	// left of its receptive field.
	// The chunk's k = (kh * KW + kw) * Cp + c advances by V8_BK a load,
	// (c, kh, kw) with it: no division in the k loop.
	bool jok[LB];
	int ih0[LB], iw0[LB], bc[LB], bkh[LB], bkw[LB];
	const unsigned char* xn[LB];
	// NARROW (Cp = 4, a pixel's channels one 32-bit word): this thread's B
	// words are tap tid%16 + 16*kb of columns tid/16 + 16*l (l < LN) in
	// k block kb, so the tap (kh, kw) is the same for all its columns.
	constexpr int LN = BN / 16;
	bool njok[LN];
	int nih0[LN], niw0[LN], nkh = 0, nkw = 0;
	const unsigned char* nxn[LN];
	unsigned rn[LN];
	if constexpr (NARROW) {
#pragma unroll
		for (int l = 0; l < LN; l++) {
			const long long jc = c0 + (tid >> 4) + 16 * l;
			njok[l] = jc < NP;
			const int n = njok[l] ? (int)(jc / P) : 0;
			const int p = njok[l] ? (int)(jc - (long long)n * P) : 0;
			const int oh = p / g.OW, ow = p - oh * g.OW;
			nih0[l] = oh * g.SH - g.PH;
			niw0[l] = ow * g.SW - g.PW;
			nxn[l] = xq + (long long)n * g.H * g.W * 4;
		}
		nkh = (tid & 15) / g.KW;
		nkw = (tid & 15) - nkh * g.KW;
	}
#pragma unroll
	for (int l = 0; l < (NARROW ? 0 : LB); l++) {
		const int e = tid + l * 256;
		const long long jc = c0 + (e >> 2);
		jok[l] = e < NB && jc < NP;
		const int n = jok[l] ? (int)(jc / P) : 0;
		const int p = jok[l] ? (int)(jc - (long long)n * P) : 0;
		const int oh = p / g.OW, ow = p - oh * g.OW;
		ih0[l] = oh * g.SH - g.PH;
		iw0[l] = ow * g.SW - g.PW;
		xn[l] = xq + (long long)n * g.H * g.W * Cp;
		const int k = (e & 3) * 16, t = k / Cp;
		bc[l] = k - t * Cp;
		bkh[l] = t / g.KW;
		bkw[l] = t - bkh[l] * g.KW;
	}

	unsigned ra[LA][4];
	uint4 rb[LB];

	auto load = [&](int k0) { // k0: 0, V8_BK, 2 V8_BK, ... in turn
#pragma unroll
		for (int l = 0; l < LA; l++) {
			int e = tid + l * 256, r = e >> 2, ch = e & 3;
			const uint4 v = *(const uint4*)(wb + (long long)r * g.Kp + k0 + ch * 16);
			ra[l][0] = v.x;
			ra[l][1] = v.y;
			ra[l][2] = v.z;
			ra[l][3] = v.w;
		}
		if constexpr (NARROW) {
#pragma unroll
			for (int l = 0; l < LN; l++) {
				const int ih = nih0[l] + nkh * g.DH, iw = niw0[l] + nkw * g.DW;
				rn[l] = 0;
				if (njok[l] && nkh < g.KH && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W)
					rn[l] = *(const unsigned*)(nxn[l] + ((long long)ih * g.W + iw) * 4);
			}
			for (nkw += 16; nkw >= g.KW; nkw -= g.KW) nkh++;
			return;
		}
#pragma unroll
		for (int l = 0; l < LB; l++) {
			const int ih = ih0[l] + bkh[l] * g.DH, iw = iw0[l] + bkw[l] * g.DW;
			rb[l] = make_uint4(0, 0, 0, 0);
			if (jok[l] && bkh[l] < g.KH && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W)
				rb[l] = *(const uint4*)(xn[l] + ((long long)ih * g.W + iw) * Cp + bc[l]);
			for (bc[l] += V8_BK; bc[l] >= Cp; bc[l] -= Cp)
				if (++bkw[l] == g.KW) {
					bkw[l] = 0;
					bkh[l]++;
				}
		}
	};
	auto store = [&](int buf) {
#pragma unroll
		for (int l = 0; l < LA; l++) {
			int e = tid + l * 256, r = e >> 2, ch = e & 3;
			*(uint4*)&As[buf][r][ch * 16] = make_uint4(ra[l][0], ra[l][1], ra[l][2], ra[l][3]);
		}
		if constexpr (NARROW) {
#pragma unroll
			for (int l = 0; l < LN; l++) *(unsigned*)&Bs[buf][(tid >> 4) + 16 * l][(tid & 15) * 4] = rn[l];
			return;
		}
#pragma unroll
		for (int l = 0; l < LB; l++) {
			const int e = tid + l * 256;
			if (e < NB) *(uint4*)&Bs[buf][e >> 2][(e & 3) * 16] = rb[l];
		}
	};

	int acc[MI][NI][4];
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NI; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) acc[i][j][q] = 0;

	const int KT = g.Kp / V8_BK;
	load(0);
	store(0);
	__syncthreads();
	for (int kt = 0; kt < KT; kt++) {
		const int cur = kt & 1;
		if (kt + 1 < KT) load((kt + 1) * V8_BK);
#pragma unroll
		for (int kk = 0; kk < V8_BK; kk += 32) {
			// Fragments (PTX ISA, m16n8k32 .s8): A registers 0..3 hold
			// row gid / gid+8 / gid / gid+8 at k 4*tig.. (+16 for 2, 3),
			// ldmatrix's matrices (rows 0-7, k 0-15), (8-15, 0-15),
			// (0-7, 16-31), (8-15, 16-31); B registers 0, 1 column gid at
			// k 4*tig.. and 16 + 4*tig..: (columns 0-7, k 0-15),
			// (0-7, 16-31) of tile j, then of j + 1.
			unsigned a[MI][4], b[NI][2];
			const int lr = lane & 7, lj = lane >> 3;
#pragma unroll
			for (int i = 0; i < MI; i++) v8_ldm4(a[i], &As[cur][wm * WM + i * 16 + lr + (lj & 1) * 8][kk + (lj >> 1) * 16]);
#pragma unroll
			for (int j = 0; j + 1 < NI; j += 2) v8_ldm4(&b[j][0], &Bs[cur][wn * WN + (j + (lj >> 1)) * 8 + lr][kk + (lj & 1) * 16]);
			if (NI & 1) v8_ldm2(b[NI - 1], &Bs[cur][wn * WN + (NI - 1) * 8 + lr][kk + (lj & 1) * 16]);
#pragma unroll
			for (int i = 0; i < MI; i++)
#pragma unroll
				for (int j = 0; j < NI; j++) v8_mma(acc[i][j], a[i], b[j]);
		}
		if (kt + 1 < KT) store(cur ^ 1);
		__syncthreads();
	}

	// Epilogue. Gemm (one pixel an image: consecutive columns are M
	// floats apart): straight from the fragments, c0, c1 row gid, columns
	// 2*tig and 2*tig + 1 of the m16n8 tile, c2, c3 the same columns of
	// row gid + 8; eight lanes write eight consecutive outputs.
	if (P == 1) {
#pragma unroll
		for (int i = 0; i < MI; i++)
#pragma unroll
			for (int j = 0; j < NI; j++)
#pragma unroll
				for (int q = 0; q < 4; q++) {
					int m = m0 + wm * WM + i * 16 + gid + (q >> 1) * 8;
					long long col = c0 + wn * WN + j * 8 + tig * 2 + (q & 1);
					if (m >= g.M || col >= NP) continue;
					long long o = col * g.M + m;
					y[o] = v8_out(acc[i][j][q], m, mult, bias, res, o, act, lo, hi);
				}
		return;
	}
	// Convolutions: the accumulators go through shared memory, half the
	// rows at a time, and each thread writes four consecutive columns of
	// a row (output pixels p..p+3 of one image, NCHW: consecutive floats)
	// with one 16-byte store where they are whole and aligned: threads
	// tid, tid+1, ... cover a row's columns in order (coalesced), and a
	// thread's columns are the same in every row, so the (image, pixel)
	// of its first column is one division, done once. The arithmetic of
	// each output is v8_out's whichever path stores it.
	constexpr int CQ = BN / 4, RP = 256 / CQ; // chunks a row, rows a pass
	const int cq = tid % CQ;
	const long long cb = c0 + 4 * cq;
	const int n0 = (int)(cb / P), p0 = (int)(cb - (long long)n0 * P);
	const bool whole = cb + 3 < NP && p0 + 3 < P &&
		(((unsigned long long)y | (unsigned long long)res) & 15) == 0;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		__syncthreads(); // the k loop's (or the last half's) reads of smem are done
		if (wm == h) {
#pragma unroll
			for (int i = 0; i < MI; i++)
#pragma unroll
				for (int j = 0; j < NI; j++)
#pragma unroll
					for (int q = 0; q < 4; q += 2)
						*(int2*)&Cs[i * 16 + gid + (q >> 1) * 8][wn * WN + j * 8 + tig * 2] = make_int2(acc[i][j][q], acc[i][j][q + 1]);
		}
		__syncthreads();
		for (int r = tid / CQ; r < WM; r += RP) {
			const int m = m0 + h * WM + r;
			if (m >= g.M) break;
			const int4 a = *(const int4*)&Cs[r][4 * cq];
			const long long o0 = ((long long)n0 * g.M + m) * P + p0;
			if (whole && (o0 & 3) == 0) {
				*(float4*)(y + o0) = make_float4(v8_out(a.x, m, mult, bias, res, o0, act, lo, hi),
					v8_out(a.y, m, mult, bias, res, o0 + 1, act, lo, hi), v8_out(a.z, m, mult, bias, res, o0 + 2, act, lo, hi),
					v8_out(a.w, m, mult, bias, res, o0 + 3, act, lo, hi));
				continue;
			}
			const int av[4] = {a.x, a.y, a.z, a.w};
			int n = n0, p = p0;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				if (cb + e >= NP) break;
				const long long o = ((long long)n * g.M + m) * P + p;
				y[o] = v8_out(av[e], m, mult, bias, res, o, act, lo, hi);
				if (++p == P) {
					p = 0;
					n++;
				}
			}
		}
	}
}

#define V8_ENTRY(NAME, BM, BN, NARROW) \
	extern "C" __global__ void __launch_bounds__(256) NAME(const v8_geom g, const unsigned char* __restrict__ xq, \
		const unsigned char* __restrict__ w, const float* __restrict__ mult, const float* __restrict__ bias, \
		const float* __restrict__ res, int act, float lo, float hi, float* __restrict__ y) { \
		v8_tile<BM, BN, NARROW>(g, xq, w, mult, bias, res, act, lo, hi, y); \
	}

V8_ENTRY(v8_128x128, 128, 128, false)
V8_ENTRY(v8_128x64, 128, 64, false)
V8_ENTRY(v8_64x64, 64, 64, false)
V8_ENTRY(v8_64x32, 64, 32, false)
// Inputs of at most V8_NARROW channels (an image's RGB stem).
V8_ENTRY(v8_n_128x128, 128, 128, true)
V8_ENTRY(v8_n_128x64, 128, 64, true)
V8_ENTRY(v8_n_64x64, 64, 64, true)
V8_ENTRY(v8_n_64x32, 64, 32, true)
