// fast_attn.cu: fast mode's fused attention (issue 19), joined after
// fast.cu (whose vf_pack and vf_mma it uses) and the exact kernels (whose
// vx_exp and vx_canon it uses) into a fast plan's image.
//
// One block per (query block of VA_BQ rows, head, batch) computes, for its
// rows i of one (batch, head),
//
//   s[i][j] = chain of mma.sync m16n8k16 steps over d = 0, 16, ... of
//             q[i][d] * kt[d][j] (16-bit operands, converted with cvt.rn,
//             FP32 accumulators from +0), NaN canonical,
//   s = s / scale (op 1) or s * scale (op 2), then + mask (one FP32 add, the
//             mask broadcast by its strides), as the body's Div and Add,
//   p[i][j] = the exact Softmax of row i (vx_softmax's: the first NaN or else
//             the first maximum m, e = vx_exp(s - m), the sequential sum of
//             the e over j = 0, 1, ..., S-1, e / sum), all in FP32,
//   y[i][d] = chain of mma.sync steps over j = 0, 16, ... of p[i][j] * v[j][d]
//             (p converted with cvt.rn), NaN canonical.
//
// Every reduction is in a fixed order that depends on S and D only: the
// whole key row is in the block (no split over key blocks, no online
// rescaling, no atomics), and the block that computes a row depends on the
// row's (batch, head, position), never on how many rows share the batch.
// So a row alone and in a batch have the same bits, and so do two runs.
// cuda/emu computes the same (cuda/mma's model for the products).
//
// Operands, float32, each by its strides (va_lay, in elements): q
// (b, h, i, d), kt (b, h, d, j) (the keys transposed, as the graph's
// MatMul reads them), v (b, h, j, d), y (b, h, i, d): contiguous
// [BH][S][D] (kt [BH][D][S]) operands, or the views of the QKV product's
// [B][S][3][H][D] and of y's [B][S][H][D] that the graph's Split, Reshapes
// and Transposes make (folded into the addressing at build time: those
// layers then copy nothing). Where a value is read or written changes
// no operation on it. Mask element (b, h, i, j) at mb*b + mh*h + mi*i + mj*j
// (0 strides broadcast). S <= SMAX, D a multiple of 16; the keys are padded with zeros
// to Sp, a multiple of 16, for p v (zero terms change no chain, so the
// bits do not depend on SMAX). 128 threads: 4 warps, 2
// (16-row halves of the block) x 2 (halves of the columns).

#define VA_BQ 32
#define VA_THREADS 128

// va_lay: the operands' strides (b, h, row, column), in elements.
struct va_lay {
	i64 q[4], k[4], v[4], y[4];
};

template <bool BF, int D, int SMAX>
__device__ __forceinline__ void va_attention(const float* __restrict__ q, const float* __restrict__ kt, const float* __restrict__ v,
	const float* __restrict__ mask, float* __restrict__ y, int S, int H, int op, float scale, i64 mb, i64 mh, i64 mi, i64 mj,
	const va_lay& L) {
	// K as [j][d] (the B fragments of q kt are k = d pairs), later V as
	// [d][j] (those of p v are k = j pairs), in one buffer.
	// LS, the scores' row stride, is 5 mod 32 (odd): the row max and the
	// sequential row sums, a thread a row reading column j of 32 rows at
	// once, hit 32 banks (SMAX + 4 put them in 8: 8-way conflicts on each
	// of 2 x S dependent steps); the p fragments' loads get 2-way ones.
	constexpr int LK = D + 8, LV = SMAX + 8, LS = SMAX + 5;
	constexpr int KV = SMAX * LK > D * LV ? SMAX * LK : D * LV;
	__shared__ __align__(16) unsigned short qs[VA_BQ * LK];
	__shared__ __align__(16) unsigned short kv[KV];
	// The scores, then the e, then the p as 16-bit pairs in the same rows.
	__shared__ __align__(16) float ss[VA_BQ * LS];
	__shared__ float rmax[VA_BQ], rsum[VA_BQ];
	const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
	const int gid = lane >> 2, tig = lane & 3;
	const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * VA_BQ;
	q += b * L.q[0] + h * L.q[1];
	kt += b * L.k[0] + h * L.k[1];
	v += b * L.v[0] + h * L.v[1];
	y += b * L.y[0] + h * L.y[1];
	unsigned* q32 = (unsigned*)qs;
	unsigned* kv32 = (unsigned*)kv;
	for (int e = tid; e < VA_BQ * D / 2; e += VA_THREADS) {
		int r = e / (D / 2), c = e % (D / 2) * 2;
		float lo = 0.0f, hi = 0.0f;
		if (q0 + r < S) {
			lo = q[(q0 + r) * L.q[2] + c * L.q[3]];
			hi = q[(q0 + r) * L.q[2] + (c + 1) * L.q[3]];
		}
		q32[(r * LK + c) / 2] = vf_pack<BF>(lo, hi);
	}
	// The keys' element (d, j) at d*L.k[2] + j*L.k[3]: neighbouring threads
	// take neighbouring keys of kt's rows, or (when d is the contiguous
	// axis, the QKV product's view) neighbouring d of one key.
	const bool kd = L.k[2] == 1;
	for (int e = tid; e < SMAX * D / 2; e += VA_THREADS) {
		int j = kd ? e / (D / 2) : e % SMAX, c = kd ? e % (D / 2) * 2 : e / SMAX * 2;
		float lo = 0.0f, hi = 0.0f;
		if (j < S) {
			lo = kt[c * L.k[2] + j * L.k[3]];
			hi = kt[(c + 1) * L.k[2] + j * L.k[3]];
		}
		kv32[(j * LK + c) / 2] = vf_pack<BF>(lo, hi);
	}
	__syncthreads();
	// s = q kt: warp w's rows mt*16.., its column tiles nt = w>>1, +2, ...
	{
		const int mt = w & 1;
		constexpr int NT = SMAX / 8 / 2;
		float acc[NT][4];
		for (int t = 0; t < NT; t++)
			for (int x = 0; x < 4; x++) acc[t][x] = 0.0f;
		for (int k0 = 0; k0 < D; k0 += 16) {
			unsigned a[4];
			const int r = mt * 16 + gid, c = k0 + tig * 2;
			a[0] = q32[(r * LK + c) / 2];
			a[1] = q32[((r + 8) * LK + c) / 2];
			a[2] = q32[(r * LK + c + 8) / 2];
			a[3] = q32[((r + 8) * LK + c + 8) / 2];
			for (int t = 0; t < NT; t++) { // every warp the same steps (keys past S are zeros)
				const int j0 = ((w >> 1) + 2 * t) * 8;
				unsigned bb[2];
				bb[0] = kv32[((j0 + gid) * LK + c) / 2];
				bb[1] = kv32[((j0 + gid) * LK + c + 8) / 2];
				vf_mma<BF>(acc[t], a, bb);
			}
		}
		for (int t = 0; t < NT; t++) {
			const int j0 = ((w >> 1) + 2 * t) * 8;
			if (j0 >= S) continue;
			for (int x = 0; x < 4; x++) {
				const int r = mt * 16 + gid + (x >> 1) * 8, j = j0 + tig * 2 + (x & 1), i = q0 + r;
				if (j >= S) continue;
				float s = vx_canon(acc[t][x]);
				if (op == 1) s = __fdiv_rn(s, scale);
				if (op == 2) s = __fmul_rn(s, scale);
				if (mask && i < S) s = __fadd_rn(s, mask[mb * b + mh * h + mi * i + mj * j]);
				ss[r * LS + j] = s;
			}
		}
	}
	__syncthreads();
	// V as [d][j], over K (no longer read); keys from S to Sp are zeros.
	const int Sp = (S + 15) & ~15;
	for (int e = tid; e < Sp / 2 * D; e += VA_THREADS) {
		int d = e % D, j = e / D * 2;
		float lo = j < S ? v[j * L.v[2] + d * L.v[3]] : 0.0f, hi = j + 1 < S ? v[(j + 1) * L.v[2] + d * L.v[3]] : 0.0f;
		kv32[(d * LV + j) / 2] = vf_pack<BF>(lo, hi);
	}
	if (tid < VA_BQ) {
		const float* sr = ss + tid * LS;
		float mx = sr[0];
		for (int j = 1; j < S; j++) {
			float x = sr[j];
			if (x > mx || (x != x && mx == mx)) mx = x;
		}
		rmax[tid] = mx;
	}
	__syncthreads();
	for (int e = tid; e < VA_BQ * S; e += VA_THREADS) {
		int r = e / S, j = e % S;
		ss[r * LS + j] = vx_exp(__fsub_rn(ss[r * LS + j], rmax[r]));
	}
	__syncthreads();
	if (tid < VA_BQ) {
		const float* sr = ss + tid * LS;
		float s = 0.0f;
		for (int j = 0; j < S; j++) s = __fadd_rn(s, sr[j]);
		rsum[tid] = s;
	}
	__syncthreads();
	// p = e / sum, packed into the first half of each row (read first,
	// then written: the halves overlap the e).
	constexpr int NP = VA_BQ * SMAX / 2 / VA_THREADS;
	unsigned pk[NP];
	for (int x = 0; x < NP; x++) {
		int e = tid + x * VA_THREADS, r = e / (SMAX / 2), j = e % (SMAX / 2) * 2;
		float lo = 0.0f, hi = 0.0f;
		if (q0 + r < S) {
			if (j < S) lo = __fdiv_rn(ss[r * LS + j], rsum[r]);
			if (j + 1 < S) hi = __fdiv_rn(ss[r * LS + j + 1], rsum[r]);
		}
		pk[x] = vf_pack<BF>(lo, hi);
	}
	__syncthreads();
	unsigned* p32 = (unsigned*)ss; // row r's pair j/2 at r*LS + j/2
	for (int x = 0; x < NP; x++) {
		int e = tid + x * VA_THREADS, r = e / (SMAX / 2), j = e % (SMAX / 2) * 2;
		p32[r * LS + j / 2] = pk[x];
	}
	__syncthreads();
	// y = p v: warp w's rows mt*16.., its column tiles (w>>1)*NT2...
	{
		const int mt = w & 1;
		constexpr int NT2 = D / 8 / 2;
		float acc[NT2][4];
		for (int t = 0; t < NT2; t++)
			for (int x = 0; x < 4; x++) acc[t][x] = 0.0f;
		for (int k0 = 0; k0 < Sp; k0 += 16) {
			unsigned a[4];
			const int r = mt * 16 + gid, c = k0 + tig * 2;
			a[0] = p32[r * LS + c / 2];
			a[1] = p32[(r + 8) * LS + c / 2];
			a[2] = p32[r * LS + (c + 8) / 2];
			a[3] = p32[(r + 8) * LS + (c + 8) / 2];
			for (int t = 0; t < NT2; t++) {
				const int d0 = ((w >> 1) * NT2 + t) * 8;
				unsigned bb[2];
				bb[0] = kv32[((d0 + gid) * LV + c) / 2];
				bb[1] = kv32[((d0 + gid) * LV + c + 8) / 2];
				vf_mma<BF>(acc[t], a, bb);
			}
		}
		for (int t = 0; t < NT2; t++) {
			const int d0 = ((w >> 1) * NT2 + t) * 8;
			for (int x = 0; x < 4; x += 2) {
				const int r = mt * 16 + gid + (x >> 1) * 8, i = q0 + r, d = d0 + tig * 2;
				if (i < S) {
					y[i * L.y[2] + d * L.y[3]] = vx_canon(acc[t][x]);
					y[i * L.y[2] + (d + 1) * L.y[3]] = vx_canon(acc[t][x + 1]);
				}
			}
		}
	}
}

#define VA_ENTRY(NAME, BF, D, SMAX)                                                                                              \
	extern "C" __global__ void __launch_bounds__(VA_THREADS) NAME(const float* __restrict__ q, const float* __restrict__ kt,     \
		const float* __restrict__ v, const float* __restrict__ mask, float* __restrict__ y, int S, int H, int op, float scale, \
		i64 mb, i64 mh, i64 mi, i64 mj, const va_lay L) {                                                                      \
		va_attention<BF, D, SMAX>(q, kt, v, mask, y, S, H, op, scale, mb, mh, mi, mj, L);                                      \
	}

VA_ENTRY(va_f16_d64_s128, false, 64, 128)
VA_ENTRY(va_f16_d64_s64, false, 64, 64)
VA_ENTRY(va_f16_d32_s128, false, 32, 128)
VA_ENTRY(va_f16_d32_s64, false, 32, 64)
VA_ENTRY(va_bf16_d64_s128, true, 64, 128)
VA_ENTRY(va_bf16_d64_s64, true, 64, 64)
VA_ENTRY(va_bf16_d32_s128, true, 32, 128)
VA_ENTRY(va_bf16_d32_s64, true, 32, 64)

// va_layernorm is vx_layernorm's arithmetic, every operation in the same
// order (so the exact plan's bits: the layer stays exact), staged for the
// GPU: one warp per row loads it into shared memory (coalesced), lane 0
// runs the two sequential chains (the sum, m = s/D, the chain
// q = fma(x-m, x-m, q), inv = 1/sqrt(q/D + eps)) from there, then the warp
// writes y = ((x-m)*inv)*scale (+ bias), NaN canonical. vx_layernorm runs
// a row per thread from global memory (2 blocks of 64 threads for
// BERT-base's 128 tokens at batch 1). D <= VA_LN_MAXD.
#define VA_LN_MAXD 1024
#define VA_LN_ROWS 4 // rows (warps) per block

extern "C" __global__ void __launch_bounds__(32 * VA_LN_ROWS) va_layernorm(const float* __restrict__ x, const float* __restrict__ scale,
	const float* __restrict__ bias, float eps, float* __restrict__ y, i64 rows, int D) {
	__shared__ float buf[VA_LN_ROWS][VA_LN_MAXD];
	__shared__ float stat[VA_LN_ROWS][2];
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	const i64 r = (i64)blockIdx.x * VA_LN_ROWS + w;
	if (r >= rows) return;
	const float* xr = x + r * D;
	float* yr = y + r * D;
	float* b = buf[w];
	for (int i = lane; i < D; i += 32) b[i] = xr[i];
	__syncwarp();
	if (lane == 0) {
		float s = 0.0f;
		for (int i = 0; i < D; i++) s = __fadd_rn(s, b[i]);
		float m = __fdiv_rn(s, (float)D);
		float q = 0.0f;
		for (int i = 0; i < D; i++) {
			float d = __fsub_rn(b[i], m);
			q = __fmaf_rn(d, d, q);
		}
		stat[w][0] = m;
		stat[w][1] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(q, (float)D), eps)));
	}
	__syncwarp();
	const float m = stat[w][0], iv = stat[w][1];
	for (int i = lane; i < D; i += 32) {
		float v = __fmul_rn(__fmul_rn(__fsub_rn(b[i], m), iv), scale[i]);
		if (bias) v = __fadd_rn(v, bias[i]);
		yr[i] = vx_canon(v);
	}
}
