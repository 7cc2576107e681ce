
// ---- Recurrent operators (rnn.cu) ---------------------------------------------
//
// RNN, GRU and LSTM as kernel/rnn's float32 path computes them (cuda/exact's
// rnn.go describes the launches; RNNGeom.Host is their model on the host):
// every gate pre-activation is one chain from the bias sum Wb[j]+Rb[j] (+0
// without B; Wbh alone for GRU's h~ block with linear_before_reset) over
// x[k]*W[j,k], k ascending (vx_rnn_proj), then on over h[k]*R[j,k], k
// ascending (vx_rnn_step, one thread per chain of a direction, batch row
// and hidden unit, over R transposed to [dirs][hidden][G]); each chain's NaN becomes
// the canonical NaN as on the CPU; then the cell's element operations in
// kernel/rnn's order.

// Activation codes (cuda/exact's RNNActOp).
#define RA_SIGMOID 0
#define RA_TANH 1
#define RA_RELU 2
#define RA_AFFINE 3
#define RA_LEAKYRELU 4
#define RA_THRESHOLDEDRELU 5
#define RA_SCALEDTANH 6
#define RA_HARDSIGMOID 7
#define RA_ELU 8
#define RA_SOFTSIGN 9
#define RA_SOFTPLUS 10

// rnn_geom is cuda/exact.RNNGeom: kind 0 RNN, 1 GRU, 2 LSTM; clip 0 for
// none; act, alpha and beta per direction (1, 2 or 3 each), direction 0's
// first.
struct rnn_geom {
	int kind, dirs, reverse, seq, batch, input, hidden, layout, lbr, coupled;
	float clip;
	int act[6];
	float alpha[6];
	float beta[6];
};

__device__ __forceinline__ int rnn_gates(const rnn_geom& g) { return g.kind == 2 ? 4 : g.kind == 1 ? 3 : 1; }

__device__ __forceinline__ int rnn_perdir(const rnn_geom& g) { return g.kind + 1; }

// rnn_xrow is X's row of step t, batch row b (layout 1: batch first).
__device__ __forceinline__ i64 rnn_xrow(const rnn_geom& g, int t, int b) {
	return g.layout ? (i64)b * g.seq + t : (i64)t * g.batch + b;
}

// rnn_yoff is Y's offset of step t, direction d, batch row b.
__device__ __forceinline__ i64 rnn_yoff(const rnn_geom& g, int t, int d, int b) {
	return g.layout ? (((i64)b * g.seq + t) * g.dirs + d) * g.hidden : (((i64)t * g.dirs + d) * g.batch + b) * g.hidden;
}

// rnn_stoff is a state's (initial_h, initial_c, Y_h, Y_c) offset of
// direction d, batch row b.
__device__ __forceinline__ i64 rnn_stoff(const rnn_geom& g, int d, int b) {
	return g.layout ? ((i64)b * g.dirs + d) * g.hidden : ((i64)d * g.batch + b) * g.hidden;
}

// rnn_clip is kernel/rnn's max(-l, min(l, v)) for l > 0 (NaN passes).
__device__ __forceinline__ float rnn_clip(float v, float l) {
	if (l > 0.0f && v == v) {
		if (v > l) return l;
		if (v < -l) return -l;
	}
	return v;
}

// rnn_act is activation i of g (kernel/rnn's activation, in float32 with
// Go's min and max: NaN passes, max(-0, 0) is +0).
__device__ float rnn_act(const rnn_geom& g, int i, float x) {
	float a = g.alpha[i], b = g.beta[i];
	switch (g.act[i]) {
	case RA_SIGMOID: return vx_sigmoid(x);
	case RA_TANH: return vx_tanh(x);
	case RA_RELU: return (x != x || x > 0.0f) ? x : 0.0f;
	case RA_AFFINE: return __fmaf_rn(a, x, b);
	case RA_LEAKYRELU: return x >= 0.0f ? x : __fmul_rn(a, x);
	case RA_THRESHOLDEDRELU: return x >= a ? x : 0.0f;
	case RA_SCALEDTANH: return __fmul_rn(a, vx_tanh(__fmul_rn(b, x)));
	case RA_HARDSIGMOID: {
		float v = __fmaf_rn(a, x, b);
		if (v != v) return v;
		if (v >= 1.0f) v = 1.0f;
		return v > 0.0f ? v : 0.0f;
	}
	case RA_ELU: return x >= 0.0f ? x : __fmul_rn(a, __fsub_rn(vx_exp(x), 1.0f));
	case RA_SOFTSIGN: return __fdiv_rn(x, __fadd_rn(1.0f, fabsf(x)));
	}
	// RA_SOFTPLUS: max(x, 0) + log(1 + exp(-|x|)).
	float m = (x == x && !(x > 0.0f)) ? 0.0f : x;
	return __fadd_rn(m, vx_log(__fadd_rn(1.0f, vx_exp(-fabsf(x)))));
}

// vx_rnn_start writes the chains' starts init [dirs][G] (Wb+Rb; Wbh for
// GRU's h~ block with linear_before_reset; +0 without B), GRU's Rbh
// [dirs][hidden] (+0 otherwise), the state hs [dirs][batch][hidden] from
// initial_h and the LSTM cell state cs from initial_c (+0 without them).
extern "C" __global__ void vx_rnn_start(rnn_geom g, const float* __restrict__ B, const float* __restrict__ h0,
	const float* __restrict__ c0, float* __restrict__ init, float* __restrict__ rbh, float* __restrict__ hs, float* __restrict__ cs) {
	int H = g.hidden, G = rnn_gates(g) * H;
	i64 nb = (i64)g.dirs * G, nr = (i64)g.dirs * H, ns = (i64)g.dirs * g.batch * H;
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < nb + nr + ns; i += (i64)gridDim.x * blockDim.x) {
		if (i < nb) {
			int d = (int)(i / G), row = (int)(i - (i64)d * G);
			float v = 0.0f;
			if (B) {
				float wb = B[(i64)d * 2 * G + row], rb = B[(i64)d * 2 * G + G + row];
				v = (g.kind == 1 && g.lbr && row >= 2 * H) ? wb : __fadd_rn(wb, rb);
			}
			init[i] = v;
		} else if (i < nb + nr) {
			i64 q = i - nb;
			int d = (int)(q / H), j = (int)(q - (i64)d * H);
			rbh[q] = (B && g.kind == 1 && g.lbr) ? B[(i64)d * 2 * G + G + 2 * H + j] : 0.0f;
		} else {
			i64 q = i - nb - nr;
			int j = (int)(q % H);
			i64 db = q / H;
			int b = (int)(db % g.batch), d = (int)(db / g.batch);
			i64 o = rnn_stoff(g, d, b) + j;
			hs[q] = h0 ? h0[o] : 0.0f;
			if (cs) cs[q] = c0 ? c0[o] : 0.0f;
		}
	}
}

// vx_rnn_proj sets pre[d][r][j] (r < M = seq*batch, X's rows; j < N = G)
// to the chain from init[d][j] over x[r][k]*W[d][j][k], k < K ascending,
// canonical NaN: kernel/rnn's input projection. 64x64 tiles as vx_sgemm's
// (tile_step), blockIdx.z the direction; the K tail runs its exact count.
extern "C" __global__ void __launch_bounds__(256) vx_rnn_proj(int M, int N, int K, const float* __restrict__ x,
	const float* __restrict__ w, const float* __restrict__ init, float* __restrict__ pre) {
	__shared__ float As[GK][GT + 4];
	__shared__ float Bs[GK][GT + 4];
	i64 d = blockIdx.z;
	w += d * N * K;
	init += d * N;
	pre += d * M * N;
	int tid = threadIdx.x;
	int tx = tid & 15, ty = tid >> 4;
	int m0 = blockIdx.y * GT, n0 = blockIdx.x * GT;
	float acc[4][4];
#pragma unroll
	for (int j = 0; j < 4; j++) {
		int gj = n0 + tx + 16 * j;
		float v = gj < N ? init[gj] : 0.0f;
#pragma unroll
		for (int i = 0; i < 4; i++) acc[i][j] = v;
	}
	for (int k0 = 0; k0 < K; k0 += GK) {
#pragma unroll
		for (int l = 0; l < 4; l++) {
			int e = tid + l * 256;
			int r = e >> 4, kk = e & 15; // 64 rows (of X, of W) by 16 k
			int gi = m0 + r, gk = k0 + kk;
			As[kk][r] = (gi < M && gk < K) ? x[(i64)gi * K + gk] : 0.0f;
			int gj = n0 + r;
			Bs[kk][r] = (gj < N && gk < K) ? w[(i64)gj * K + gk] : 0.0f;
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
			if (gj < N) pre[(i64)gi * N + gj] = vx_canon(acc[i][j]);
		}
	}
}

// rnn_chain continues acc over h[k]*rt[k*G + row], k < H ascending, then
// makes a NaN canonical.
__device__ __forceinline__ float rnn_chain(const float* __restrict__ h, const float* __restrict__ rt, int H, int G, int row, float acc) {
#pragma unroll 4
	for (int k = 0; k < H; k++) acc = __fmaf_rn(h[k], rt[(i64)k * G + row], acc);
	return vx_canon(acc);
}

// vx_rnn_step advances every (direction, batch row) by step s. A block
// is 32 hidden units of one row b (blockIdx.y) and direction d
// (blockIdx.z) by the unit's chains (threadIdx.y = q: RNN 1, GRU 3 (z, r
// and, with linear_before_reset, h~'s recurrent chain; without it 2),
// LSTM 4):
// thread (x, q) continues chain q of unit j = blockIdx.x*32 + x from pre
// (the input chains of X's row at the step's time: s forward, L-1-s
// backward; GRU's h~ with linear_before_reset from Rbh) over hin, k
// ascending; after the block's barrier, thread (x, 0) does kernel/rnn's
// element operations for unit j and writes hout (and Y). A row past its
// length L copies its state. GRU without linear_before_reset stops after
// z and r (zb, rh = r*h): vx_rnn_gru_hh finishes the step.
extern "C" __global__ void __launch_bounds__(128) vx_rnn_step(rnn_geom g, int s, const int* __restrict__ lens,
	const float* __restrict__ pre, const float* __restrict__ rt, const float* __restrict__ rbh, const float* __restrict__ peep,
	const float* __restrict__ hin, float* __restrict__ hout, float* __restrict__ cs, float* __restrict__ zb, float* __restrict__ rh,
	float* __restrict__ y) {
	__shared__ float chains[4][32];
	int H = g.hidden;
	int x = threadIdx.x, q = threadIdx.y;
	int j = blockIdx.x * 32 + x, b = blockIdx.y, d = blockIdx.z;
	int G = rnn_gates(g) * H;
	int L = lens ? lens[b] : g.seq;
	i64 so = ((i64)d * g.batch + b) * H;
	const float* h = hin + so;
	bool two = g.kind == 1 && !g.lbr;
	if (s >= L) {
		// The whole block's row: no thread reaches the barrier.
		if (q == 0 && j < H && !two) hout[so + j] = h[j];
		return;
	}
	int t = (g.reverse || d == 1) ? L - 1 - s : s;
	const float* p = pre + ((i64)d * g.seq * g.batch + rnn_xrow(g, t, b)) * G;
	if (j < H) {
		int row = q * H + j;
		float start = (g.kind == 1 && q == 2) ? rbh[(i64)d * H + j] : p[row];
		chains[q][x] = rnn_chain(h, rt + (i64)d * H * G, H, G, row, start);
	}
	__syncthreads();
	if (q != 0 || j >= H) return;
	int a0 = d * rnn_perdir(g);
	float hn;
	if (g.kind == 0) {
		hn = rnn_act(g, a0, rnn_clip(chains[0][x], g.clip));
	} else if (g.kind == 1) {
		float z = rnn_act(g, a0, rnn_clip(chains[0][x], g.clip));
		float rg = rnn_act(g, a0, rnn_clip(chains[1][x], g.clip));
		if (two) {
			zb[so + j] = z;
			rh[so + j] = __fmul_rn(rg, h[j]);
			return;
		}
		float hh = rnn_act(g, a0 + 1, rnn_clip(__fmaf_rn(rg, chains[2][x], p[2 * H + j]), g.clip));
		hn = __fmaf_rn(z, h[j], __fmul_rn(__fsub_rn(1.0f, z), hh));
	} else {
		float ai = chains[0][x], ao = chains[1][x], af = chains[2][x], ac = chains[3][x];
		float c = cs[so + j];
		const float* pp = peep ? peep + (i64)d * 3 * H : 0;
		if (pp) {
			ai = __fmaf_rn(pp[j], c, ai);
			af = __fmaf_rn(pp[2 * H + j], c, af);
		}
		ai = rnn_clip(ai, g.clip);
		af = rnn_clip(af, g.clip);
		ac = rnn_clip(ac, g.clip);
		float ig = rnn_act(g, a0, ai), fg = rnn_act(g, a0, af);
		if (g.coupled) fg = __fsub_rn(1.0f, ig);
		float cc = rnn_act(g, a0 + 1, ac);
		float nc = __fmaf_rn(fg, c, __fmul_rn(ig, cc));
		if (pp) ao = __fmaf_rn(pp[H + j], nc, ao);
		float og = rnn_act(g, a0, rnn_clip(ao, g.clip));
		hn = __fmul_rn(og, rnn_act(g, a0 + 2, nc));
		cs[so + j] = nc;
	}
	hout[so + j] = hn;
	if (y) y[rnn_yoff(g, t, d, b) + j] = hn;
}

// vx_rnn_gru_hh finishes a GRU step without linear_before_reset: unit j's
// h~ chain continues its input chain over rh[k]*Rh[j][k] (rh = r*h of
// every unit), then h~ = g(clip(chain)) and h = FMA(z, h, (1-z)*h~). A
// row past its length copies its state.
extern "C" __global__ void __launch_bounds__(128) vx_rnn_gru_hh(rnn_geom g, int s, const int* __restrict__ lens,
	const float* __restrict__ pre, const float* __restrict__ rt, const float* __restrict__ hin, float* __restrict__ hout,
	const float* __restrict__ zb, const float* __restrict__ rh, float* __restrict__ y) {
	int H = g.hidden;
	int j = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y, d = blockIdx.z;
	if (j >= H) return;
	int G = 3 * H;
	int L = lens ? lens[b] : g.seq;
	i64 so = ((i64)d * g.batch + b) * H;
	const float* h = hin + so;
	if (s >= L) {
		hout[so + j] = h[j];
		return;
	}
	int t = (g.reverse || d == 1) ? L - 1 - s : s;
	const float* p = pre + ((i64)d * g.seq * g.batch + rnn_xrow(g, t, b)) * G;
	float acc = rnn_chain(rh + so, rt + (i64)d * H * G, H, G, 2 * H + j, p[2 * H + j]);
	float hh = rnn_act(g, d * 2 + 1, rnn_clip(acc, g.clip));
	float z = zb[so + j];
	float hn = __fmaf_rn(z, h[j], __fmul_rn(__fsub_rn(1.0f, z), hh));
	hout[so + j] = hn;
	if (y) y[rnn_yoff(g, t, d, b) + j] = hn;
}

// vx_rnn_final writes Y_h from the last state hs and Y_c from cs (either
// may be null), in the states' layout.
extern "C" __global__ void vx_rnn_final(rnn_geom g, const float* __restrict__ hs, const float* __restrict__ cs,
	float* __restrict__ yh, float* __restrict__ yc) {
	int H = g.hidden;
	i64 n = (i64)g.dirs * g.batch * H;
	for (i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (i64)gridDim.x * blockDim.x) {
		int j = (int)(q % H);
		i64 db = q / H;
		int b = (int)(db % g.batch), d = (int)(db / g.batch);
		i64 o = rnn_stoff(g, d, b) + j;
		if (yh) yh[o] = hs[q];
		if (yc && cs) yc[o] = cs[q];
	}
}
