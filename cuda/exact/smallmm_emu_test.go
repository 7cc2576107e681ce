package exact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// TestMatMulAsConvEmulated runs exact.cu's batch-folded conv tiles on the
// CPU (emuPrelude) as cuda/engine runs a small product by a weight
// (smallmm.go): A [m, k] by B [k, n] as the 1x1 convolution of m images of
// k channels by the n filters Bᵀ, through every kernel chooseConv can pick
// for that geometry (each tile's _1x1, the 16-byte-load _1x1_va where k is
// a multiple of 4, the one-thread-per-output kernel), launched as
// launchTile does; the outputs must be kernel/nn's MatMul bits, NaN, -0,
// infinities and subnormals included. Skipped without g++ or with -short.
func TestMatMulAsConvEmulated(t *testing.T) {
	dir, bin := buildEmu(t, "exact.cu", emuPrelude, smallmmEmuDriver)
	r := rand.New(rand.NewSource(19))
	type mm struct{ m, n, k int }
	cases := []mm{{1, 1, 1}, {1, 8, 4}, {3, 7, 5}, {16, 16, 64}, {130, 129, 17}, {128, 64, 100}, {33, 8, 8}, {5, 200, 3}}
	for len(cases) < 28 {
		cases = append(cases, mm{1 + r.Intn(140), 1 + r.Intn(140), 1 + r.Intn(90)})
	}
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), math.Float32frombits(3), 1e30}
	checks := 0
	for ci, c := range cases {
		a := make([]float32, c.m*c.k)
		b := make([]float32, c.k*c.n)
		for _, v := range [][]float32{a, b} {
			for i := range v {
				v[i] = float32(r.NormFloat64())
				if ci%3 == 0 && r.Intn(40) == 0 {
					v[i] = specials[r.Intn(len(specials))]
				}
			}
		}
		n := &ir.Node{OpType: "MatMul", Version: 13, Attrs: map[string]*ir.Attr{}, Inputs: []string{"a", "b"}, Outputs: []string{"y"}}
		k, err := builtin.Registry().Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		out, err := k.Run(&kernel.Ctx{}, n, []*tensor.Tensor{tensor.From(a, c.m, c.k), tensor.From(b, c.k, c.n)})
		if err != nil {
			t.Fatal(err)
		}
		want := out[0].Data.([]float32)
		bt := make([]float32, len(b))
		for i := range c.k {
			for j := range c.n {
				bt[j*c.k+i] = b[i*c.n+j]
			}
		}
		g := ConvGeom{N: c.m, C: c.k, H: 1, W: 1, M: c.n, OH: 1, OW: 1, G: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
		var names []string
		for _, tl := range kernels.ConvTiles {
			names = append(names, kernels.ConvTile1x1(tl.Name))
			if tl.Vec {
				names = append(names, vecVariants(tl.Name, g)...)
			}
		}
		names = append(names, kernels.ConvDirect)
		if ch := chooseConv(g, 132, true); !slices.Contains(names, ch) {
			t.Fatalf("%+v: chooseConv picks %s, which this test does not run", c, ch)
		}
		for _, kn := range names {
			var in bytes.Buffer
			wr := func(v any) { binary.Write(&in, binary.LittleEndian, v) }
			wr([]int32{int32(c.m), int32(c.n), int32(c.k), int32(len(kn))})
			in.WriteString(kn)
			wr(a)
			wr(bt)
			got := runEmu(t, dir, bin, in.Bytes(), fmt.Sprintf("%+v %s", c, kn))
			if len(got) != len(want) {
				t.Fatalf("%+v %s: %d outputs for %d", c, kn, len(got), len(want))
			}
			if i := sameBits(got, want); i >= 0 {
				t.Fatalf("%+v %s: output %d = %#08x, the CPU's %#08x", c, kn, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
			checks++
		}
	}
	t.Logf("%d products x kernels, 0 differ", checks)
}

// smallmmEmuDriver reads m, n, k, a kernel name, A and Bᵀ from argv[1],
// runs the kernel as Engine.Conv2DAct launches it for the 1x1 geometry,
// and writes the m x n output to argv[2].
const smallmmEmuDriver = `
#include <cstdio>
#include <cstdlib>
#include <string>
typedef void (*tile_fn)(conv_geom, int, const float*, const float*, const int4*, const float*, const float*, int, float, float, float*);
struct tile { const char* name; int bm, bn; tile_fn f; };
static const tile tiles[] = {
	{"vx_ct128x128_1x1", 128, 128, vx_ct128x128_1x1}, {"vx_ct128x128_1x1_va", 128, 128, vx_ct128x128_1x1_va},
	{"vx_ct64x128_1x1", 64, 128, vx_ct64x128_1x1}, {"vx_ct64x128_1x1_va", 64, 128, vx_ct64x128_1x1_va},
	{"vx_ct64x64_1x1", 64, 64, vx_ct64x64_1x1}, {"vx_ct32x32_1x1", 32, 32, vx_ct32x32_1x1}, {"vx_ct16x16_1x1", 16, 16, vx_ct16x16_1x1},
};
int main(int argc, char** argv) {
	FILE* in = fopen(argv[1], "rb");
	int h[4];
	if (fread(h, 4, 4, in) != 4) return 2;
	int m = h[0], n = h[1], k = h[2];
	std::string name(h[3], ' ');
	if (fread(&name[0], 1, h[3], in) != (size_t)h[3]) return 2;
	std::vector<float> a((size_t)m * k), bt((size_t)n * k), y((size_t)m * n + 1, __int_as_float(0x7fbadbad));
	if (fread(a.data(), 4, a.size(), in) != a.size() || fread(bt.data(), 4, bt.size(), in) != bt.size()) return 2;
	fclose(in);
	conv_geom g = {k, 1, 1, n, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1};
	bool ran = false;
	if (name == "vx_conv_direct") {
		long long total = (long long)m * n;
		unsigned blocks = (unsigned)std::min(std::max((total + 255) / 256, 1LL), 3LL);
		emu_launch({blocks, 1, 1}, {256, 1, 1}, [&] { vx_conv_direct(g, m, a.data(), bt.data(), nullptr, nullptr, 0, 0.0f, 0.0f, y.data()); });
		ran = true;
	}
	for (const tile& t : tiles) {
		if (name != t.name) continue;
		dim3 grid = {(unsigned)((m + t.bn - 1) / t.bn), (unsigned)((n + t.bm - 1) / t.bm), 1};
		emu_launch(grid, {256, 1, 1}, [&] { t.f(g, m, a.data(), bt.data(), nullptr, nullptr, nullptr, 0, 0.0f, 0.0f, y.data()); });
		ran = true;
	}
	if (!ran) { fprintf(stderr, "no kernel %s\n", name.c_str()); return 3; }
	FILE* out = fopen(argv[2], "wb");
	fwrite(y.data(), 4, (size_t)m * n, out);
	fclose(out);
	return 0;
}
`
