// fast.cu: vouch's fast-mode tensor-core kernels (issue 19). Not the CPU's
// bits: each output is a chain of mma.sync m16n8k16 steps (FP16 or BF16
// operands, FP32 accumulation), but the same chain whatever the batch, the
// tile, the grid or the stream:
//
//   - an output element's reduction is the sequence of k16 steps
//     k = 0, 16, 32, ... of the layer's padded reduction length Kp, each
//     one mma.sync into the same FP32 accumulator, in that order; no
//     split-K, no atomics, no reduction across threads;
//   - the operands of a step are the layer's weights (converted once, at
//     upload, round to nearest even) and the input values converted with
//     cvt.rn when staged into shared memory: a value's conversion depends
//     on the value alone;
//   - the epilogue is FP32 and elementwise: acc (NaN canonical), + bias,
//     + residual, then the activation, as the exact kernels order them.
//
// So a row computed alone and the same row in a batch of any size have the
// same bits, and so do two runs. The tile (BM x BN) is chosen per layer at
// build time (package cuda/fast); it changes which block computes an
// output, never the output's chain.
//
// Layout: C[m][col] = sum_k A[m][k] * B[k][col], m an output channel (or
// a Gemm's output feature), col an (image, output pixel) pair of the
// batch-folded convolution (or a Gemm's row); A the weights as [Mp][Kp]
// 16-bit values (Mp a multiple of 128, Kp of 32, zero padded); B gathered
// from the NCHW float32 input (mode 0: any kernel, mode 1: 1x1 without
// padding, mode 3: 1x1 with stride 1 and H*W a multiple of 4, four
// columns per 16-byte load; mode 2: rows of k-contiguous floats, a Gemm's input with K a
// multiple of 4); mode 0 decodes a reduction index with the exact kernels'
// tap table). 256 threads: 8 warps as 2 (m) x 4 (col), each warp a
// (BM/2) x (BN/4) block of m16n8 tiles. Shared memory holds A as [m][k]
// and B as [col][k] (k contiguous: a 32-bit word is the pair of 16-bit
// values k, k+1 that one fragment register takes). A (already 16-bit in
// global memory) comes by cp.async into a ring of VF_SA(BM, BN) stages,
// issued that many k blocks ahead; B is converted through registers,
// double buffered: the next k block is loaded while the current one is
// multiplied. Mode 0's tap-table entries of a k block are loaded two
// k blocks ahead into shared memory, so a gather waits for one load, not
// two. The staging changes when a value arrives, never which values an
// output's chain takes or in what order.

#define VF_BK 32
#define VF_LD (VF_BK + 8) // row stride of the shared tiles, in 16-bit values
// VF_SA: A's cp.async stages for a BM x BN tile, as many (at most 4) as fit
// in 48 KiB of static shared memory beside B's two buffers and the taps.
#define VF_SA_FIT(BM, BN) ((49152 - 2 * (BN) * VF_LD * 2 - 4 * VF_BK * 16) / ((BM) * VF_LD * 2))
#define VF_SA(BM, BN) (VF_SA_FIT(BM, BN) > 4 ? 4 : VF_SA_FIT(BM, BN))

// The fragment helpers: cvt packs two floats into 16-bit pairs (lo in the
// low half, the first of a fragment register's two elements), mma is one
// m16n8k16 step c += a * b. The CPU emulation test defines VF_EMU and its
// own versions.
#ifndef VF_EMU
__device__ __forceinline__ unsigned vf_pack_f16(float lo, float hi) {
	unsigned r;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}
__device__ __forceinline__ unsigned vf_pack_bf16(float lo, float hi) {
	unsigned r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}
__device__ __forceinline__ void vf_mma_f16(float* c, const unsigned* a, const unsigned* b) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void vf_mma_bf16(float* c, const unsigned* a, const unsigned* b) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// ldmatrix: four (x4) or two (x2) 8x8 matrices of 16-bit values from
// shared memory, lane 8*j + r giving row r of matrix j; register j of lane
// l holds row l/4, elements 2*(l%4) and +1 of matrix j: an mma fragment.
__device__ __forceinline__ void vf_ldm4(unsigned* d, const unsigned short* p) {
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(a));
}
__device__ __forceinline__ void vf_ldm2(unsigned* d, const unsigned short* p) {
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(d[0]), "=r"(d[1]) : "r"(a));
}
// cp.async: 16 bytes global -> shared (L2 only), the groups committed and
// waited for (vf_wait<N>: all but the newest N groups of this thread done).
__device__ __forceinline__ void vf_cp16(void* s, const void* g) {
	unsigned a = (unsigned)__cvta_generic_to_shared(s);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(g));
}
__device__ __forceinline__ void vf_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void vf_wait() {
	asm volatile("cp.async.wait_group %0;" ::"n"(N));
}
#endif

template <bool BF>
__device__ __forceinline__ unsigned vf_pack(float lo, float hi) {
	return BF ? vf_pack_bf16(lo, hi) : vf_pack_f16(lo, hi);
}

template <bool BF>
__device__ __forceinline__ void vf_mma(float* c, const unsigned* a, const unsigned* b) {
	if (BF)
		vf_mma_bf16(c, a, b);
	else
		vf_mma_f16(c, a, b);
}

// vf_geom: the batch-folded convolution. A Gemm is the 1x1 convolution of
// N images of C = K channels and one pixel.
struct vf_geom {
	int C, H, W, M, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW;
	int N;  // images (a Gemm's rows)
	int Kp; // the weights' row length: C*KH*KW rounded up to VF_BK
};

__device__ __forceinline__ float vf_act(float v, int act, float lo, float hi) {
	if ((act & 1) && v < 0.0f) v = 0.0f;
	if ((act & 2) && v < lo) v = lo;
	if ((act & 4) && v > hi) v = hi;
	return v;
}

// vf_nopost: the epilogue's last step for the entry points here (none).
// An image that joins fast.cu after the exact kernels may instantiate
// vf_tile with another (fast_gelu.cu: GELU, the exact pass's function).
struct vf_nopost {
	__device__ static __forceinline__ float f(float v) { return v; }
};

template <int BM, int BN, int MODE, bool BF, class POST = vf_nopost>
__device__ __forceinline__ void vf_tile(const vf_geom& g, const float* __restrict__ x, const unsigned short* __restrict__ w,
	const int4* __restrict__ taps, const float* __restrict__ bias, const float* __restrict__ res, int act, float lo, float hi, float* __restrict__ y) {
	constexpr int WM = BM / 2, WN = BN / 4;  // a warp's block
	constexpr int MI = WM / 16, NI = WN / 8; // its m16n8 tiles
	constexpr int LA = BM * 4 / 256;         // 16-byte A chunks per thread per k block
	constexpr int TR = 256 / BN;             // mode 0/1: thread rows over a B block's k pairs
	constexpr int LB = (VF_BK / 2) / TR;     // mode 0/1: k pairs per thread
	constexpr int LR = BN * 8 / 256;         // mode 2: float4 chunks per thread
	constexpr int VG = BN / 4;               // mode 3: groups of 4 columns
	constexpr int VR = 256 / VG;             // mode 3: thread rows over the k pairs
	constexpr int LV = VR >= 16 ? 1 : 16 / VR; // mode 3: k pairs per thread
	constexpr int SA = VF_SA(BM, BN);        // A's stages
	static_assert(MODE != 3 || BN >= 64, "mode 3 takes 64 columns or more");
	static_assert(SA >= 2, "two A stages at least");
	__shared__ __align__(16) unsigned short As[SA][BM][VF_LD];
	__shared__ __align__(16) unsigned short Bs[2][BN][VF_LD];
	__shared__ __align__(16) int4 Ts[4][MODE == 0 ? VF_BK : 1]; // mode 0: the taps of k blocks kb, in slot kb & 3
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp & 1, wn = warp >> 1;
	const int gid = lane >> 2, tig = lane & 3;
	const int K = g.C * g.KH * g.KW, P = g.OH * g.OW;
	const long long HW = (long long)g.H * g.W;
	const long long NP = (long long)g.N * P;
	const int m0 = blockIdx.y * BM;
	const long long c0 = (long long)blockIdx.x * BN;
	const unsigned short* wb = w + (long long)m0 * g.Kp;

	// Modes 0 and 1: this thread's column and the k pairs tid/BN + TR*l.
	const int bcol = tid % BN, bkp = tid / BN;
	const long long jc = c0 + bcol;
	const bool jok = jc < NP;
	const int bn = jok ? (int)(jc / P) : 0;
	const int bp = jok ? (int)(jc - (long long)bn * P) : 0;
	const int oh = bp / g.OW, ow = bp - oh * g.OW;
	const int ih0 = oh * g.SH - g.PH, iw0 = ow * g.SW - g.PW;
	const int xo = ih0 * g.W + iw0;
	const float* xb = x + (long long)bn * g.C * HW + (MODE == 1 ? xo : 0);

	// Mode 3 (1x1, stride 1, H*W a multiple of 4): four adjacent columns
	// of one image are four adjacent floats of a channel.
	const int vcol = (tid % VG) * 4, vkp = tid / VG;
	const long long vj = c0 + vcol;
	const bool vok = MODE == 3 && vj < NP && vkp < 16;
	const int vn = vok ? (int)(vj / P) : 0;
	const float* vb = x + (long long)vn * g.C * HW + (vj - (long long)vn * P);
	// B's values as loaded (converted when stored, so that no instruction
	// waits for a load before the multiply): the next k block's, to store,
	// and the one after it, in flight. The loop alternates their roles.
	constexpr int NR = MODE == 2 ? LR * 4 : MODE == 3 ? LV * 8 : LB * 2;
	float rb[NR], rn[NR];

	// issue: A's k block at k0 into stage st, by cp.async.
	auto issue = [&](int k0, int st) {
#pragma unroll
		for (int l = 0; l < LA; l++) {
			int e = tid + l * 256, r = e >> 2, ch = e & 3;
			vf_cp16(&As[st][r][ch * 8], wb + (long long)r * g.Kp + k0 + ch * 8);
		}
	};
	auto load = [&](int k0, float* rb) {
		if (MODE == 3) {
#pragma unroll
			for (int l = 0; l < LV; l++) {
				int k = k0 + 2 * (vkp + VR * l);
				float4 u = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v = u;
				if (vok && k < K) u = *(const float4*)(vb + (long long)k * HW);
				if (vok && k + 1 < K) v = *(const float4*)(vb + (long long)(k + 1) * HW);
				rb[8 * l] = u.x, rb[8 * l + 1] = u.y, rb[8 * l + 2] = u.z, rb[8 * l + 3] = u.w;
				rb[8 * l + 4] = v.x, rb[8 * l + 5] = v.y, rb[8 * l + 6] = v.z, rb[8 * l + 7] = v.w;
			}
		} else if (MODE == 2) {
#pragma unroll
			for (int l = 0; l < LR; l++) {
				int e = tid + l * 256, r = e >> 3, ch = e & 7;
				long long row = c0 + r;
				int k = k0 + ch * 4;
				float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
				if (row < NP && k < K) v = *(const float4*)(x + row * K + k);
				rb[4 * l] = v.x, rb[4 * l + 1] = v.y, rb[4 * l + 2] = v.z, rb[4 * l + 3] = v.w;
			}
		} else {
#pragma unroll
			for (int l = 0; l < LB; l++) {
				int k = k0 + 2 * (bkp + TR * l);
				float v[2] = {0.0f, 0.0f};
#pragma unroll
				for (int h = 0; h < 2; h++) {
					int kk = k + h;
					if (!jok || kk >= K) continue;
					if (MODE == 1) {
						v[h] = xb[(long long)kk * HW];
					} else {
						// taps[k] = {c*H*W + kh*dh*W + kw*dw, kh*dh, kw*dw}: one
						// load, the same for every thread of the warp.
						const int4 t = Ts[(k0 / VF_BK) & 3][kk - k0];
						int ih = ih0 + t.y, iw = iw0 + t.z;
						if ((unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W) v[h] = xb[t.x + xo];
					}
				}
				rb[2 * l] = v[0], rb[2 * l + 1] = v[1];
			}
		}
	};
	auto store = [&](int buf, const float* rb) {
		if (MODE == 3) {
			if (vkp < 16) {
#pragma unroll
				for (int l = 0; l < LV; l++)
#pragma unroll
					for (int c = 0; c < 4; c++) *(unsigned*)&Bs[buf][vcol + c][2 * (vkp + VR * l)] = vf_pack<BF>(rb[8 * l + c], rb[8 * l + 4 + c]);
			}
		} else if (MODE == 2) {
#pragma unroll
			for (int l = 0; l < LR; l++) {
				int e = tid + l * 256, r = e >> 3, ch = e & 7;
				*(uint2*)&Bs[buf][r][ch * 4] = make_uint2(vf_pack<BF>(rb[4 * l], rb[4 * l + 1]), vf_pack<BF>(rb[4 * l + 2], rb[4 * l + 3]));
			}
		} else {
#pragma unroll
			for (int l = 0; l < LB; l++) *(unsigned*)&Bs[buf][bcol][2 * (bkp + TR * l)] = vf_pack<BF>(rb[2 * l], rb[2 * l + 1]);
		}
	};

	float acc[MI][NI][4];
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NI; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;

	// The pipeline. Before iteration kt: A's blocks up to kt + SA - 2 issued
	// (one commit group each, empty past the end), block kt's A landed, its
	// B stored in Bs[kt & 1], block kt + 1's B in registers, the taps of
	// blocks kt .. kt + 2 in Ts and those of kt + 3 in a register. In it:
	// issue A's block kt + SA - 1 into the stage block kt - 1 left, load B's
	// block kt + 2 and the taps of kt + 4 into registers, multiply block kt,
	// store block kt + 1's B and kt + 3's taps, wait for A's block kt + 1.
	// A load has two iterations to land, not one: at batch 1 a layer has
	// few blocks, each a long k loop whose steps would otherwise wait a
	// global load's latency each.
	const int KT = g.Kp / VF_BK;
	int4 ta = make_int4(0, 0, 0, 0), tb = ta; // taps in flight (mode 0, tid < VF_BK)
	auto ktaps = [&](int kt) { // a tap-table entry of block kt (tid < VF_BK)
		int k = kt * VF_BK + tid;
		return kt < KT && k < K ? taps[k] : make_int4(0, 0, 0, 0);
	};
#pragma unroll
	for (int s = 0; s < SA - 1; s++) {
		if (s < KT) issue(s * VF_BK, s);
		vf_commit();
	}
	if (MODE == 0 && tid < VF_BK) {
		Ts[0][tid] = ktaps(0);
		Ts[1][tid] = ktaps(1);
		Ts[2][tid] = ktaps(2);
		tb = ktaps(3);
	}
	__syncthreads();
	load(0, rb);
	store(0, rb);
	if (KT > 1) load(VF_BK, rb);
	vf_wait<SA - 2>();
	__syncthreads();
	// step: iteration kt, B's block kt + 2 loaded into ld, block kt + 1
	// stored from st; the taps of block kt + 4 loaded into tl, those of
	// kt + 3 stored from ts.
	auto step = [&](int kt, float* ld, const float* st, int4& tl, const int4& ts) {
		const int cur = kt & 1, sa = kt % SA;
		if (kt + SA - 1 < KT) issue((kt + SA - 1) * VF_BK, (kt + SA - 1) % SA);
		vf_commit();
		if (MODE == 0 && tid < VF_BK) tl = ktaps(kt + 4);
		if (kt + 2 < KT) load((kt + 2) * VF_BK, ld);
#pragma unroll
		for (int kk = 0; kk < VF_BK; kk += 16) {
			// ldmatrix: A's matrices (rows 0-7, k 0-7), (8-15, 0-7),
			// (0-7, 8-15), (8-15, 8-15) are fragment registers a0..a3;
			// B's (columns 0-7, k 0-7), (0-7, 8-15) of tile j, then j + 1.
			unsigned a[MI][4], b[NI][2];
			const int lr = lane & 7, lj = lane >> 3;
#pragma unroll
			for (int i = 0; i < MI; i++) vf_ldm4(a[i], &As[sa][wm * WM + i * 16 + lr + (lj & 1) * 8][kk + (lj >> 1) * 8]);
#pragma unroll
			for (int j = 0; j + 1 < NI; j += 2) vf_ldm4(&b[j][0], &Bs[cur][wn * WN + (j + (lj >> 1)) * 8 + lr][kk + (lj & 1) * 8]);
			if (NI & 1) vf_ldm2(b[NI - 1], &Bs[cur][wn * WN + (NI - 1) * 8 + lr][kk + (lj & 1) * 8]);
#pragma unroll
			for (int i = 0; i < MI; i++)
#pragma unroll
				for (int j = 0; j < NI; j++) vf_mma<BF>(acc[i][j], a[i], b[j]);
		}
		if (kt + 1 < KT) store(cur ^ 1, st);
		// block kt + 3's taps, into the slot of block kt - 1, last read by
		// iteration kt - 3's load
		if (MODE == 0 && tid < VF_BK) Ts[(kt + 3) & 3][tid] = ts;
		vf_wait<SA - 2>();
		__syncthreads();
	};
	int kt = 0;
	for (; kt + 1 < KT; kt += 2) {
		step(kt, rn, rb, ta, tb);
		step(kt + 1, rb, rn, tb, ta);
	}
	if (kt < KT) step(kt, rn, rb, ta, tb);

	// Epilogue, through shared memory (As, free now: the loop's last
	// __syncthreads follows every read of it, and the ring's pending
	// cp.async groups are empty). For each of its MI row tiles a warp
	// stages its 16 x WN accumulators (c0, c1: row gid, columns 2*tig and
	// 2*tig + 1 of an m16n8 tile; c2, c3: row gid + 8), then writes them
	// with a lane a column: adjacent lanes write adjacent pixels of a
	// channel, whole sectors, and a lane's column (its image and pixel, one
	// division) is the same for every row. Each output's operations are
	// the same as before: acc (NaN canonical), + bias, + residual, act.
	constexpr int ES = WN == 8 ? 24 : WN + 8; // staged row stride, in floats
	constexpr int ER = 32 / WN;               // rows written per pass
	static_assert(8 * 16 * ES * 4 <= (int)sizeof(As), "the epilogue's staging fits in As");
	vf_wait<0>();
	float* Cs = reinterpret_cast<float*>(&As[0][0][0]) + warp * 16 * ES;
	const int ec = lane % WN, er = lane / WN;
	const long long ecol = c0 + wn * WN + ec;
	const bool eok = ecol < NP;
	const long long en = eok ? ecol / P : 0;
	const long long eo = en * g.M * P + (ecol - en * P); // + m * P: output (n, m, pixel)
#pragma unroll
	for (int i = 0; i < MI; i++) {
#pragma unroll
		for (int j = 0; j < NI; j++)
#pragma unroll
			for (int h = 0; h < 2; h++) *(float2*)&Cs[(gid + h * 8) * ES + j * 8 + tig * 2] = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
		__syncwarp();
#pragma unroll
		for (int rr = 0; rr < 16 / ER; rr++) {
			const int r = rr * ER + er, m = m0 + wm * WM + i * 16 + r;
			if (eok && m < g.M) {
				long long o = eo + (long long)m * P;
				float v = Cs[r * ES + ec];
				if (v != v) v = __int_as_float(0x7fc00000);
				if (bias) v = v + bias[m];
				if (res) v = v + res[o];
				y[o] = POST::f(vf_act(v, act, lo, hi));
			}
		}
		__syncwarp();
	}
}

#define VF_ENTRY(NAME, BM, BN, MODE, BF) \
	extern "C" __global__ void __launch_bounds__(256) NAME(const vf_geom g, const float* __restrict__ x, \
		const unsigned short* __restrict__ w, const int4* __restrict__ taps, const float* __restrict__ bias, \
		const float* __restrict__ res, int act, float lo, float hi, float* __restrict__ y) { \
		vf_tile<BM, BN, MODE, BF>(g, x, w, taps, bias, res, act, lo, hi, y); \
	}

#define VF_WIDE(P, MODE, BF) \
	VF_ENTRY(vf_##P##_m##MODE##_128x128, 128, 128, MODE, BF) \
	VF_ENTRY(vf_##P##_m##MODE##_128x64, 128, 64, MODE, BF) \
	VF_ENTRY(vf_##P##_m##MODE##_64x64, 64, 64, MODE, BF)

#define VF_TILES(P, MODE, BF) \
	VF_ENTRY(vf_##P##_m##MODE##_128x128, 128, 128, MODE, BF) \
	VF_ENTRY(vf_##P##_m##MODE##_128x64, 128, 64, MODE, BF) \
	VF_ENTRY(vf_##P##_m##MODE##_64x64, 64, 64, MODE, BF) \
	VF_ENTRY(vf_##P##_m##MODE##_64x32, 64, 32, MODE, BF)

VF_TILES(f16, 0, false)
VF_TILES(f16, 1, false)
VF_TILES(f16, 2, false)
VF_WIDE(f16, 3, false)
VF_TILES(bf16, 0, true)
VF_TILES(bf16, 1, true)
VF_TILES(bf16, 2, true)
VF_WIDE(bf16, 3, true)
