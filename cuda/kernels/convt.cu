// convt.cu: ConvTranspose in exact mode (kernel/nn's runConvTranspose;
// 1-D and 2-D as 3-D with unit leading dimensions). The CPU computes one of two chains per output,
// and these kernels perform the same one:
//
//   - the general case (convGEMM with the transposed tap relation): the
//     chain over the group's (c, kd, kh, kw) ascending from +0, a tap that
//     hits no input (o + pad - k*dil not a multiple of the stride, or
//     outside the input) FMA(w, 0, acc);
//   - the tiled case (convTransposeTiled: 2-D, one group, stride equal to
//     the kernel, dilation 1, no pads, output = input * kernel) when every
//     weight is finite: the chain over c of the one live tap only.
//
// Then NaN is the canonical NaN, and y = acc + bias[m] when there is a
// bias (addBias and the tiled scatter's one float32 addition).

struct convt_geom {
	int C, D, H, W;     // input channels (all groups), depth, height, width
	int M, OD, OH, OW;  // output channels (all groups), output depth, height, width
	int G, KD, KH, KW;  // groups, kernel depth, height, width
	int sd, sh, sw;     // strides
	int pd, ph, pw;     // leading pads (negative: the output starts inside the full result)
	int dd, dh, dw;     // dilations
};

// vx_convt_finite sets *flag to 1 when every one of w's n floats is
// finite, else to 0 (convTransposeTiled's condition); one block.
extern "C" __global__ void vx_convt_finite(const float* __restrict__ w, i64 n, int* __restrict__ flag) {
	int bad = 0;
	for (i64 i = threadIdx.x; i < n && !bad; i += blockDim.x)
		bad = (__float_as_uint(w[i]) & 0x7f800000u) == 0x7f800000u;
	bad = __syncthreads_or(bad);
	if (threadIdx.x == 0) *flag = bad ? 0 : 1;
}

// vx_convt computes N images of a ConvTranspose with one thread per output
// (n, m, od, oh, ow); consecutive threads take consecutive output columns.
// W is ONNX's [C, M/G, KD, KH, KW]. mode 0 runs the general chain, 1 the
// tiled one (2-D: D = KD = 1), 2 the tiled one when *flag
// (vx_convt_finite's) is set, else the general.
extern "C" __global__ void vx_convt(convt_geom g, int N, const float* __restrict__ x, const float* __restrict__ w,
	const float* __restrict__ bias, int mode, const int* __restrict__ flag, float* __restrict__ y) {
	int Cg = g.C / g.G, Mg = g.M / g.G;
	int kn = g.KD * g.KH * g.KW;
	int OHW = g.OH * g.OW, P = g.OD * OHW;
	i64 HW = (i64)g.H * g.W, DHW = g.D * HW;
	i64 wstep = (i64)Mg * kn; // from channel c's taps to channel c+1's
	bool live = mode == 1 || (mode == 2 && *flag != 0);
	i64 total = (i64)N * g.M * P;
	for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x) {
		i64 nm = t / P;
		int p = (int)(t - nm * P);
		int n = (int)(nm / g.M), m = (int)(nm - (i64)n * g.M);
		int gi = m / Mg, mm = m - gi * Mg;
		int od = p / OHW, q = p - od * OHW;
		int oh = q / g.OW, ow = q - oh * g.OW;
		const float* xc = x + ((i64)n * g.C + (i64)gi * Cg) * DHW;
		const float* wm = w + ((i64)gi * Cg * Mg + mm) * kn;
		float acc = 0.0f;
		if (live) {
			int kh = oh % g.KH, kw = ow % g.KW;
			const float* xp = xc + (i64)(oh / g.KH) * g.W + ow / g.KW;
			const float* wp = wm + kh * g.KW + kw;
			for (int c = 0; c < Cg; c++)
				acc = __fmaf_rn(wp[c * wstep], xp[c * DHW], acc);
		} else {
			for (int c = 0; c < Cg; c++) {
				const float* wt = wm;
				for (int kd = 0; kd < g.KD; kd++) {
					int vd = od + g.pd - kd * g.dd;
					int id = vd / g.sd;
					bool dok = vd >= 0 && id * g.sd == vd && id < g.D;
					for (int kh = 0; kh < g.KH; kh++) {
						int vh = oh + g.ph - kh * g.dh;
						int ih = vh / g.sh;
						bool rok = dok && vh >= 0 && ih * g.sh == vh && ih < g.H;
						for (int kw = 0; kw < g.KW; kw++) {
							int vw = ow + g.pw - kw * g.dw;
							int iw = vw / g.sw;
							bool ok = rok && vw >= 0 && iw * g.sw == vw && iw < g.W;
							float v = ok ? xc[((i64)id * g.H + ih) * g.W + iw] : 0.0f;
							acc = __fmaf_rn(*wt++, v, acc);
						}
					}
				}
				xc += DHW;
				wm += wstep;
			}
		}
		float v = vx_canon(acc);
		if (bias) v = vx_canon(__fadd_rn(v, bias[m]));
		y[t] = v;
	}
}
