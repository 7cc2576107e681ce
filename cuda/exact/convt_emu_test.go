package exact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// TestConvTKernelsEmulated runs convt.cu itself on the CPU (exact.cu and
// convt.cu compiled by the host C++ compiler under emuPrelude, with
// __syncthreads_or added) with Engine.ConvTWith's launches (the weight
// check in one block of 256 threads, then vx_convt's grid-stride loop
// capped at three blocks) on random ConvTransposes of rank 1 to 3, the
// tiled geometry with finite and non-finite weights, and the case where
// the CPU's two chains differ (-0); the outputs must be kernel/nn's bits.
// Skipped without g++ or with -short.
func TestConvTKernelsEmulated(t *testing.T) {
	dir, bin := buildEmu(t, "convt.cu", emuPrelude+convtEmuPrelude, convtEmuDriver)
	r := rand.New(rand.NewSource(3))
	cases := []emuConvT{
		{x: []int{1, 1, 1, 1}, w: []int{1, 1, 2, 2}, st: []int{2, 2}, x0: []float32{-1e-30}, w0: []float32{1e-30, 1, 1, -1}},
		{x: []int{2, 6, 3, 4}, w: []int{6, 5, 2, 3}, st: []int{2, 3}, bias: true},
		{x: []int{1, 7, 3, 3}, w: []int{7, 4, 2, 2}, st: []int{2, 2}, bias: true, inf: true},
	}
	for len(cases) < 60 {
		// An empty output is left out: kernel/nn's addBias divides by the
		// output plane's size.
		if c := randEmuConvT(r); c.nonEmpty() {
			cases = append(cases, c)
		}
	}
	tiledNonFinite, negZero := 0, 0
	for i, c := range cases {
		n, g := c.node()
		x, w, b := c.data(r)
		ins := []*tensor.Tensor{tensor.From(x, c.x...), tensor.From(w, c.w...)}
		if b != nil {
			ins = append(ins, tensor.From(b, len(b)))
		}
		k, err := builtin.Registry().Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		out, err := k.Run(&kernel.Ctx{}, n, ins)
		if err != nil {
			t.Fatalf("case %d %+v: CPU: %v", i, c, err)
		}
		want := f32s(out[0])
		if len(want) != g.OutLen() {
			t.Fatalf("case %d: geometry %+v: %d outputs, the CPU's %v", i, g, g.OutLen(), out[0].Shape)
		}
		mode := ConvTGeneral
		if g.Tiled() {
			mode = ConvTChecked
		}
		if err := g.check(); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		wr := func(v any) { binary.Write(&buf, binary.LittleEndian, v) }
		fields := []int32{int32(g.C), int32(g.D), int32(g.H), int32(g.W), int32(g.M), int32(g.OD), int32(g.OH), int32(g.OW),
			int32(g.G), int32(g.KD), int32(g.KH), int32(g.KW), int32(g.SD), int32(g.SH), int32(g.SW),
			int32(g.PD), int32(g.PH), int32(g.PW), int32(g.DD), int32(g.DH), int32(g.DW)}
		wr(fields)
		wr([]int32{int32(g.N), int32(mode)})
		for _, v := range [][]float32{x, w, b} {
			wr(int64(len(v)))
			wr(v)
		}
		wr(int64(len(want)))
		got := runEmu(t, dir, bin, buf.Bytes(), fmt.Sprintf("case %d", i))
		if k := sameBits(got, want); k >= 0 {
			t.Fatalf("case %d %+v (%+v): output %d: convt.cu %#08x, CPU %#08x", i, c, g, k, math.Float32bits(got[k]), math.Float32bits(want[k]))
		}
		if g.Tiled() && c.inf {
			tiledNonFinite++
		}
		if c.x0 != nil && math.Float32bits(want[0]) == 0x80000000 {
			negZero++
		}
	}
	if tiledNonFinite == 0 || negZero != 1 {
		t.Fatalf("%d tiled cases with non-finite weights, %d -0 cases", tiledNonFinite, negZero)
	}
}

// emuConvT is one ConvTranspose: X and W shapes, strides, dilations,
// pads (begin, end), output_padding (nil: defaults), group, a bias, an
// Inf weight, fixed operands.
type emuConvT struct {
	x, w, st, dil, pads, opad []int
	group                     int
	bias, inf                 bool
	x0, w0                    []float32
}

func randEmuConvT(r *rand.Rand) emuConvT {
	rank := 1 + r.Intn(3)
	g := 1 + r.Intn(3)
	c := emuConvT{group: g, bias: r.Intn(2) == 0, inf: r.Intn(5) == 0}
	c.x = []int{1 + r.Intn(2), g * (1 + r.Intn(5))}
	c.w = []int{c.x[1], 1 + r.Intn(5)}
	tiled := r.Intn(3) == 0
	if tiled {
		c.group, c.x[1], c.w[0], rank = 1, 1+r.Intn(9), 0, 2
		c.w[0] = c.x[1]
	}
	for range rank {
		k := 1 + r.Intn(3)
		c.x, c.w = append(c.x, 1+r.Intn(9-2*rank)), append(c.w, k)
		if tiled {
			c.st = append(c.st, k)
			continue
		}
		s, d := 1+r.Intn(3), 1+r.Intn(2)
		c.st, c.dil = append(c.st, s), append(c.dil, d)
		c.opad = append(c.opad, r.Intn(max(s, d)))
	}
	if !tiled {
		for range 2 * rank {
			c.pads = append(c.pads, r.Intn(2))
		}
	}
	return c
}

func (c emuConvT) nonEmpty() bool {
	_, g := c.node()
	return g.OD > 0 && g.OH > 0 && g.OW > 0
}

// node is c's ConvTranspose node and its geometry (kernel/nn's sizes
// from explicit pads).
func (c emuConvT) node() (*ir.Node, ConvTGeom) {
	nd := len(c.x) - 2
	n := &ir.Node{OpType: "ConvTranspose", Version: 11, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y"}}
	set := func(name string, v []int) {
		if v == nil {
			return
		}
		a := &ir.Attr{Name: name, Kind: ir.AttrInts}
		for _, e := range v {
			a.Ints = append(a.Ints, int64(e))
		}
		n.Attrs[name] = a
	}
	set("strides", c.st)
	set("dilations", c.dil)
	set("pads", c.pads)
	set("output_padding", c.opad)
	grp := max(c.group, 1)
	n.Attrs["group"] = &ir.Attr{Name: "group", Kind: ir.AttrInt, I: int64(grp)}
	at := func(v []int, i, def int) int {
		if v == nil {
			return def
		}
		return v[i]
	}
	g := ConvTGeom{Rank: nd, N: c.x[0], C: c.x[1], M: c.w[1] * grp, G: grp}
	dims := [3][7]*int{{&g.D, &g.OD, &g.KD, &g.SD, &g.DD, &g.PD, &g.PED}, {&g.H, &g.OH, &g.KH, &g.SH, &g.DH, &g.PH, &g.PEH}, {&g.W, &g.OW, &g.KW, &g.SW, &g.DW, &g.PW, &g.PEW}}
	for j, d := range dims {
		v := [7]int{1, 1, 1, 1, 1, 0, 0}
		if i := j - (3 - nd); i >= 0 {
			in, k, s, dl := c.x[2+i], c.w[2+i], at(c.st, i, 1), at(c.dil, i, 1)
			pb, pe := at(c.pads, i, 0), at(c.pads, nd+i, 0)
			v = [7]int{in, s*(in-1) + at(c.opad, i, 0) + (k-1)*dl + 1 - pb - pe, k, s, dl, pb, pe}
		}
		for f, p := range d {
			*p = v[f]
		}
	}
	return n, g
}

// data is c's operands: random (X with specials, W with subnormals and ±0,
// one +Inf where c.inf), or its fixed ones.
func (c emuConvT) data(r *rand.Rand) (x, w, b []float32) {
	if c.x0 != nil {
		return c.x0, c.w0, nil
	}
	x = emuData(r, tensor.NumElems(c.x))
	w = emuData(r, tensor.NumElems(c.w))
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			w[i] = float32(math.Copysign(1e-39, float64(i%2*2-1)))
		}
	}
	if c.inf {
		w[r.Intn(len(w))] = float32(math.Inf(1))
	}
	if c.bias {
		b = emuData(r, c.w[1]*max(c.group, 1))
	}
	return x, w, b
}

func (c emuConvT) String() string {
	return fmt.Sprintf("X%v W%v s%v d%v p%v op%v g%d", c.x, c.w, c.st, c.dil, c.pads, c.opad, c.group)
}

// convtEmuPrelude adds __syncthreads_or: the threads OR their predicate
// into one word between two barriers; thread 0, which the emulation
// resumes first, clears it after the second.
const convtEmuPrelude = `
static int emu_or;
inline int __syncthreads_or(int p) {
	emu_or |= p != 0;
	__syncthreads();
	int r = emu_or;
	__syncthreads();
	if (threadIdx.x == 0) emu_or = 0;
	return r;
}
`

// convtEmuDriver reads a case (convt_geom, N, mode, X, W, B as counted
// floats, the output's length), makes Engine.ConvTWith's launches and
// writes Y.
const convtEmuDriver = `
#include <cstdio>
#include <cstdlib>
static FILE* in;
static void rd(void* p, size_t n) { if (n && fread(p, 1, n, in) != n) { fprintf(stderr, "short read\n"); exit(2); } }
static std::vector<float> arr() { long long n; rd(&n, 8); std::vector<float> v(n + 1); rd(v.data(), n * 4); v.resize(n); return v; }
int main(int argc, char** argv) {
	in = fopen(argv[1], "rb");
	convt_geom g; int f[21]; rd(f, sizeof f); memcpy(&g, f, sizeof g);
	static_assert(sizeof(convt_geom) == 21 * 4, "convt_geom");
	int nm[2]; rd(nm, 8);
	int N = nm[0], mode = nm[1];
	auto x = arr(), w = arr(), b = arr();
	long long n; rd(&n, 8);
	fclose(in);
	std::vector<float> y(n + 1, __int_as_float(0x7fbadbad));
	int flag = -1;
	if (mode == 2) emu_launch({1, 1, 1}, {256, 1, 1}, [&] { vx_convt_finite(w.data(), (long long)w.size(), &flag); });
	long long blocks = std::min(std::max((n + 255) / 256, 1LL), 3LL);
	emu_launch({(unsigned)blocks, 1, 1}, {256, 1, 1}, [&] { vx_convt(g, N, x.data(), w.data(), b.empty() ? nullptr : b.data(), mode, &flag, y.data()); });
	FILE* out = fopen(argv[2], "wb");
	fwrite(y.data(), 4, n, out);
	fclose(out);
	return 0;
}
`
