package attn

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/cuda/mma"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// attnPrelude stands in for the CUDA builtins exact.cu and fast_attn.cu use
// (the blocks one after the other, a block's threads as coroutines that
// __syncthreads switches between, IEEE float32 arithmetic), and for fast.cu's
// fragment helpers: vf_pack rounds to nearest even; vf_mma is warp-collective
// (each thread deposits its registers in its warp's table and yields; then
// each computes its four accumulators from the table by the PTX ISA's
// m16n8k16 fragment layout, and yields again) and computes each output as
// cuda/mma's fitted sm_90 model does: the 16 products and the accumulator
// aligned to the largest exponent (a product's its operands' exponent sum),
// 25 bits below it kept, each term truncated toward zero, the exact sum
// truncated to float32, +0 when it underflows; an infinite or NaN term by
// IEEE 754's rules. TestPreludeModel checks that this is the model
// mma.ModelFor returns.
const attnPrelude = `#include <cmath>
#include <climits>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <functional>
#include <algorithm>
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
struct float2 { float x, y; };
struct int4 { int x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline float __uint_as_float(unsigned v) { float f; memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float v) { unsigned u; memcpy(&u, &v, 4); return u; }
inline int __float_as_int(float v) { int u; memcpy(&u, &v, 4); return u; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
using std::min; using std::max;
inline int min(int a, int b) { return a < b ? a : b; }

static ucontext_t emu_sched;
static std::vector<ucontext_t> emu_ctx;
static std::vector<std::vector<char>> emu_stack;
static std::vector<int> emu_done;
static std::function<void()> emu_fn;
static int emu_cur;
inline void __syncthreads() { swapcontext(&emu_ctx[emu_cur], &emu_sched); }
inline void __syncwarp() { __syncthreads(); } // every thread reaches each the same times
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
					emu_stack[t].resize(1 << 17);
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
static unsigned short emu_bf16(float v) {
	unsigned u; memcpy(&u, &v, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}
template <bool BF> inline unsigned vf_pack(float lo, float hi) {
	return BF ? emu_bf16(lo) | (unsigned)emu_bf16(hi) << 16 : emu_f16(lo) | (unsigned)emu_f16(hi) << 16;
}
struct emu_op { double v; int ref; bool special; };
static emu_op emu_dec(unsigned short h, bool bf) {
	int ebits = bf ? 8 : 5, mbits = bf ? 7 : 10, bias = bf ? 127 : 15;
	int e = (h >> mbits) & ((1 << ebits) - 1);
	unsigned m = h & ((1u << mbits) - 1);
	bool neg = h >> 15;
	if (e == (1 << ebits) - 1) {
		double v = m ? NAN : (neg ? -INFINITY : INFINITY);
		return {v, 0, true};
	}
	double sig = e == 0 ? (double)m : (double)(m | (1u << mbits));
	int ex = e == 0 ? 1 - bias - mbits : e - bias - mbits;
	double v = ldexp(sig, ex);
	return {neg ? -v : v, ex + mbits, false};
}
static float emu_special(const emu_op* a, const emu_op* b, float c) {
	double s = c;
	if (!std::isinf(s) && s == s) s = 0;
	for (int i = 0; i < 16; i++) {
		double p = a[i].v * b[i].v;
		if (std::isinf(p) || p != p) s += p;
	}
	if (s != s) return NAN;
	return (float)s;
}
static float emu_step(const emu_op* a, const emu_op* b, float c) {
	int emax = INT_MIN;
	for (int i = 0; i < 16; i++) {
		if (a[i].special || b[i].special) return emu_special(a, b, c);
		if (a[i].v != 0 && b[i].v != 0) emax = std::max(emax, a[i].ref + b[i].ref);
	}
	double cv = c;
	if (cv != 0) {
		if (std::isinf(cv) || cv != cv) return emu_special(a, b, c);
		emax = std::max(emax, ilogb(cv));
	} else if (emax == INT_MIN) {
		return c;
	}
	int lsb = emax - 25;
	double scale = ldexp(1.0, -lsb);
	double sum = trunc(cv * scale);
	for (int i = 0; i < 16; i++) sum += trunc(a[i].v * b[i].v * scale);
	double v = ldexp(sum, lsb);
	float r = (float)v;
	if (fabs((double)r) > fabs(v)) r = nextafterf(r, 0.0f);
	if (r == 0) return 0.0f;
	return r;
}
static unsigned emu_a[32][32][4], emu_b[32][32][2];
static unsigned short emu_half(unsigned reg, int hi) { return hi ? reg >> 16 : reg & 0xffff; }
template <bool BF> void vf_mma(float* c, const unsigned* a, const unsigned* b) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	for (int i = 0; i < 4; i++) emu_a[w][lane][i] = a[i];
	for (int i = 0; i < 2; i++) emu_b[w][lane][i] = b[i];
	__syncthreads(); // every thread of the warp has deposited its fragments
	int gid = lane >> 2, tig = lane & 3;
	for (int q = 0; q < 4; q++) {
		int r = gid + (q >> 1) * 8, n = tig * 2 + (q & 1);
		emu_op A[16], B[16];
		for (int k = 0; k < 16; k++) {
			int i = (k >= 8 ? 4 : 0) + (r >= 8 ? 2 : 0) + (k & 1);
			A[k] = emu_dec(emu_half(emu_a[w][(r % 8) * 4 + (k % 8) / 2][i / 2], i & 1), BF);
			int j = (k >= 8 ? 2 : 0) + (k & 1);
			B[k] = emu_dec(emu_half(emu_b[w][n * 4 + (k % 8) / 2][j / 2], j & 1), BF);
		}
		c[q] = emu_step(A, B, c[q]);
	}
	__syncthreads(); // every thread has read the tables
}
`

// attnDriver reads a launch (kernel name, S, H, B, op, scale, the mask's
// strides, q, kt, v, mask as counted float arrays, -1: absent) and writes y.
func attnDriver() string {
	var b strings.Builder
	b.WriteString(`static FILE* in;
static void rd(void* p, size_t n) { if (fread(p, 1, n, in) != n) { fprintf(stderr, "short read\n"); exit(2); } }
static std::vector<float> arr(bool* present) {
	long long n; rd(&n, 8);
	std::vector<float> v; *present = n >= 0;
	if (n > 0) { v.resize(n); rd(v.data(), n * 4); }
	return v;
}
int main(int argc, char** argv) {
	in = fopen(argv[1], "rb");
	char name[64] = {0}; rd(name, 63);
	int geo[4]; rd(geo, 16); // S, H, B, op
	float scale; rd(&scale, 4);
	long long st[4]; rd(st, 32);
	va_lay lay; rd(&lay, sizeof lay);
	bool pq, pk, pv, pm;
	auto q = arr(&pq); auto kt = arr(&pk); auto v = arr(&pv); auto mask = arr(&pm);
	fclose(in);
	std::vector<float> y(q.size(), __int_as_float(0x7fbadbad));
	int S = geo[0], H = geo[1], B = geo[2], op = geo[3];
	const float* mp = pm ? mask.data() : nullptr;
	dim3 grid = {(unsigned)((S + 31) / 32), (unsigned)H, (unsigned)B};
	bool ok = false;
`)
	// va_layernorm: geo {rows, D}, scale the epsilon, q x, kt the scale,
	// v the bias (or absent).
	fmt.Fprintf(&b, "\tif (!strcmp(name, %q)) { ok = true; emu_launch({(unsigned)((S + %d) / %d), 1, 1}, {%d, 1, 1}, [&] { %s(q.data(), kt.data(), pv ? v.data() : nullptr, scale, y.data(), S, H); }); }\n",
		kernels.FastLayerNorm, kernels.FastLayerNormRows-1, kernels.FastLayerNormRows, 32*kernels.FastLayerNormRows, kernels.FastLayerNorm)
	for _, k := range kernels.FastAttnKernels[1:] {
		fmt.Fprintf(&b, "\tif (!strcmp(name, %q)) { ok = true; emu_launch(grid, {128, 1, 1}, [&] { %s(q.data(), kt.data(), v.data(), mp, y.data(), S, H, op, scale, st[0], st[1], st[2], st[3], lay); }); }\n", k, k)
	}
	b.WriteString(`	if (!ok) { fprintf(stderr, "no kernel %s\n", name); return 3; }
	FILE* out = fopen(argv[2], "wb");
	fwrite(y.data(), 4, y.size(), out);
	fclose(out);
	return 0;
}
`)
	return b.String()
}

// buildAttnEmu compiles exact.cu and fast_attn.cu with the host C++
// compiler under attnPrelude, then the driver. Skipped with -short or
// without g++ (or one without _Float16).
func buildAttnEmu(t *testing.T) (dir, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	src := attnPrelude
	for _, f := range kernels.Sources {
		if f.Name == "exact.cu" {
			src += "#line 1 \"exact.cu\"\n" + f.Text
		}
	}
	src += "#line 1 \"fast_attn.cu\"\n" + kernels.FastAttnSource() + "#line 1 \"driver\"\n" + attnDriver()
	dir = t.TempDir()
	cpp := filepath.Join(dir, "emu.cpp")
	bin = filepath.Join(dir, "emu")
	if err := os.WriteFile(cpp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cxx, "-std=c++20", "-O1", "-ffp-contract=off", "-o", bin, cpp).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "_Float16") && !strings.Contains(string(out), "fast_attn.cu:") {
			t.Skipf("g++ without _Float16: %s", out)
		}
		t.Fatalf("fast_attn.cu does not compile under the emulation: %s", out)
	}
	return dir, bin
}

func runAttnEmu(t *testing.T, dir, bin string, c Case) []float32 {
	t.Helper()
	return runEmuNamed(t, dir, bin, c.Kernel(), c, Contiguous(c.G))
}

func runLayerNorm(t *testing.T, dir, bin string, c Case) []float32 {
	t.Helper()
	return runEmuNamed(t, dir, bin, kernels.FastLayerNorm, c, Layout{})
}

// runEmuNamed runs kernel k of the emulation program on c's operands, laid
// out as lay says.
func runEmuNamed(t *testing.T, dir, bin, k string, c Case, lay Layout) []float32 {
	t.Helper()
	var buf bytes.Buffer
	w := func(v any) { binary.Write(&buf, binary.LittleEndian, v) }
	name := make([]byte, 63)
	copy(name, k)
	w(name)
	w([]int32{int32(c.G.S), int32(c.G.H), int32(c.G.B), int32(c.Op)})
	w(c.Scale)
	w([]int64{int64(c.G.MB), int64(c.G.MH), int64(c.G.MI), int64(c.G.MJ)})
	w(lay.Words())
	for _, a := range [][]float32{c.Q, c.Kt, c.V, c.M} {
		if a == nil {
			w(int64(-1))
			continue
		}
		w(int64(len(a)))
		w(a)
	}
	inf, outf := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(inf, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, inf, outf).CombinedOutput(); err != nil {
		t.Fatalf("%v: emulation: %v %s", c, err, out)
	}
	raw, err := os.ReadFile(outf)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(raw)/4)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return y
}

// TestKernelEmulated runs fast_attn.cu itself on the CPU (attnPrelude) and
// requires Reference's bits, output for output: the kernel's fragment
// layouts, staging, masking, softmax order and tails against the
// specification the emulation (`--device emu`) runs; and Reference within
// the 16-bit formats' error of attention in float64.
func TestKernelEmulated(t *testing.T) {
	dir, bin := buildAttnEmu(t)
	cases := Cases(19)
	m16, _ := mma.ModelFor("sm_90", mma.FP16)
	mbf, _ := mma.ModelFor("sm_90", mma.BF16)
	for _, c := range cases {
		m, f := m16, mma.FP16
		if c.BF {
			m, f = mbf, mma.BF16
		}
		want, err := Reference(m, f, c.G, c.Q, c.Kt, c.V, c.M, c.Op, c.Scale)
		if err != nil {
			t.Fatal(err)
		}
		got := runAttnEmu(t, dir, bin, c)
		if len(got) != len(want) {
			t.Fatalf("%v: %d outputs, want %d", c, len(got), len(want))
		}
		d, first := 0, -1
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				if first < 0 {
					first = i
				}
				d++
			}
		}
		if d != 0 {
			t.Errorf("%v: %d of %d outputs differ from Reference (first %d: %#08x %v, want %#08x %v)", c, d, len(want), first,
				math.Float32bits(got[first]), got[first], math.Float32bits(want[first]), want[first])
			continue
		}
		nan, nan0 := 0, 0
		for i, v := range want {
			if v != v {
				nan++
				if i < c.G.S*c.G.D {
					nan0++
				}
			}
		}
		if c.M != nil && c.Special {
			// The special case: in head 0, row 5 (a NaN q) and row 9 (every
			// key -Inf) are NaN and the rest finite (head 1's infinite key
			// makes the rows whose score with it is +Inf NaN too).
			if nan0 != 2*64 || want[5*64] == want[5*64] || want[9*64+63] == want[9*64+63] {
				t.Errorf("%v: %d NaN outputs in head 0, want rows 5 and 9's %d", c, nan0, 2*64)
			}
		} else {
			if nan != 0 {
				t.Errorf("%v: %d NaN outputs", c, nan)
			}
			// bf16 keeps 8 bits: scores of ~13 (the unscaled case) are off
			// by ~0.05, their exponentials by ~5%.
			tol := 0.01
			if c.BF {
				tol = 0.15
			}
			if e := maxErr(c, want); e > tol {
				t.Errorf("%v: Reference is %.3g from attention in float64", c, e)
			}
		}
		t.Logf("%v: 0 of %d differ", c, len(want))
	}
}

// maxErr is the largest difference between y and attention computed in
// float64 on the unrounded operands.
func maxErr(c Case, y []float32) float64 {
	g := c.G
	S, D := g.S, g.D
	worst := 0.0
	p := make([]float64, S)
	for bh := 0; bh < g.B*g.H; bh++ {
		b, h := bh/g.H, bh%g.H
		o := bh * S * D
		for i := 0; i < S; i++ {
			mx := math.Inf(-1)
			for j := 0; j < S; j++ {
				s := 0.0
				for d := 0; d < D; d++ {
					s += float64(c.Q[o+i*D+d]) * float64(c.Kt[o+d*S+j])
				}
				switch c.Op {
				case DivScale:
					s /= float64(c.Scale)
				case MulScale:
					s *= float64(c.Scale)
				}
				if c.M != nil {
					s += float64(c.M[g.MB*b+g.MH*h+g.MI*i+g.MJ*j])
				}
				p[j] = s
				mx = math.Max(mx, s)
			}
			sum := 0.0
			for j := range p {
				p[j] = math.Exp(p[j] - mx)
				sum += p[j]
			}
			for d := 0; d < D; d++ {
				s := 0.0
				for j := 0; j < S; j++ {
					s += p[j] / sum * float64(c.V[o+j*D+d])
				}
				worst = math.Max(worst, math.Abs(s-float64(y[o+i*D+d])))
			}
		}
	}
	return worst
}

// The prelude's tensor-core arithmetic is the fitted sm_90 model's.
func TestPreludeModel(t *testing.T) {
	want := mma.Model{Block: 16, Frac: 25, Round: mma.TowardZero, TruncateMagnitude: true, ExponentSum: true}
	for _, f := range []mma.Format{mma.FP16, mma.BF16} {
		if m, ok := mma.ModelFor("sm_90", f); !ok || m != want {
			t.Errorf("sm_90 %v: model %v, the prelude emulates %v", f, m, want)
		}
	}
}

// TestLayerNormEmulated runs va_layernorm (fast_attn.cu, under g++) and
// requires the CPU's LayerNormalization bits, which vx_layernorm gives:
// the staged kernel keeps the exact plan's arithmetic. Rows of 768 (BERT),
// 1024 (the most it takes) and 5, 3 and 130 rows (a last block part
// full), data with NaN, ±Inf, ±0 and subnormals, with and without a bias.
func TestLayerNormEmulated(t *testing.T) {
	dir, bin := buildAttnEmu(t)
	r := rand.New(rand.NewSource(7))
	for _, c := range []struct {
		rows, D int
		bias    bool
	}{{5, 768, true}, {3, 1024, false}, {130, 64, true}, {2, 1, true}} {
		x := make([]float32, c.rows*c.D)
		for i := range x {
			x[i] = float32(r.NormFloat64()*3 + 1)
		}
		specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), math.Float32frombits(3), 1e30}
		for i, v := range specials {
			if c.rows > 2 && len(x) > 4*c.D {
				x[(i%c.rows)*c.D+r.Intn(c.D)] = v
			}
		}
		sc, bi := make([]float32, c.D), make([]float32, c.D)
		for i := range sc {
			sc[i], bi[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		var bias []float32
		if c.bias {
			bias = bi
		}
		in := Case{G: Shape{S: c.rows, H: c.D}, Scale: 1e-5, Q: x, Kt: sc, V: bias}
		got := runLayerNorm(t, dir, bin, in)
		want := cpuLayerNorm(t, x, sc, bias, c.rows, c.D)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("rows %d D %d: output %d is %#08x (%v), the CPU's %#08x (%v)", c.rows, c.D, i, math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
			}
		}
		t.Logf("layernorm rows %d D %d bias %v: 0 of %d differ from the CPU", c.rows, c.D, c.bias, len(want))
	}
}

// cpuLayerNorm is the CPU registry's LayerNormalization over the last axis.
func cpuLayerNorm(t *testing.T, x, sc, bias []float32, rows, D int) []float32 {
	t.Helper()
	n := &ir.Node{OpType: "LayerNormalization", Version: 17, Attrs: map[string]*ir.Attr{"epsilon": {Name: "epsilon", Kind: ir.AttrFloat, F: 1e-5}},
		Inputs: []string{"x", "s", "b"}, Outputs: []string{"y"}}
	ins := []*tensor.Tensor{tensor.From(x, rows, D), tensor.From(sc, D)}
	if bias != nil {
		ins = append(ins, tensor.From(bias, D))
	} else {
		n.Inputs = n.Inputs[:2]
	}
	k, err := builtin.Registry().Lookup(n)
	if err != nil {
		t.Fatal(err)
	}
	out, err := k.Run(&kernel.Ctx{}, n, ins)
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Data.([]float32)
}

// TestKernelStridedEmulated runs fast_attn.cu (under g++) on operands laid
// out as a fast plan's folded moves leave them: q, k and v column ranges
// of one QKV product [B][S][3][H][D] (k read as kt by d-contiguous keys),
// y written as [B][S][H][D]; every output must be Reference's on the
// contiguous operands, bit for bit, and the kernel must write no element
// outside y's.
func TestKernelStridedEmulated(t *testing.T) {
	dir, bin := buildAttnEmu(t)
	m16, _ := mma.ModelFor("sm_90", mma.FP16)
	r := rand.New(rand.NewSource(5))
	for _, sh := range [][4]int{{2, 3, 37, 64}, {1, 12, 128, 64}, {2, 2, 64, 32}} {
		B, H, S, D := sh[0], sh[1], sh[2], sh[3]
		c := Random(r, false, B, H, S, D, DivScale, 8, []int{B, 1, 1, S}, false)
		HD := H * D
		qkv := make([]float32, B*S*3*HD)
		for b := 0; b < B; b++ {
			for h := 0; h < H; h++ {
				for i := 0; i < S; i++ {
					for d := 0; d < D; d++ {
						o := ((b*H+h)*S+i)*D + d
						row := (b*S+i)*3*HD + h*D + d
						qkv[row] = c.Q[o]
						qkv[row+2*HD] = c.V[o]
						qkv[row+HD] = c.Kt[((b*H+h)*D+d)*S+i]
					}
				}
			}
		}
		want, err := Reference(m16, mma.FP16, c.G, c.Q, c.Kt, c.V, c.M, c.Op, c.Scale)
		if err != nil {
			t.Fatal(err)
		}
		lay := Layout{Q: [4]int{S * 3 * HD, D, 3 * HD, 1}, Kt: [4]int{S * 3 * HD, D, 1, 3 * HD}, V: [4]int{S * 3 * HD, D, 3 * HD, 1},
			Y: [4]int{S * HD, D, HD, 1}}
		// The driver passes three arrays and writes y over q's length: q,
		// kt and v are the product from their first column on.
		sc := c
		sc.Q, sc.Kt, sc.V = qkv, qkv[HD:], qkv[2*HD:]
		got := runEmuNamed(t, dir, bin, c.Kernel(), sc, lay)
		d := 0
		for b := 0; b < B; b++ {
			for h := 0; h < H; h++ {
				for i := 0; i < S; i++ {
					for e := 0; e < D; e++ {
						g := got[(b*S+i)*HD+h*D+e]
						if math.Float32bits(g) != math.Float32bits(want[((b*H+h)*S+i)*D+e]) {
							d++
						}
					}
				}
			}
		}
		for i := B * S * HD; i < len(got); i++ {
			if math.Float32bits(got[i]) != 0x7fbadbad {
				t.Fatalf("B%d H%d S%d D%d: output %d past y written", B, H, S, D, i)
			}
		}
		if d != 0 {
			t.Errorf("B%d H%d S%d D%d strided: %d of %d outputs differ from Reference", B, H, S, D, d, len(want))
		}
	}
}
