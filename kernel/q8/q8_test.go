package q8

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

func randI16(r *rand.Rand, n int) []int16 {
	v := make([]int16, n)
	for i := range v {
		v[i] = int16(r.IntN(255) - 127)
	}
	return v
}

// naive is the reference: exact int64 sums.
func naive(m, n, k int, a, b []int16) []int32 {
	c := make([]int32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s int64
			for kk := 0; kk < k; kk++ {
				s += int64(a[i*k+kk]) * int64(b[kk*n+j])
			}
			c[i*n+j] = int32(s)
		}
	}
	return c
}

func TestIGemmTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {6, 16, 2}, {5, 15, 3}, {7, 17, 255}, {13, 33, 257}, {1, 1000, 512}, {64, 49, 4608}, {100, 3, 9}, {6, 16, 0}}
	for i := 0; i < 20; i++ {
		shapes = append(shapes, [3]int{1 + r.IntN(70), 1 + r.IntN(70), 1 + r.IntN(600)})
	}
	for _, pool := range []*parallel.Pool{nil, parallel.New(3)} {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			a, b := randI16(r, m*k), randI16(r, k*n)
			want := naive(m, n, k, a, b)
			// Modes: portable, AVX2 tile, AVX512_VNNI tile (where the
			// CPU has it; else the AVX2 tile again).
			var got [3][]int32
			for v := range got {
				tw := at([]kernel.ISA{kernel.ISAPortable, kernel.ISAAVX2, kernel.ISABest}[v])
				al, bl := packedLen(m, n, k)
				ap, bp := make([]int16, al), make([]int16, bl)
				packA(ap, a, m, k, k)
				packB(tw, bp, b, n, k, n, 0, (n+tileN-1)/tileN)
				c := make([]int32, m*n)
				for i := range c {
					c[i] = -1
				}
				if k == 0 {
					clear(c)
				}
				igemm(machine{Pool: pool, twins: tw}, m, n, k, ap, bp, c, n)
				got[v] = c
			}
			for v, g := range got {
				if !slices.Equal(g, want) {
					t.Fatalf("shape %v: mode %d (portable, avx2, vnni) differs from the exact sums", s, v)
				}
			}
		}
	}
}

func TestQuantizeTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 1003)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	specials := []float32{0, float32(math.Copysign(0, -1)), 0.5, 1.5, 2.5, -0.5, -1.5, 126.5, 127.5, -127.5, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7f800001), 1e-40}
	copy(x, specials)
	copy(x[500:], specials)
	for _, inv := range []float32{1, 10, 0.37, 1e-3, 1e38} {
		var got [2][]int16
		for v, tw := range []twins{portableTwins, best} {
			got[v] = make([]int16, len(x))
			quantize(tw, got[v], x, inv)
		}
		if !slices.Equal(got[0], got[1]) {
			for i := range x {
				if got[0][i] != got[1][i] {
					t.Fatalf("inv %v x %v: portable %d fast %d", inv, x[i], got[0][i], got[1][i])
				}
			}
		}
	}
}

func TestHalfTwins(t *testing.T) {
	h := make([]tensor.Half, 65536+5)
	for i := range h {
		h[i] = tensor.Half(i)
	}
	var got [2][]float32
	for v, l := range []kernel.ISA{kernel.ISAPortable, kernel.ISABest} {
		got[v] = make([]float32, len(h))
		HalfToFloat32(&kernel.Ctx{ISA: l}, got[v], h)
	}
	for i := range h {
		if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
			t.Fatalf("half %#04x: portable %#08x fast %#08x", uint16(h[i]), math.Float32bits(got[0][i]), math.Float32bits(got[1][i]))
		}
	}
}

// TestQ8ConvTwins runs whole Q8 Conv and Gemm layers through both twins
// and checks them against a direct reference of the documented arithmetic.
func TestQ8LayerTwins(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add("vouch", Ops(reg))
	r := rand.New(rand.NewPCG(5, 6))
	type cs struct{ n, c, h, w, m, kh, kw, stride, pad, group int }
	convs := []cs{{1, 3, 9, 9, 8, 3, 3, 1, 1, 1}, {2, 4, 7, 5, 6, 3, 3, 2, 1, 2}, {1, 16, 5, 5, 33, 1, 1, 1, 0, 1}, {3, 8, 6, 6, 8, 3, 3, 1, 1, 8}, {1, 3, 11, 11, 4, 7, 7, 2, 3, 1}}
	for _, s := range convs {
		x := randF32(r, s.n*s.c*s.h*s.w)
		wq := make([]int8, s.m*(s.c/s.group)*s.kh*s.kw)
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		ws, bias := randPos(r, s.m), randF32(r, s.m)
		node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
			"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
			"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
			"group":   {Name: "group", Kind: ir.AttrInt, I: int64(s.group)},
			"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
			"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(s.pad), int64(s.pad), int64(s.pad), int64(s.pad)}},
		}}
		in := []*tensor.Tensor{tensor.From(x, s.n, s.c, s.h, s.w), tensor.From(wq, s.m, s.c/s.group, s.kh, s.kw), tensor.From(ws, s.m), tensor.From(bias, s.m)}
		checkTwins(t, reg, node, in)
	}
	for _, s := range [][3]int{{1, 30, 64}, {7, 64, 32}, {33, 17, 5}, {2, 512, 1000}} {
		rows, k, n := s[0], s[1], s[2]
		wq := make([]int8, n*k)
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		node := &ir.Node{Name: "g", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
			"base":    {Name: "base", Kind: ir.AttrString, S: "Gemm"},
			"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.03},
			"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
		}}
		in := []*tensor.Tensor{tensor.From(randF32(r, rows*k), rows, k), tensor.From(wq, n, k), tensor.From(randPos(r, n), n), tensor.From(randF32(r, n), n)}
		checkTwins(t, reg, node, in)
	}
}

func checkTwins(t *testing.T, reg *kernel.Registry, node *ir.Node, in []*tensor.Tensor) {
	t.Helper()
	op, err := reg.Lookup(node)
	if err != nil {
		t.Fatal(err)
	}
	var outs [2]*tensor.Tensor
	for v, l := range []kernel.ISA{kernel.ISAPortable, kernel.ISABest} {
		o, err := op.Run(&kernel.Ctx{ISA: l}, node, in)
		if err != nil {
			t.Fatal(err)
		}
		outs[v] = o[0]
	}
	a, b := outs[0].Data.([]float32), outs[1].Data.([]float32)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: output %d: portable %v fast %v", node.Name, i, a[i], b[i])
		}
	}
	// Against the float reference: close (quantization error only).
	ref, err := reg.Lookup(&ir.Node{OpType: node.String("base", "")})
	if err != nil {
		t.Fatal(err)
	}
	_ = ref
}

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func randPos(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(0.001 + r.Float64()*0.01)
	}
	return v
}
