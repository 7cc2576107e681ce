package fast

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

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
)

// emuPrelude8 adds to emuPrelude (its block scheduler and fragment
// tables) what fast_int8.cu needs: the float intrinsics as the PTX ISA
// defines them (IEEE float32 operations rounded to nearest even; cvt.rni
// to s32 takes NaN to 0 and saturates) and mma.sync m16n8k32 .s8 from
// the ISA's fragment layout ("Matrix Fragments for mma.m16n8k32", .s8):
//
//	groupID = lane >> 2, tig = lane % 4; four s8 a register, low byte first
//	A (16x32, row): a_i (i = 0..15) row groupID for i < 4 and 8 <= i < 12,
//	  groupID + 8 otherwise; col 4*tig + (i & 3), + 16 for i >= 8
//	B (32x8, col): b_i (i = 0..7) row 4*tig + (i & 3), + 16 for i >= 4; col groupID
//	C, D (16x8, s32): as m16n8k16's
//
// The products and sums are exact integers (int64 here, in int32's range).
// ldmatrix is emuPrelude's emu_ldm (its 16-bit pairs are the four bytes
// of a register).
const emuPrelude8 = `#define V8_EMU 1
#include <climits>
#include <algorithm>
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __int2float_rn(int v) { return (float)v; }
inline int __float2int_rn(float v) {
	if (v != v) return 0;
	if (v >= 2147483648.0f) return INT_MAX;
	if (v <= -2147483648.0f) return INT_MIN;
	return (int)nearbyintf(v);
}
struct int2 { int x, y; };
inline int2 make_int2(int a, int b) { return {a, b}; }
static int emu_s8(unsigned reg, int byte) { return (signed char)(reg >> (8 * byte)); }
static int emu_A8(int w, int r, int k) {
	int reg = (k >= 16 ? 2 : 0) + (r >= 8 ? 1 : 0);
	return emu_s8(emu_a[w][(r % 8) * 4 + (k % 16) / 4][reg], k % 4);
}
static int emu_B8(int w, int k, int n) {
	return emu_s8(emu_b[w][n * 4 + (k % 16) / 4][k >= 16 ? 1 : 0], k % 4);
}
inline void v8_ldm4(unsigned* d, const unsigned char* p) { emu_ldm(d, (const unsigned short*)p, 4); }
inline void v8_ldm2(unsigned* d, const unsigned char* p) { emu_ldm(d, (const unsigned short*)p, 2); }
inline void v8_mma(int* c, const unsigned* a, const unsigned* b) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	for (int i = 0; i < 4; i++) emu_a[w][lane][i] = a[i];
	for (int i = 0; i < 2; i++) emu_b[w][lane][i] = b[i];
	emu_yield();
	int gid = lane >> 2, tig = lane & 3;
	for (int q = 0; q < 4; q++) {
		int r = gid + (q >> 1) * 8, n = tig * 2 + (q & 1);
		long long s = c[q];
		for (int k = 0; k < 32; k++) s += emu_A8(w, r, k) * emu_B8(w, k, n);
		if (s > INT_MAX || s < INT_MIN) { fprintf(stderr, "int32 overflow\n"); exit(4); }
		c[q] = (int)s;
	}
	emu_yield();
}
`

func emuDriver8() string {
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
	v8_geom g; rd(&g, sizeof g);
	unsigned grid[3]; rd(grid, 12);
	int act; float lo, hi, inv; rd(&act, 4); rd(&lo, 4); rd(&hi, 4); rd(&inv, 4);
	bool px, pw, pm, pb, pr;
	auto x = arr<float>(&px); auto w = arr<unsigned char>(&pw); auto mult = arr<float>(&pm);
	auto bias = arr<float>(&pb); auto res = arr<float>(&pr);
	long long ny; rd(&ny, 8);
	// part: the grids cover image 0 only (x and res are image 0's, y
	// image 0's outputs), the geometry's N images all the same: the
	// buffers are sized for N (calloc: the pages no block touches cost
	// nothing), images 0 and 1 of the scratch poisoned.
	int part; rd(&part, 4);
	fclose(in);
	const int Cp = V8_CP(g.C);
	const size_t img = (size_t)g.H * g.W * Cp, nq = (size_t)g.N * img;
	const size_t nyall = part ? (size_t)g.N * g.M * g.OH * g.OW : (size_t)ny;
	float* y = (float*)calloc(nyall, 4);
	for (long long i = 0; i < ny; i++) y[i] = __int_as_float(0x7fbadbad);
	const float* bp = pb ? bias.data() : nullptr;
	const float* rp = pr ? res.data() : nullptr;
	if (part && pr) {
		float* r = (float*)calloc(nyall, 4);
		memcpy(r, res.data(), res.size() * 4);
		rp = r;
	}
	// The scratch under two poisons: a byte v8_quant does not write
	// differs between the runs.
	unsigned char *xq = (unsigned char*)calloc(nq, 1), *xq2 = (unsigned char*)calloc(nq, 1);
	const size_t poisoned = part ? std::min(nq, 2 * img) : nq, written = part ? img : nq;
	memset(xq, 0xa5, poisoned);
	memset(xq2, 0x5a, poisoned);
	emu_launch({grid[2], 1, 1}, {256, 1, 1}, [&] { v8_quant(x.data(), xq, g.N, g.C, g.H * g.W, inv); });
	emu_launch({grid[2], 1, 1}, {256, 1, 1}, [&] { v8_quant(x.data(), xq2, g.N, g.C, g.H * g.W, inv); });
	if (memcmp(xq, xq2, written)) { fprintf(stderr, "v8_quant leaves bytes unwritten\n"); return 5; }
	bool ok = false;
`)
	for _, k := range kernels.FastInt8Kernels[1:] {
		fmt.Fprintf(&b, "\tif (!strcmp(name, %q)) { ok = true; emu_launch({grid[0], grid[1], 1}, {256, 1, 1}, [&] { %s(g, xq, w.data(), mult.data(), bp, rp, act, lo, hi, y); }); }\n", k, k)
	}
	b.WriteString(`	if (!ok) { fprintf(stderr, "no kernel %s\n", name); return 3; }
	FILE* out = fopen(argv[2], "wb");
	fwrite(y, 4, ny, out);
	fclose(out);
	return 0;
}
`)
	return b.String()
}

func buildEmu8(t *testing.T) (dir, bin string) {
	t.Helper()
	return buildEmuOf(t, "fast_int8.cu", emuPrelude+emuPrelude8+"#line 1 \"fast_int8.cu\"\n"+kernels.FastInt8Source()+"#line 1 \"driver\"\n"+emuDriver8())
}

// buildEmuOf compiles an emulation's C++ source (g++; name: the kernels'
// file, for messages) and returns its directory and binary; -short or no
// g++ skips.
func buildEmuOf(t *testing.T, name, src string) (dir, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	dir = t.TempDir()
	cpp := filepath.Join(dir, "emu.cpp")
	bin = filepath.Join(dir, "emu")
	if err := os.WriteFile(cpp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cxx, "-std=c++20", "-O1", "-ffp-contract=off", "-o", bin, cpp).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "_Float16") {
			t.Skipf("g++ without _Float16: %s", out)
		}
		t.Fatalf("%s does not compile under the emulation: %s", name, out)
	}
	return dir, bin
}

// case8 is one INT8 layer: a convolution (or a Gemm, gemm set, as 1x1
// images), its float operands, the activation scale and tile.
type case8 struct {
	g         exact.ConvGeom
	t         Tile
	gemm      bool
	x, w      []float32 // x NCHW (a Gemm's rows), w [M][C*KH*KW]
	sx        float32
	bias, res []float32
	act       exact.Act
}

func (c case8) String() string {
	return fmt.Sprintf("int8 %s gemm %v N%d C%d %dx%d M%d k%dx%d s%d,%d p%d,%d d%d,%d sx %g", c.t, c.gemm, c.g.N, c.g.C, c.g.H, c.g.W, c.g.M, c.g.KH, c.g.KW, c.g.SH, c.g.SW, c.g.PH, c.g.PW, c.g.DH, c.g.DW, c.sx)
}

// packed is c's weights as the kernels read them.
func (c case8) packed(t *testing.T) []byte {
	t.Helper()
	w := c.weights(t)
	if c.gemm {
		return w.PackGemm()
	}
	p, err := w.PackConv(c.g)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (c case8) weights(t *testing.T) Int8Weights {
	t.Helper()
	K := c.g.C * c.g.KH * c.g.KW
	w, err := QuantizeWeights(c.w, c.g.M, K, K, 1)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// twin is the Go twin's output for c.
func (c case8) twin(t *testing.T) []float32 {
	t.Helper()
	y, err := Int8Conv(c.g, c.x, c.weights(t), c.sx, c.bias, c.res, c.act)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func runEmu8(t *testing.T, dir, bin string, c case8) []float32 {
	t.Helper()
	return runEmu8Images(t, dir, bin, c, c.g.N, 0)
}

// runEmu8Images runs c's kernels for a batch of n images (n >= c.g.N; the
// geometry's N is n) of which c's are the first: with n > c.g.N = 1 only
// image 0's blocks run (the quantization's first blocks, the GEMM's
// column blocks up to the one holding output pixel cols-1), on buffers
// sized for n, and image 0's outputs come back (the pixels not computed
// poisoned).
func runEmu8Images(t *testing.T, dir, bin string, c case8, n, cols int) []float32 {
	t.Helper()
	part := n != c.g.N
	if part && c.g.N != 1 {
		t.Fatalf("%v: a part of a batch of %d from %d images", c, n, c.g.N)
	}
	bg := c.g
	bg.N = n
	l, err := planLaunch8(c.t, bg)
	if err != nil {
		t.Fatal(err)
	}
	if part {
		P, G := c.g.OH*c.g.OW, (c.g.C+CPad-1)/CPad // a narrow layer's G is 1 too
		l.grid[0] = uint32((min(cols, P) + c.t.BN - 1) / c.t.BN)
		l.quant = uint32((G*c.g.H*c.g.W + 255) / 256)
	}
	w := c.weights(t)
	pw := c.packed(t)
	var buf bytes.Buffer
	put := func(v any) { binary.Write(&buf, binary.LittleEndian, v) }
	name := make([]byte, 63)
	copy(name, l.kernel)
	put(name)
	put(l.geom)
	put(l.grid)
	put(l.quant)
	put(c.act.Code())
	put(c.act.Lo)
	put(c.act.Hi)
	put(Inv(c.sx))
	put(int64(len(c.x)))
	put(c.x)
	put(int64(len(pw)))
	put(pw)
	mult := w.Mult(c.sx)
	put(int64(len(mult)))
	put(mult)
	for _, a := range [][]float32{c.bias, c.res} {
		if a == nil {
			put(int64(-1))
			continue
		}
		put(int64(len(a)))
		put(a)
	}
	ny := c.g.OutLen()
	put(int64(ny))
	flag := int32(0)
	if part {
		flag = 1
	}
	put(flag)
	return emuExec(t, dir, bin, c, buf.Bytes(), ny)
}

// emuExec runs an emulation driver on its input and returns the ny floats
// it writes (c names the case in failures).
func emuExec(t *testing.T, dir, bin string, c fmt.Stringer, in []byte, ny int) []float32 {
	t.Helper()
	inf, outf := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(inf, in, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, inf, outf).CombinedOutput(); err != nil {
		t.Fatalf("%v: emulation: %v %s", c, err, out)
	}
	raw, err := os.ReadFile(outf)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 4*ny {
		t.Fatalf("%v: %d bytes of output, want %d", c, len(raw), 4*ny)
	}
	y := make([]float32, ny)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return y
}

// Kinds of INT8 case randCase8 draws.
const (
	kindConv   = iota // any convolution, C not a multiple of 16
	kind1x1           // 1x1, strided or not
	kindGemm          // a Gemm (1x1 images), K any
	kindWide          // C a multiple of 16 (ResNet's), kernels up to 3x3
	kindNarrow        // C at most Narrow8 (the v8_n_ kernels), kernels up to 7x7
	kindCount
)

// randCase8 draws a case of kind: inputs mostly normal, with ties of the
// quantization (half-integer multiples of the scale), values past the
// clamp, ±Inf, NaN and ±0 among them; weights with a zero channel and a
// channel with an Inf.
func randCase8(r *rand.Rand, t Tile, kind int) case8 {
	var g exact.ConvGeom
	switch kind {
	case kindGemm:
		g = gemmGeom(1+r.Intn(70), 1+r.Intn(150), 1+r.Intn(160))
	case kind1x1:
		s := 1 + r.Intn(2)
		g = exact.ConvGeom{N: 1 + r.Intn(3), C: 1 + r.Intn(100), H: 1 + r.Intn(9), W: 1 + r.Intn(9), M: 1 + r.Intn(140), G: 1, KH: 1, KW: 1, SH: s, SW: s, DH: 1, DW: 1}
		g.OH, g.OW = (g.H-1)/s+1, (g.W-1)/s+1
	case kindNarrow:
		k := 1 + 2*r.Intn(4)
		g = exact.ConvGeom{N: 1 + r.Intn(3), C: 1 + r.Intn(Narrow8), H: k + r.Intn(12), W: k + r.Intn(12), M: 1 + r.Intn(140), G: 1,
			KH: k, KW: 1 + 2*r.Intn(4), SH: 1 + r.Intn(2), SW: 1 + r.Intn(2), PH: r.Intn(k/2 + 1), PW: r.Intn(2), DH: 1, DW: 1 + r.Intn(2)}
		g.OH = (g.H+2*g.PH-g.KH)/g.SH + 1
		g.OW = (g.W+2*g.PW-((g.KW-1)*g.DW+1))/g.SW + 1
		if g.OW < 1 {
			g.KW, g.DW = 1, 1
			g.OW = (g.W+2*g.PW-1)/g.SW + 1
		}
	default:
		C := 1 + r.Intn(20)
		if kind == kindWide {
			C = CPad * (1 + r.Intn(5))
		} else if C%CPad == 0 {
			C++
		}
		g = exact.ConvGeom{N: 1 + r.Intn(3), C: C, H: 2 + r.Intn(6), W: 2 + r.Intn(6), M: 1 + r.Intn(140), G: 1,
			KH: 1 + 2*r.Intn(2), KW: 1 + 2*r.Intn(2), SH: 1 + r.Intn(2), SW: 1 + r.Intn(2), PH: r.Intn(2), PW: r.Intn(2), DH: 1 + r.Intn(2), DW: 1}
		g.OH = (g.H+2*g.PH-((g.KH-1)*g.DH+1))/g.SH + 1
		g.OW = (g.W+2*g.PW-((g.KW-1)*g.DW+1))/g.SW + 1
		if g.OH < 1 || g.OW < 1 {
			g.DH, g.DW, g.KW, g.PW, g.PH = 1, 1, 1, 1, 1
			g.OH = (g.H+2*g.PH-g.KH)/g.SH + 1
			g.OW = (g.W+2*g.PW-1)/g.SW + 1
		}
	}
	c := case8{g: g, t: t, gemm: kind == kindGemm, sx: float32(0.01 + 0.05*r.Float64())}
	K := g.C * g.KH * g.KW
	c.x = make([]float32, g.N*g.C*g.H*g.W)
	for i := range c.x {
		switch r.Intn(40) {
		case 0:
			c.x[i] = float32((float64(r.Intn(255)-127) + 0.5) * float64(c.sx)) // a tie, or next to one
		case 1:
			c.x[i] = float32(r.NormFloat64() * 400 * float64(c.sx)) // mostly clamped
		case 2:
			c.x[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), float32(math.Copysign(0, -1)), 1e-40}[r.Intn(5)]
		default:
			c.x[i] = float32(r.NormFloat64() * 40 * float64(c.sx))
		}
	}
	c.w = make([]float32, g.M*K)
	for i := range c.w {
		c.w[i] = float32(r.NormFloat64() / math.Sqrt(float64(K)))
	}
	if g.M > 2 {
		clear(c.w[:K])                          // an all-zero channel
		c.w[K+r.Intn(K)] = float32(math.Inf(1)) // a channel quant.WeightScales zeroes
	}
	if r.Intn(2) == 0 {
		c.bias = make([]float32, g.M)
		for i := range c.bias {
			c.bias[i] = float32(r.NormFloat64() * 0.5)
		}
	}
	if r.Intn(2) == 0 && kind != kindGemm {
		c.res = make([]float32, g.OutLen())
		for i := range c.res {
			c.res[i] = float32(r.NormFloat64() * 0.5)
		}
	}
	switch r.Intn(3) {
	case 1:
		c.act = exact.Act{Relu: true}
	case 2:
		c.act = exact.Act{HasLo: true, Lo: -0.5, HasHi: true, Hi: 0.75}
	}
	return c
}

// TestInt8KernelsEmulated runs fast_int8.cu's kernels on the CPU (v8_quant,
// then the GEMM), every tile and kind of layer, under an emulated mma.sync m16n8k32 .s8 (the PTX ISA's
// fragment layout): each output must have the bits of the Go twin
// Int8Conv (a wrong fragment mapping, k order, gather, quantization or
// epilogue order is a differing bit, not an error within a tolerance).
// Then the batch invariance: image 0 alone gives the bits it has in the
// batch.
func TestInt8KernelsEmulated(t *testing.T) {
	dir, bin := buildEmu8(t)
	r := rand.New(rand.NewSource(8))
	for kind := range kindCount {
		for _, tt := range kernels.FastTiles {
			tile := Tile{tt[0], tt[1]}
			for range 2 {
				c := randCase8(r, tile, kind)
				got := runEmu8(t, dir, bin, c)
				want := c.twin(t)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v: output %d: kernel %#08x (%g), twin %#08x (%g)", c, i, math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
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
				alone := runEmu8(t, dir, bin, one)
				for i, v := range alone {
					if math.Float32bits(v) != math.Float32bits(got[i]) {
						t.Fatalf("%v: image 0 alone differs from image 0 in a batch of %d at %d: %#08x vs %#08x", c, c.g.N, i, math.Float32bits(v), math.Float32bits(got[i]))
					}
				}
			}
		}
	}
}

// differ counts the outputs whose bits differ, and the first.
func differ(a, b []float32) (int, int) {
	n, first := 0, -1
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// TestInt8StemBatchEmulated: ResNet-50's stem (3 -> 64 channels, 7x7
// stride 2 pad 3, 224x224; K = 147, one channel group padded from 3 to 16,
// 49 taps in 13 k blocks of 64, the 64x64 tile) under the emulation as
// image 0 of a batch of 256 (12544 output pixels an image, 3,211,264
// columns; a scratch of 205 MB, an output of 822 MB), its first 8 column
// blocks (the emulation's time), against the twin: the sixth session's
// device failure of this case (634,409 outputs of image 0 differing, the
// first at 0) was the GPU test's poison racing the launches
// (int8_cuda_test.go's out); this shows the kernels' indexing at that
// batch does not change image 0's bits.
func TestInt8StemBatchEmulated(t *testing.T) {
	dir, bin := buildEmu8(t)
	r := rand.New(rand.NewSource(19))
	g := exact.ConvGeom{N: 1, C: 3, H: 224, W: 224, M: 64, OH: 112, OW: 112, G: 1, KH: 7, KW: 7, SH: 2, SW: 2, PH: 3, PW: 3, DH: 1, DW: 1}
	c := case8{g: g, t: ChooseTile(g.M, g.OH*g.OW), sx: 4.0 / 127, act: exact.Act{Relu: true}}
	c.x = make([]float32, g.C*g.H*g.W)
	for i := range c.x {
		c.x[i] = float32(r.NormFloat64() * 2)
		if r.Intn(1000) == 0 {
			c.x[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), 1e30, float32(math.Copysign(0, -1))}[r.Intn(4)]
		}
	}
	K := g.C * g.KH * g.KW
	c.w = make([]float32, g.M*K)
	for i := range c.w {
		c.w[i] = float32(r.NormFloat64() / math.Sqrt(float64(K)))
	}
	c.bias = make([]float32, g.M)
	c.res = make([]float32, g.OutLen())
	for i := range c.bias {
		c.bias[i] = float32(r.NormFloat64() * 0.1)
	}
	for i := range c.res {
		c.res[i] = float32(r.NormFloat64())
	}
	want := c.twin(t)
	const cols = 8 * 64
	got := runEmu8Images(t, dir, bin, c, 256, cols)
	P, compared, bad := g.OH*g.OW, 0, 0
	for i := range want {
		if i%P >= cols {
			continue
		}
		compared++
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad == 0 {
				t.Errorf("%v: image 0 of a batch of 256: output %d is %#08x, the twin's %#08x", c, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad != 0 || compared != g.M*cols {
		t.Errorf("%d of %d outputs differ", bad, compared)
	}
}
