package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
)

// TestDwAnyTwin checks dwAny against depthwiseInto, bit for bit, over
// 1-D and 2-D depthwise convolutions of many kernel sizes, strides,
// dilations and paddings (symmetric and not), planes narrower than a
// vector, batches, and inputs with zeros of both signs, infinities and
// NaNs; with a bias and a clamp (and a residual before it) against
// convF32's passes; at AVX-512 (DwTapsZ) and at AVX2 (DwTapsA), each where
// the CPU has it.
func TestDwAnyTwin(t *testing.T) {
	ran := false
	for _, isa := range []kernel.ISA{kernel.ISAAVX512, kernel.ISAAVX2} {
		pool := machineOf((*kernel.Ctx)(nil).WithISA(isa))
		if isa == kernel.ISAAVX512 && !pool.z || isa == kernel.ISAAVX2 && (!pool.fast || pool.z) {
			continue // that level is not on this CPU
		}
		ran = true
		t.Run(fmt.Sprint(isa), func(t *testing.T) { testDwAnyTwin(t, pool) })
	}
	if !ran {
		t.Skip("neither AVX-512 nor AVX2 on this CPU: dwAny does not run here")
	}
}

func testDwAnyTwin(t *testing.T, pool machine) {
	r := rand.New(rand.NewSource(16))
	type tc struct {
		in, k, stride, dil, pads []int
		n, c                     int
	}
	cases := []tc{
		{in: []int{17, 19}, k: []int{5, 5}, stride: []int{1, 1}, dil: []int{1, 1}, pads: []int{2, 2, 2, 2}, n: 1, c: 3},
		{in: []int{16, 16}, k: []int{5, 5}, stride: []int{2, 2}, dil: []int{1, 1}, pads: []int{1, 2, 2, 1}, n: 2, c: 2},
		{in: []int{7, 7}, k: []int{7, 7}, stride: []int{1, 1}, dil: []int{1, 1}, pads: []int{3, 3, 3, 3}, n: 1, c: 4},
		{in: []int{14, 9}, k: []int{3, 3}, stride: []int{1, 1}, dil: []int{2, 3}, pads: []int{2, 3, 2, 3}, n: 1, c: 2},
		{in: []int{15, 13}, k: []int{3, 5}, stride: []int{3, 2}, dil: []int{1, 1}, pads: []int{0, 0, 0, 0}, n: 1, c: 2},
		{in: []int{5, 40}, k: []int{1, 9}, stride: []int{1, 1}, dil: []int{1, 1}, pads: []int{0, 4, 0, 4}, n: 1, c: 3},
		{in: []int{3, 3}, k: []int{3, 3}, stride: []int{2, 2}, dil: []int{1, 1}, pads: []int{1, 1, 1, 1}, n: 1, c: 1},
		{in: []int{33, 40}, k: []int{5, 5}, stride: []int{2, 2}, dil: []int{1, 1}, pads: []int{2, 1, 2, 1}, n: 1, c: 3},
		{in: []int{9, 37}, k: []int{3, 3}, stride: []int{2, 2}, dil: []int{1, 1}, pads: []int{1, 2, 2, 1}, n: 2, c: 2},
		{in: []int{12, 64}, k: []int{3, 5}, stride: []int{1, 2}, dil: []int{1, 2}, pads: []int{1, 0, 1, 3}, n: 1, c: 2},
		{in: []int{98}, k: []int{9}, stride: []int{1}, dil: []int{1}, pads: []int{4, 4}, n: 1, c: 5},
		{in: []int{200}, k: []int{7}, stride: []int{2}, dil: []int{1}, pads: []int{3, 3}, n: 2, c: 2},
		{in: []int{64}, k: []int{3}, stride: []int{1}, dil: []int{4}, pads: []int{4, 4}, n: 1, c: 2},
		{in: []int{31}, k: []int{4}, stride: []int{3}, dil: []int{2}, pads: []int{0, 5}, n: 1, c: 2},
		{in: []int{13, 17}, k: []int{3, 3}, stride: []int{2, 1}, dil: []int{1, 1}, pads: []int{1, 1, 1, 1}, n: 2, c: 3},
		{in: []int{20, 40}, k: []int{5, 5}, stride: []int{3, 1}, dil: []int{1, 2}, pads: []int{2, 4, 1, 3}, n: 1, c: 2},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_k%v_s%v_d%v", i, c.k, c.stride, c.dil), func(t *testing.T) {
			n := &ir.Node{OpType: "Conv", Attrs: map[string]*ir.Attr{
				"group":     {Name: "group", Kind: ir.AttrInts, I: int64(c.c)},
				"strides":   {Name: "strides", Kind: ir.AttrInts, Ints: int64s(c.stride)},
				"dilations": {Name: "dilations", Kind: ir.AttrInts, Ints: int64s(c.dil)},
				"pads":      {Name: "pads", Kind: ir.AttrInts, Ints: int64s(c.pads)},
			}}
			n.Attrs["group"].Kind = ir.AttrInt
			xs := append([]int{c.n, c.c}, c.in...)
			ws := append([]int{c.c, 1}, c.k...)
			s, err := setupConv(n, xs, ws)
			if err != nil {
				t.Fatal(err)
			}
			if !dwAnyOK(pool, s) {
				t.Fatal("dwAnyOK is false")
			}
			x, w := make([]float32, prod(xs)), make([]float32, prod(ws))
			for j := range x {
				x[j] = float32(r.NormFloat64())
			}
			for j := range w {
				w[j] = float32(r.NormFloat64())
			}
			x[0], x[1], x[len(x)/2] = float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN())
			w[len(w)-1] = float32(math.Copysign(0, -1))
			P := prod(s.g.out)
			want, got := make([]float32, c.n*c.c*P), make([]float32, c.n*c.c*P)
			depthwiseInto(machine{}, s, x, w, want)
			for j := range got {
				got[j] = 12345 // every output must be written
			}
			dwAny(pool, s, x, w, nil, got, epi{})
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("output %d (of %d, out %v): %v (%#x), want %v (%#x)", j, len(want), s.g.out, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
				}
			}
			// With a bias and the epilogue (a clamp; a residual, then
			// the clamp): convF32's bias pass and epiPortable after
			// depthwiseInto.
			bias := make([]float32, c.c)
			for j := range bias {
				bias[j] = float32(r.NormFloat64())
			}
			bias[0] = float32(math.Copysign(0, -1))
			res := make([]float32, len(want))
			for j := range res {
				res[j] = float32(r.NormFloat64())
			}
			for _, withRes := range []bool{false, true} {
				ep := epi{lo: -0.5, hi: 0.75, on: true, fast: pool.fast, vec: pool.vec}
				w2 := append([]float32{}, want...)
				addBias(w2, bias, c.c, P)
				var rr []float32
				if withRes {
					ep.r, rr = res, res
				}
				epiPortable(w2, rr, len(w2), len(w2), 1, len(w2), ep.lo, ep.hi)
				dwAny(pool, s, x, w, bias, got, ep)
				for j := range w2 {
					if math.Float32bits(got[j]) != math.Float32bits(w2[j]) {
						t.Fatalf("residual %v: output %d: %v (%#x), want %v (%#x)", withRes, j, got[j], math.Float32bits(got[j]), w2[j], math.Float32bits(w2[j]))
					}
				}
			}
		})
	}
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}
