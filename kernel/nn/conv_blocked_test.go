package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// blockedCase is a convolution on B16 tensors.
type blockedCase struct {
	c, m, h, w, k, s, p int
	bias, res, clamp    bool
	g                   int // groups (0: one)
}

func (c blockedCase) groups() int { return max(1, c.g) }

// blockedNode is c's Conv node.
func blockedNode(c blockedCase) *ir.Node {
	return node("Conv", ints("strides", int64(c.s), int64(c.s)), ints("pads", int64(c.p), int64(c.p), int64(c.p), int64(c.p)),
		intAttr("group", int64(c.groups())))
}

// runBlocked runs c through convBlocked (from and to planes through
// ToB16 and FromB16) and checks that the output's ring is zero.
func runBlocked(t testing.TB, p *parallel.Pool, l kernel.ISA, f *forced, c blockedCase, x, w, b, res []float32, lohi *[2]float32) []float32 {
	pool := mach(p, l, f)
	t.Helper()
	s, err := setupConv(blockedNode(c), []int{1, c.c, c.h, c.w}, []int{c.m, c.c / c.groups(), c.k, c.k})
	if err != nil {
		t.Fatal(err)
	}
	z, ok := convBlockedOK(pool, s)
	if !ok {
		t.Fatalf("%+v: convBlockedOK false", c)
	}
	bi, bo := B16{c.c, c.h, c.w}, B16{c.m, s.g.out[0], s.g.out[1]}
	xb := make([]float32, bi.Len()+B16Slack)
	ToB16(bi, x, xb)
	for i := bi.Len(); i < len(xb); i++ {
		xb[i] = float32(math.NaN()) // the slack is read, never used
	}
	yb := make([]float32, bo.Len())
	for i := range yb {
		yb[i] = 7 // the ring must be zeroed
	}
	var rb []float32
	if res != nil {
		rb = make([]float32, bo.Len())
		ToB16(bo, res, rb)
	}
	convBlocked(pool, s, z, xb, w, b, yb, rb, lohi)
	for q := 0; q < bo.C; q++ {
		for y := -1; y <= bo.H; y++ {
			for x := -1; x <= bo.W; x++ {
				if y >= 0 && y < bo.H && x >= 0 && x < bo.W {
					continue
				}
				if v := yb[bo.At(q, y, x)]; v != 0 || math.Signbit(float64(v)) {
					t.Fatalf("%+v: ring (%d, %d, %d) = %g", c, q, y, x, v)
				}
			}
		}
	}
	y := make([]float32, c.m*bo.H*bo.W)
	FromB16(bo, yb, y)
	return y
}

// TestConvBlockedTwin: the convolution on B16 tensors gives the bits of
// the portable planar convolution with the same epilogue (bias, residual,
// clamp), for strides 1 and 2, 1x1 and 3x3 kernels, pads 0 and 1, odd
// sizes, groups of whole blocks, NaN and Inf inputs, and 1, 2 and 8
// workers, at each vector level (AVX2's amd64.BlockA6, AVX-512's ConvZ).
func TestConvBlockedTwin(t *testing.T) {
	if !fastOK() {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewSource(16))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	cases := []blockedCase{
		{16, 16, 8, 8, 3, 1, 1, true, false, true, 0},
		{32, 64, 14, 14, 3, 1, 1, true, true, true, 0},
		{64, 32, 7, 7, 3, 1, 1, false, true, false, 0},
		{16, 48, 13, 17, 3, 2, 1, true, false, true, 0},
		{32, 32, 9, 11, 1, 2, 0, true, false, false, 0},
		{48, 16, 5, 23, 1, 1, 0, false, false, true, 0},
		{16, 32, 3, 3, 3, 1, 1, true, true, true, 0},
		// Groups of whole blocks (RegNetX's 16-channel groups), strides 1
		// and 2, and groups of two blocks.
		{32, 32, 14, 14, 3, 2, 1, true, false, true, 2},
		{64, 64, 9, 13, 3, 1, 1, true, true, true, 4},
		{64, 128, 7, 7, 3, 1, 1, false, false, true, 2},
		{96, 96, 11, 10, 3, 2, 1, true, true, false, 3},
	}
	for i := 0; i < 12; i++ {
		k := 1 + 2*r.Intn(2)
		cases = append(cases, blockedCase{16 * (1 + r.Intn(4)), 16 * (1 + r.Intn(5)), 2 + r.Intn(30), 2 + r.Intn(30), k,
			1 + r.Intn(2), r.Intn(2) * (k / 2), r.Intn(2) == 0, r.Intn(2) == 0, r.Intn(2) == 0, 0})
	}
	// Every kernel shape the blocked convolution has, forced on one layer
	// of each stride.
	var tiles []zShape
	for ci, k := range amd64.ConvZShapes {
		if k[3] >= 16 && amd64.EnabledZ {
			tiles = append(tiles, zShape{k[0], k[1], k[2]})
			cases = append(cases, blockedCase{32, 64, 11, 9 + ci%7, 3, k[3] / 16, 1, true, ci%2 == 0, true, 0})
		}
	}
	first := len(cases) - len(tiles)
	for ci, c := range cases {
		var f *forced
		if ci >= first {
			f = &forced{tileZB: tiles[ci-first]}
		}
		x := specialF32(r, c.c*c.h*c.w, ci%2 == 0)
		w := specialF32(r, c.m*c.c/c.groups()*c.k*c.k, ci%3 == 0)
		var b []float32
		in := []*tensor.Tensor{tensor.From(x, 1, c.c, c.h, c.w), tensor.From(w, c.m, c.c/c.groups(), c.k, c.k)}
		if c.bias {
			b = specialF32(r, c.m, ci%4 == 1)
			in = append(in, tensor.From(b, c.m))
		}
		n := blockedNode(c)
		oh, ow := (c.h+2*c.p-c.k)/c.s+1, (c.w+2*c.p-c.k)/c.s+1
		var res []float32
		ep := kernel.Epilogue{}
		if c.res {
			res = specialF32(r, c.m*oh*ow, ci%2 == 1)
			ep.Residual = res
		}
		var lohi *[2]float32
		if c.clamp {
			lohi = &[2]float32{-0.5, 6}
			ep.Lo, ep.Hi, ep.HasLo, ep.HasHi = -0.5, 6, true, true
		}
		// The reference: the portable planar convolution, the epilogue
		// applied by its Into (as a fused layer's).
		want := tensor.New(tensor.Float32, 1, c.m, oh, ow)
		ctx := &kernel.Ctx{Pool: pools[0], ISA: kernel.ISAPortable, Epilogue: ep}
		if err := intoConv(ctx, n, in, []*tensor.Tensor{want}); err != nil {
			t.Fatal(err)
		}
		if ep.Active() && !ctx.Epilogue.Applied {
			t.Fatalf("case %d: the reference did not apply the epilogue", ci)
		}
		for _, l := range vectorLevels() {
			if f != nil && l != kernel.ISAAVX512 {
				continue // a forced ConvZ tile
			}
			for _, p := range pools {
				got := runBlocked(t, p, l, f, c, x, w, b, res, lohi)
				if d := sameF32(got, want.Data.([]float32)); d >= 0 {
					t.Fatalf("case %d %+v, %v, %d workers: y[%d] = %g (%#x), planar %g", ci, c, l, p.Workers(), d, got[d],
						math.Float32bits(got[d]), want.Data.([]float32)[d])
				}
			}
		}
	}
}

// BenchmarkConvBlocked is resnet18's 3x3 convolutions on B16 tensors, one
// worker (compare BenchmarkConv3x3's conv.direct, planar: the same
// kernel, with the padded copy and the transposes).
func BenchmarkConvBlocked(b *testing.B) {
	if !fastOK() {
		b.Skip("no AVX2")
	}
	for _, c := range []struct{ ch, hw int }{{64, 56}, {128, 28}, {256, 14}, {512, 7}} {
		b.Run(fmt.Sprintf("%dx%d", c.ch, c.hw), func(b *testing.B) {
			r := rand.New(rand.NewSource(1))
			s, err := setupConv(node("Conv", ints("pads", 1, 1, 1, 1)), []int{1, c.ch, c.hw, c.hw}, []int{c.ch, c.ch, 3, 3})
			if err != nil {
				b.Fatal(err)
			}
			z, ok := convBlockedOK(machineOf(nil), s)
			if !ok {
				b.Skip("no tile")
			}
			bl := B16{c.ch, c.hw, c.hw}
			xb := make([]float32, bl.Len()+B16Slack)
			ToB16(bl, randF32(r, c.ch*c.hw*c.hw), xb)
			yb := make([]float32, bl.Len())
			w := randF32(r, c.ch*c.ch*9)
			p := parallel.New(1)
			defer p.Close()
			for i := 0; i < b.N; i++ {
				convBlocked(mach(p, kernel.ISABest, nil), s, z, xb, w, nil, yb, nil, nil)
			}
			b.ReportMetric(2*float64(c.ch*c.ch*9*c.hw*c.hw)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestBlockedChainTwin: a chain of blocked convolutions shaped like two
// resnet blocks (a residual, a stride-2 block with a 1x1 downsample) and
// two grouped 3x3s (RegNetX's, strides 1 and 2)
// gives the bits of the planar portable convolutions one after the other,
// with 1, 2 and 8 workers, twice (the second run on reused buffers), at
// each vector level.
func TestBlockedChainTwin(t *testing.T) {
	if !fastOK() {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewSource(17))
	relu := &[2]float32{0, float32(math.Inf(1))}
	convG := func(k, s, p, g int) *node_ {
		return &node_{n: node("Conv", ints("strides", int64(s), int64(s)), ints("pads", int64(p), int64(p), int64(p), int64(p)),
			intAttr("group", int64(g))), k: k, g: g}
	}
	conv := func(k, s, p int) *node_ { return convG(k, s, p, 1) }
	type st struct {
		c         *node_
		cin, cout int
		in, res   int
		clamp     bool
	}
	spec := []st{
		{conv(3, 1, 1), 16, 16, 0, -1, true},
		{conv(3, 1, 1), 16, 16, 1, 0, true},
		{conv(3, 2, 1), 16, 32, 2, -1, true},
		{conv(1, 2, 0), 16, 32, 2, -1, false},
		{conv(3, 1, 1), 32, 32, 3, 4, true},
		{convG(3, 1, 1, 2), 32, 32, 5, 4, true},
		{convG(3, 2, 1, 2), 32, 32, 6, -1, false},
	}
	H := 13
	x := specialF32(r, 16*H*H, false)
	var steps []BlockedStep
	vals := [][]float32{x}
	shapes := [][]int{{1, 16, H, H}}
	for i, sp := range spec {
		w := specialF32(r, sp.cout*sp.cin/max(1, sp.c.g)*sp.c.k*sp.c.k, false)
		b := specialF32(r, sp.cout, false)
		ws := []int{sp.cout, sp.cin / max(1, sp.c.g), sp.c.k, sp.c.k}
		in := shapes[sp.in]
		oh := (in[2]+2*int(sp.c.n.Ints("pads", nil)[0])-sp.c.k)/int(sp.c.n.Ints("strides", nil)[0]) + 1
		ep := kernel.Epilogue{}
		var clamp *[2]float32
		if sp.res >= 0 {
			ep.Residual = vals[sp.res]
		}
		if sp.clamp {
			clamp = relu
			ep.Lo, ep.HasLo = 0, true
		}
		y := tensor.New(tensor.Float32, 1, sp.cout, oh, oh)
		ctx := &kernel.Ctx{ISA: kernel.ISAPortable, Epilogue: ep}
		if err := intoConv(ctx, sp.c.n, []*tensor.Tensor{tensor.From(vals[sp.in], in...), tensor.From(w, ws...), tensor.From(b, sp.cout)}, []*tensor.Tensor{y}); err != nil {
			t.Fatal(err)
		}
		if ep.Active() && !ctx.Epilogue.Applied {
			t.Fatal("reference epilogue not applied")
		}
		vals = append(vals, y.Data.([]float32))
		shapes = append(shapes, y.Shape)
		steps = append(steps, BlockedStep{Attrs: sp.c.n, W: w, WShape: ws, B: b, In: sp.in, Res: sp.res, Out: i + 1, Clamp: clamp})
	}
	want := vals[len(vals)-1]
	nonzero := 0
	for _, v := range want {
		if v != 0 && v == v {
			nonzero++
		}
	}
	if nonzero < len(want)/4 {
		t.Fatalf("only %d of %d outputs are finite and nonzero: the test would prove little", nonzero, len(want))
	}
	for _, l := range vectorLevels() {
		ch, err := NewBlockedChain(ctxAt(nil, l, nil), steps, shapes[0], len(spec))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []int{1, 2, 8} {
			p := parallel.New(w)
			for rep := 0; rep < 2; rep++ {
				got := make([]float32, len(want))
				ch.Run(ctxAt(p, l, nil), x, got)
				if d := sameF32(got, want); d >= 0 {
					t.Fatalf("%v, %d workers, run %d: y[%d] = %g, planar %g", l, w, rep, d, got[d], want[d])
				}
			}
			p.Close()
		}
	}
}

type node_ struct {
	n    *ir.Node
	k, g int
}
