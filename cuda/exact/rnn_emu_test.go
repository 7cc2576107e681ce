package exact

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
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/rnn"
)

// TestRNNKernelsEmulated runs rnn.cu itself on the CPU: exact.cu and
// rnn.cu compiled by the host C++ compiler under emuPrelude (the CUDA
// builtins they use, with IEEE float32 arithmetic and fmaf for
// __fmaf_rn; a block's threads as coroutines that __syncthreads
// switches between), driven by emuDriver, which makes Engine.RNN's launches
// (grid-stride loops capped at three blocks) on 40 random nodes. The outputs must be
// kernel/rnn's bits. Skipped without g++ (C++20) or with -short.
func TestRNNKernelsEmulated(t *testing.T) {
	dir, bin := buildEmu(t, "rnn.cu", emuPrelude, emuDriver)
	r := rand.New(rand.NewSource(77))
	for i := 0; i < 40; i++ {
		c := randomRNN(r)
		rg, lens, err := rnn.Setup(c.n, c.in)
		if err != nil {
			t.Fatal(err)
		}
		g, err := RNNGeomOf(rg)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w := func(v any) { binary.Write(&buf, binary.LittleEndian, v) }
		w(g.fields())
		steps := g.Seq
		if kernel.Input(c.in, 4) != nil {
			steps = 0
			for _, L := range lens {
				steps = max(steps, L)
			}
		}
		w(int32(steps))
		for _, idx := range []int{0, 1, 2, 3, 5, 6, 7} {
			tt := kernel.Input(c.in, idx)
			if tt == nil {
				w(int64(-1))
				continue
			}
			w(int64(tt.Len()))
			w(f32s(tt))
		}
		if sl := kernel.Input(c.in, 4); sl != nil {
			w(int64(sl.Len()))
			w(sl.Data.([]int32))
		} else {
			w(int64(-1))
		}
		got := runEmu(t, dir, bin, buf.Bytes(), fmt.Sprintf("case %d %v", i, c))
		out, err := rnn.Ops()[c.n.OpType].Run(&kernel.Ctx{}, c.n, c.in)
		if err != nil {
			t.Fatal(err)
		}
		off := 0
		for o, ot := range out {
			want := f32s(ot)
			if off+len(want) > len(got) {
				t.Fatalf("case %d %v: the emulation wrote %d floats", i, c, len(got))
			}
			if k := sameBits(got[off:off+len(want)], want); k >= 0 {
				t.Fatalf("case %d %v: output %d differs at %d: rnn.cu %#08x, CPU %#08x", i, c, o, k, math.Float32bits(got[off+k]), math.Float32bits(want[k]))
			}
			off += len(want)
		}
		if off != len(got) {
			t.Fatalf("case %d: the emulation wrote %d floats, the CPU %d", i, len(got), off)
		}
	}
}

// emuPrelude stands in for the CUDA builtins exact.cu and rnn.cu use.
const emuPrelude = `// Host stand-ins for the CUDA builtins: the kernels run on the CPU, the
// blocks one after the other, a block's threads as coroutines (ucontext)
// that __syncthreads switches between; IEEE float32 arithmetic, fmaf for
// __fmaf_rn.
#include <cmath>
#include <cstdint>
#include <cstring>
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
static void emu_tramp() {
	emu_fn();
	emu_done[emu_cur] = 1;
}

template <class F>
void emu_launch(dim3 grid, dim3 block, F f) {
	gridDim = grid;
	blockDim = block;
	unsigned nt = block.x * block.y * block.z;
	emu_ctx.resize(nt);
	emu_done.resize(nt);
	emu_stack.resize(nt);
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
				// Round by round: each live thread runs to its next
				// barrier or its end.
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
`

// emuDriver reads a case (rnn_geom, steps, X, W, R, B, initial_h,
// initial_c, P as counted float arrays, sequence_lens as int32s; count -1:
// absent), makes Engine.RNN's launches and writes Y, Y_h (and Y_c).
const emuDriver = `// Runs Engine.RNN's launch sequence (cuda/exact/rnn.go) on the emulated
// kernels: reads a case from argv[1], writes Y, Y_h, Y_c to argv[2].
#include <cstdio>
#include <cstdlib>
static FILE* in;
static void rd(void* p, size_t n) { if (fread(p, 1, n, in) != n) { fprintf(stderr, "short read\n"); exit(2); } }
template <class T> static std::vector<T> arr(bool* present) {
	long long n; rd(&n, 8);
	std::vector<T> v;
	*present = n >= 0;
	if (n > 0) { v.resize(n); rd(v.data(), n * sizeof(T)); }
	return v;
}
static unsigned gridOf(long long n, long long per) { long long g = (n + per - 1) / per; return (unsigned)std::min(std::max(g, 1LL), 3LL); }
int main(int argc, char** argv) {
	in = fopen(argv[1], "rb");
	rnn_geom g; int f[29]; rd(f, sizeof f); memcpy(&g, f, sizeof g);
	static_assert(sizeof(rnn_geom) == 29 * 4, "rnn_geom");
	int steps; rd(&steps, 4);
	bool px, pw, pr, pb, ph0, pc0, pp, pl;
	auto X = arr<float>(&px), W = arr<float>(&pw), R = arr<float>(&pr), B = arr<float>(&pb), H0 = arr<float>(&ph0), C0 = arr<float>(&pc0), P = arr<float>(&pp);
	auto L = arr<int>(&pl);
	fclose(in);
	int H = g.hidden, G = (g.kind == 2 ? 4 : g.kind == 1 ? 3 : 1) * H, D = g.dirs;
	long long rows = (long long)g.seq * g.batch, st = (long long)D * g.batch * H;
	long long o_rt = D * rows * G, o_init = o_rt + (long long)D * H * G, o_rbh = o_init + D * G, o_hs = o_rbh + D * H,
		o_cs = o_hs + 2 * st, o_zb = o_cs + st, o_rh = o_zb + st, n_work = o_rh + st;
	std::vector<float> work(n_work + 1, __int_as_float(0x7fbadbad));
	long long ylen = rows * D * H;
	std::vector<float> y(ylen + 1, __int_as_float(0x7fbadbad)), yh(st + 1, __int_as_float(0x7fbadbad)), yc(st + 1, __int_as_float(0x7fbadbad));
	float* wk = work.data();
	auto opt = [](bool p, std::vector<float>& v) -> const float* { return p ? v.data() : nullptr; };
	float* cs = g.kind == 2 ? wk + o_cs : nullptr;
	const int* lens = pl ? L.data() : nullptr;
	if (g.batch > 0) {
		long long n = (long long)D * G + D * H + st;
		emu_launch({gridOf(n, 256), 1, 1}, {256, 1, 1}, [&] { vx_rnn_start(g, opt(pb, B), opt(ph0, H0), opt(pc0, C0), wk + o_init, wk + o_rbh, wk + o_hs, cs); });
		copy_geom cg = {3, {D, H, G, 0, 0, 0}, {G * H, 1, H, 0, 0, 0}, {H * G, G, 1, 0, 0, 0}};
		long long nc = (long long)D * H * G;
		emu_launch({gridOf(nc, 256), 1, 1}, {256, 1, 1}, [&] { vx_copy(cg, R.data(), wk + o_rt, nc); });
		if (rows > 0)
			emu_launch({(unsigned)((G + 63) / 64), (unsigned)((rows + 63) / 64), (unsigned)D}, {256, 1, 1},
				[&] { vx_rnn_proj((int)rows, G, g.input, X.data(), W.data(), wk + o_init, wk); });
		if (lens) std::fill(y.begin(), y.begin() + ylen, 0.0f);
		dim3 sg = {(unsigned)((H + 31) / 32), (unsigned)g.batch, (unsigned)D};
		dim3 sb = {32, (unsigned)(g.kind == 2 ? 4 : g.kind == 1 ? (g.lbr ? 3 : 2) : 1), 1};
		dim3 hg = {(unsigned)((H + 127) / 128), (unsigned)g.batch, (unsigned)D};
		for (int t = 0; t < steps; t++) {
			float* hin = wk + o_hs + (t % 2) * st;
			float* hout = wk + o_hs + ((t + 1) % 2) * st;
			emu_launch(sg, sb, [&] { vx_rnn_step(g, t, lens, wk, wk + o_rt, wk + o_rbh, opt(pp, P), hin, hout, cs, wk + o_zb, wk + o_rh, y.data()); });
			if (g.kind == 1 && !g.lbr)
				emu_launch(hg, {128, 1, 1}, [&] { vx_rnn_gru_hh(g, t, lens, wk, wk + o_rt, hin, hout, wk + o_zb, wk + o_rh, y.data()); });
		}
		emu_launch({gridOf(st, 256), 1, 1}, {256, 1, 1}, [&] { vx_rnn_final(g, wk + o_hs + (steps % 2) * st, cs, yh.data(), g.kind == 2 ? yc.data() : nullptr); });
	}
	FILE* out = fopen(argv[2], "wb");
	fwrite(y.data(), 4, ylen, out);
	fwrite(yh.data(), 4, st, out);
	if (g.kind == 2) fwrite(yc.data(), 4, st, out);
	fclose(out);
	return 0;
}
`

// buildEmu compiles exact.cu and the family's file cu with the host C++
// compiler under prelude, then driver, into a program in a temporary
// directory (returned with the program's path). It skips the test with
// -short, without g++, or when exact.cu needs builtins the emulation
// lacks; a compile error in cu or the driver fails it.
func buildEmu(t *testing.T, cu, prelude, driver string) (dir, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	dir = t.TempDir()
	src := prelude
	for _, f := range kernels.Sources {
		if f.Name == "exact.cu" || f.Name == cu {
			src += "#line 1 \"" + f.Name + "\"\n" + f.Text
		}
	}
	src += "#line 1 \"driver\"\n" + driver
	cpp := filepath.Join(dir, "emu.cpp")
	bin = filepath.Join(dir, "emu")
	if err := os.WriteFile(cpp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cxx, "-std=c++20", "-O1", "-ffp-contract=off", "-pthread", "-o", bin, cpp).CombinedOutput(); err != nil {
		if strings.Contains(string(out), cu+":") || strings.Contains(string(out), "driver:") {
			t.Fatalf("%s does not compile: %s", cu, out)
		}
		t.Skipf("exact.cu uses builtins the emulation lacks: %s", out)
	}
	return dir, bin
}

// runEmu runs the emulation program bin (buildEmu) on the input bytes in,
// its files in dir, and returns the floats it wrote; what names the case
// in a failure.
func runEmu(t *testing.T, dir, bin string, in []byte, what string) []float32 {
	t.Helper()
	inf, outf := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(inf, in, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, inf, outf).CombinedOutput(); err != nil {
		t.Fatalf("%s: emulation: %v %s", what, err, out)
	}
	raw, err := os.ReadFile(outf)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(raw)/4)
	for k := range got {
		got[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
	}
	return got
}
