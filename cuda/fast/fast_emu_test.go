package fast

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/plan"
)

// emuPrelude stands in for the CUDA builtins fast.cu uses, and emulates
// the tensor-core instructions from the PTX ISA's definitions: mma.sync
// m16n8k16 (row.col, f32 accumulators) is warp-collective, so each thread
// deposits its fragment registers in its warp's table and yields; once
// every thread of the block has, each computes its four accumulators from
// the table by the ISA's fragment layout ("Matrix Fragments for
// mma.m16n8k16 with floating point type"):
//
//	groupID = lane >> 2, threadID_in_group = lane % 4
//	A (16x16, row): a_i (i = 0..7, two per register, a0 in the low half)
//	  row = groupID (+8 for i = 2, 3, 6, 7), col = 2*tig + (i & 1) (+8 for i >= 4)
//	B (16x8, col): b_i (i = 0..3), row = 2*tig + (i & 1) (+8 for i >= 2), col = groupID
//	C, D (16x8): c_i (i = 0..3), row = groupID (+8 for i >= 2), col = 2*tig + (i & 1)
//
// The products of 16-bit values are exact in float64; each step adds them
// and c in float64 and rounds once to float32 (the hardware's internal
// order within a step is its own; the test's tolerance covers that).
// cvt.rn.f16x2.f32 d, a, b puts a in the upper half: vf_pack(lo, hi).
const emuPrelude = `#define VF_EMU 1
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <functional>
#include <ucontext.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
uint3 blockIdx, threadIdx;
dim3 blockDim, gridDim;
struct float4 { float x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float2 { float x, y; };
struct int4 { int x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }

static ucontext_t emu_sched;
static std::vector<ucontext_t> emu_ctx;
static std::vector<std::vector<char>> emu_stack;
static std::vector<int> emu_done;
static std::function<void()> emu_fn;
static int emu_cur;
static void emu_yield() { swapcontext(&emu_ctx[emu_cur], &emu_sched); }
inline void __syncthreads() { emu_yield(); }
inline void __syncwarp() { emu_yield(); } // every thread of the block reaches each the same times
static void emu_tramp() { emu_fn(); emu_done[emu_cur] = 1; }
template <class F>
void emu_launch(dim3 grid, dim3 block, F f) {
	gridDim = grid; blockDim = block;
	unsigned nt = block.x * block.y * block.z;
	emu_ctx.resize(nt); emu_done.resize(nt); emu_stack.resize(nt);
	emu_fn = f;
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++) {
				blockIdx = {x, y, z};
				for (unsigned t = 0; t < nt; t++) {
					emu_stack[t].resize(1 << 16);
					getcontext(&emu_ctx[t]);
					emu_ctx[t].uc_stack.ss_sp = emu_stack[t].data();
					emu_ctx[t].uc_stack.ss_size = emu_stack[t].size();
					emu_ctx[t].uc_link = &emu_sched;
					makecontext(&emu_ctx[t], emu_tramp, 0);
					emu_done[t] = 0;
				}
				for (bool live = true; live;) {
					live = false;
					for (unsigned t = 0; t < nt; t++) {
						if (emu_done[t]) continue;
						emu_cur = t;
						threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
						swapcontext(&emu_sched, &emu_ctx[t]);
						live = true;
					}
				}
			}
}

static unsigned short emu_f16(float v) { _Float16 h = (_Float16)v; unsigned short b; memcpy(&b, &h, 2); return b; }
static double emu_f16v(unsigned short b) { _Float16 h; memcpy(&h, &b, 2); return (double)h; }
static unsigned short emu_bf16(float v) {
	unsigned u; memcpy(&u, &v, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}
static double emu_bf16v(unsigned short b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
inline unsigned vf_pack_f16(float lo, float hi) { return emu_f16(lo) | (unsigned)emu_f16(hi) << 16; }
inline unsigned vf_pack_bf16(float lo, float hi) { return emu_bf16(lo) | (unsigned)emu_bf16(hi) << 16; }

static unsigned emu_a[32][32][4], emu_b[32][32][2];
static double emu_half(unsigned reg, int hi, bool bf) {
	unsigned short b = hi ? reg >> 16 : reg & 0xffff;
	return bf ? emu_bf16v(b) : emu_f16v(b);
}
// A(r, k): the lane and element holding it.
static double emu_A(int w, int r, int k, bool bf) {
	int i = (k >= 8 ? 4 : 0) + (r >= 8 ? 2 : 0) + (k & 1);
	int lane = (r % 8) * 4 + (k % 8) / 2;
	return emu_half(emu_a[w][lane][i / 2], i & 1, bf);
}
static double emu_B(int w, int k, int n, bool bf) {
	int i = (k >= 8 ? 2 : 0) + (k & 1);
	int lane = n * 4 + (k % 8) / 2;
	return emu_half(emu_b[w][lane][i / 2], i & 1, bf);
}
static void emu_mma(float* c, const unsigned* a, const unsigned* b, bool bf) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	for (int i = 0; i < 4; i++) emu_a[w][lane][i] = a[i];
	for (int i = 0; i < 2; i++) emu_b[w][lane][i] = b[i];
	emu_yield(); // every thread of the block has deposited its fragments
	int gid = lane >> 2, tig = lane & 3;
	for (int q = 0; q < 4; q++) {
		int r = gid + (q >> 1) * 8, n = tig * 2 + (q & 1);
		double s = c[q];
		for (int k = 0; k < 16; k++) s += emu_A(w, r, k, bf) * emu_B(w, k, n, bf);
		c[q] = (float)s;
	}
	emu_yield(); // every thread has read the tables
}
// ldmatrix: lane 8*j + r deposits the address of row r of matrix j; lane
// l's register j is then row l/4, elements 2*(l%4), +1 of matrix j.
static const unsigned short* emu_rows[32][32];
static void emu_ldm(unsigned* d, const unsigned short* p, int n) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	emu_rows[w][lane] = p;
	emu_yield();
	for (int j = 0; j < n; j++) {
		const unsigned short* row = emu_rows[w][8 * j + lane / 4];
		d[j] = row[2 * (lane % 4)] | (unsigned)row[2 * (lane % 4) + 1] << 16;
	}
	emu_yield();
}
inline void vf_ldm4(unsigned* d, const unsigned short* p) { emu_ldm(d, p, 4); }
inline void vf_ldm2(unsigned* d, const unsigned short* p) { emu_ldm(d, p, 2); }
// cp.async lands at once here: every read of a stage follows its wait and
// __syncthreads in the kernel, so the values read are the same.
inline void vf_cp16(void* s, const void* g) { memcpy(s, g, 16); }
inline void vf_commit() {}
template <int N> inline void vf_wait() {}
inline void vf_mma_f16(float* c, const unsigned* a, const unsigned* b) { emu_mma(c, a, b, false); }
inline void vf_mma_bf16(float* c, const unsigned* a, const unsigned* b) { emu_mma(c, a, b, true); }
`

// emuDriver reads a launch (kernel name, vf_geom, grid, the operands) and
// writes y.
func emuDriver() string {
	var b strings.Builder
	b.WriteString(`static FILE* in;
static void rd(void* p, size_t n) { if (fread(p, 1, n, in) != n) { fprintf(stderr, "short read\n"); exit(2); } }
template <class T> static std::vector<T> arr(bool* present) {
	long long n; rd(&n, 8);
	std::vector<T> v; *present = n >= 0;
	if (n > 0) { v.resize(n); rd(v.data(), n * sizeof(T)); }
	return v;
}
int main(int argc, char** argv) {
	in = fopen(argv[1], "rb");
	char name[64] = {0}; rd(name, 63);
	vf_geom g; rd(&g, sizeof g);
	unsigned grid[2]; rd(grid, 8);
	int act; float lo, hi; rd(&act, 4); rd(&lo, 4); rd(&hi, 4);
	bool px, pw, pt, pb, pr;
	auto x = arr<float>(&px); auto w = arr<unsigned short>(&pw); auto taps = arr<int4>(&pt); auto bias = arr<float>(&pb); auto res = arr<float>(&pr);
	long long ny; rd(&ny, 8);
	fclose(in);
	std::vector<float> y(ny, __int_as_float(0x7fbadbad));
	const float* bp = pb ? bias.data() : nullptr;
	const float* rp = pr ? res.data() : nullptr;
	bool ok = false;
`)
	for _, k := range kernels.FastKernels {
		fmt.Fprintf(&b, "\tif (!strcmp(name, %q)) { ok = true; emu_launch({grid[0], grid[1], 1}, {256, 1, 1}, [&] { %s(g, x.data(), w.data(), pt ? taps.data() : nullptr, bp, rp, act, lo, hi, y.data()); }); }\n", k, k)
	}
	b.WriteString(`	if (!ok) { fprintf(stderr, "no kernel %s\n", name); return 3; }
	FILE* out = fopen(argv[2], "wb");
	fwrite(y.data(), 4, ny, out);
	fclose(out);
	return 0;
}
`)
	return b.String()
}

func buildEmu(t *testing.T) (dir, bin string) {
	t.Helper()
	return buildEmuOf(t, "fast.cu", emuPrelude+"#line 1 \"fast.cu\"\n"+kernels.FastSource()+"#line 1 \"driver\"\n"+emuDriver())
}

// emuCase is one launch: a convolution (or a Gemm as 1x1 images), its
// operands, the precision, tile and mode.
type emuCase struct {
	g         exact.ConvGeom
	p         plan.Precision
	t         Tile
	mode      int
	x, w      []float32 // x NCHW (a Gemm's rows), w [M][C*KH*KW]
	bias, res []float32
	act       exact.Act
}

func (c emuCase) String() string {
	return fmt.Sprintf("%s %s mode %d N%d C%d %dx%d M%d k%dx%d s%d,%d p%d,%d d%d,%d", c.p, c.t, c.mode, c.g.N, c.g.C, c.g.H, c.g.W, c.g.M, c.g.KH, c.g.KW, c.g.SH, c.g.SW, c.g.PH, c.g.PW, c.g.DH, c.g.DW)
}

func runEmu(t *testing.T, dir, bin string, c emuCase) []float32 {
	t.Helper()
	l, err := planLaunch(c.p, c.mode, c.t, c.g)
	if err != nil {
		t.Fatal(err)
	}
	K := c.g.C * c.g.KH * c.g.KW
	pw, err := PackWeights(c.w, c.g.M, K, K, 1, c.p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := func(v any) { binary.Write(&buf, binary.LittleEndian, v) }
	name := make([]byte, 63)
	copy(name, l.kernel)
	w(name)
	w(l.geom)
	w(l.grid)
	w(c.act.Code())
	w(c.act.Lo)
	w(c.act.Hi)
	for _, a := range [][]float32{c.x} {
		w(int64(len(a)))
		w(a)
	}
	w(int64(len(pw)))
	w(pw)
	if c.mode == kernels.FastGather {
		// exact's tap table: {c*H*W + kh*dh*W + kw*dw, kh*dh, kw*dw, 0}.
		var taps []int32
		for ci := range c.g.C {
			for kh := range c.g.KH {
				for kw := range c.g.KW {
					taps = append(taps, int32(ci*c.g.H*c.g.W+kh*c.g.DH*c.g.W+kw*c.g.DW), int32(kh*c.g.DH), int32(kw*c.g.DW), 0)
				}
			}
		}
		w(int64(len(taps) / 4))
		w(taps)
	} else {
		w(int64(-1))
	}
	for _, a := range [][]float32{c.bias, c.res} {
		if a == nil {
			w(int64(-1))
			continue
		}
		w(int64(len(a)))
		w(a)
	}
	ny := c.g.OutLen()
	w(int64(ny))
	return emuExec(t, dir, bin, c, buf.Bytes(), ny)
}

// reference is the convolution in float64 over the operands rounded to
// c.p (round true: the values the tensor cores multiply) or as they are,
// with the sum of the terms' magnitudes (the error scale), then the
// float32 epilogue's operations in float64.
func reference(c emuCase, round bool) (y, scale []float64) {
	g := c.g
	K := g.C * g.KH * g.KW
	P := g.OH * g.OW
	r := func(v float32) float64 {
		if round {
			return float64(Round(v, c.p))
		}
		return float64(v)
	}
	y = make([]float64, g.OutLen())
	scale = make([]float64, g.OutLen())
	for n := range g.N {
		for m := range g.M {
			for p := range P {
				oh, ow := p/g.OW, p%g.OW
				s, a := 0.0, 0.0
				for k := range K {
					ci, kh, kw := k/(g.KH*g.KW), k/g.KW%g.KH, k%g.KW
					ih, iw := oh*g.SH-g.PH+kh*g.DH, ow*g.SW-g.PW+kw*g.DW
					if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
						continue
					}
					v := r(c.w[m*K+k]) * r(c.x[((n*g.C+ci)*g.H+ih)*g.W+iw])
					s += v
					a += math.Abs(v)
				}
				o := (n*g.M+m)*P + p
				if c.bias != nil {
					s += float64(c.bias[m])
					a += math.Abs(float64(c.bias[m]))
				}
				if c.res != nil {
					s += float64(c.res[o])
					a += math.Abs(float64(c.res[o]))
				}
				if c.act.Relu && s < 0 {
					s = 0
				}
				if c.act.HasLo && s < float64(c.act.Lo) {
					s = float64(c.act.Lo)
				}
				if c.act.HasHi && s > float64(c.act.Hi) {
					s = float64(c.act.Hi)
				}
				y[o], scale[o] = s, a
			}
		}
	}
	return y, scale
}

// randCase is a random case of the mode, of reductions up to 4 k blocks;
// long: up to six times the channels (a Gemm's k), up to 17 k blocks (the
// pipeline's steady state, both parities of the loop's unrolling).
func randCase(r *rand.Rand, p plan.Precision, t Tile, mode int, long bool) emuCase {
	var g exact.ConvGeom
	cs := 1 // the channels' (a Gemm's k's) scale
	if long {
		cs = 6
	}
	switch mode {
	case kernels.FastWide:
		h := 1 + r.Intn(8)
		w := 4 * (1 + r.Intn(3)) / gcd(h, 4)
		g = exact.ConvGeom{N: 1 + r.Intn(3), C: 1 + r.Intn(40)*cs, H: h, W: w, M: 1 + r.Intn(140), KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
	case kernels.FastRows, kernels.Fast1x1:
		if mode == kernels.FastRows || r.Intn(2) == 0 {
			// A Gemm: rows of K (a multiple of 4 for the rows mode).
			k := 4 * (1 + r.Intn(24)*cs)
			if mode == kernels.Fast1x1 {
				k = 1 + r.Intn(90)*cs
			}
			g = exact.ConvGeom{N: 1 + r.Intn(70), C: k, H: 1, W: 1, M: 1 + r.Intn(150), KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
		} else {
			s := 1 + r.Intn(2)
			g = exact.ConvGeom{N: 1 + r.Intn(3), C: 1 + r.Intn(40)*cs, H: 1 + r.Intn(9), W: 1 + r.Intn(9), M: 1 + r.Intn(140), KH: 1, KW: 1, SH: s, SW: s, DH: 1, DW: 1}
		}
	default:
		k := 1 + 2*r.Intn(2)
		g = exact.ConvGeom{N: 1 + r.Intn(3), C: 1 + r.Intn(12)*cs, H: 3 + r.Intn(8), W: 3 + r.Intn(8), M: 1 + r.Intn(140), KH: k, KW: 1 + 2*r.Intn(2),
			SH: 1 + r.Intn(2), SW: 1 + r.Intn(2), PH: r.Intn(2), PW: r.Intn(2), DH: 1 + r.Intn(2), DW: 1}
	}
	g.G = 1
	g.OH = (g.H+2*g.PH-((g.KH-1)*g.DH+1))/g.SH + 1
	g.OW = (g.W+2*g.PW-((g.KW-1)*g.DW+1))/g.SW + 1
	if g.OH < 1 || g.OW < 1 {
		g.PH, g.PW, g.KH, g.KW = 1, 1, 1, 1
		g.OH = (g.H+2*g.PH-1)/g.SH + 1
		g.OW = (g.W+2*g.PW-1)/g.SW + 1
		if mode == kernels.Fast1x1 {
			g.PH, g.PW = 0, 0
			g.OH, g.OW = (g.H-1)/g.SH+1, (g.W-1)/g.SW+1
		}
	}
	c := emuCase{g: g, p: p, t: t, mode: mode}
	K := g.C * g.KH * g.KW
	fill := func(n int, sc float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * sc)
		}
		return v
	}
	c.x = fill(g.N*g.C*g.H*g.W, 1)
	c.w = fill(g.M*K, 1/math.Sqrt(float64(K)))
	if r.Intn(2) == 0 {
		c.bias = fill(g.M, 0.5)
	}
	if r.Intn(2) == 0 { // a Gemm's residual too (a fast MatMul's epilogue)
		c.res = fill(g.OutLen(), 0.5)
	}
	switch r.Intn(3) {
	case 1:
		c.act = exact.Act{Relu: true}
	case 2:
		c.act = exact.Act{HasLo: true, Lo: -0.5, HasHi: true, Hi: 0.75}
	}
	return c
}

// TestKernelsEmulated runs fast.cu's kernels on the CPU under the mma.sync
// emulation, every precision, mode and tile, on random convolutions and
// Gemms: each output must be the float64 sum of the rounded operands' products
// within float32 accumulation error (a wrong fragment mapping, a missed
// k block or a wrong gather is far outside it), and the unrounded
// operands' within the 16-bit formats' error. Then the batch invariance
// the kernels promise: image 0 alone gives the bits it has in the batch.
func TestKernelsEmulated(t *testing.T) {
	dir, bin := buildEmu(t)
	r := rand.New(rand.NewSource(19))
	for _, p := range []plan.Precision{plan.FP16, BF16} {
		for _, mode := range kernels.FastModes {
			for _, tt := range kernels.FastModeTiles(mode) {
				tile := Tile{tt[0], tt[1]}
				for rep := range 3 {
					c := randCase(r, p, tile, mode, rep == 2)
					got := runEmu(t, dir, bin, c)
					strict, sc := reference(c, true)
					loose, _ := reference(c, false)
					tol := 1.0 / 512 // fp16: 2^-11 per operand, two operands, with room
					if p == BF16 {
						tol = 1.0 / 64
					}
					for i, v := range got {
						if d := math.Abs(float64(v) - strict[i]); !(d <= 4e-6*sc[i]+1e-30) {
							t.Fatalf("%v: output %d = %g, rounded operands' sum %g (scale %g)", c, i, v, strict[i], sc[i])
						}
						if d := math.Abs(float64(v) - loose[i]); !(d <= tol*sc[i]+1e-30) {
							t.Fatalf("%v: output %d = %g, float64 %g (scale %g): past the %s tolerance", c, i, v, loose[i], sc[i], p)
						}
					}
					if c.g.N < 2 {
						continue
					}
					one := c
					one.g.N = 1
					one.x = c.x[:c.g.C*c.g.H*c.g.W]
					if c.res != nil {
						one.res = c.res[:c.g.M*c.g.OH*c.g.OW]
					}
					alone := runEmu(t, dir, bin, one)
					for i, v := range alone {
						if math.Float32bits(v) != math.Float32bits(got[i]) {
							t.Fatalf("%v: image 0 alone differs from image 0 in a batch of %d at %d: %#08x vs %#08x", c, c.g.N, i, math.Float32bits(v), math.Float32bits(got[i]))
						}
					}
				}
			}
		}
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
