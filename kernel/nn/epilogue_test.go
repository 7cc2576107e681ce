package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// unfusedEpi is the epilogue as the unfused Add, Relu and Clip nodes
// compute it (kernel/elementwise): y + r, then the bounds that are set.
func unfusedEpi(y, r []float32, e kernel.Epilogue) []float32 {
	out := append([]float32{}, y...)
	for i, v := range out {
		if r != nil {
			v = v + r[i]
		}
		if e.HasLo && v < e.Lo {
			v = e.Lo
		}
		if e.HasHi && v > e.Hi {
			v = e.Hi
		}
		out[i] = v
	}
	return out
}

// TestConvEpilogueTwin: Conv's Into with a fused epilogue (residual,
// Relu, Clip, NaN and infinite bounds) gives, on the vector kernels at 1,
// 2 and 8 workers and on the portable twin, the bits of Conv's Run
// followed by the unfused passes, and reports the epilogue applied.
// Residual NaNs are the canonical NaN: which payload an addition of two
// NaNs keeps is not fixed by Go (nor by the unfused Add).
func TestConvEpilogueTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(11))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	nan := float32(math.NaN())
	epis := []kernel.Epilogue{
		{HasLo: true},
		{HasLo: true, Lo: 0, HasHi: true, Hi: 6},
		{HasHi: true, Hi: 0.25},
		{HasLo: true, Lo: nan, HasHi: true, Hi: nan},
		{HasLo: true, Lo: float32(math.Inf(1)), HasHi: true, Hi: float32(math.Inf(-1))},
		{HasLo: true, Lo: 0.5, HasHi: true, Hi: -0.5},
	}
	for ci, c := range convCases(r) {
		x := tensor.From(specialF32(r, prod(c.x), ci%2 == 0), c.x...)
		w := tensor.From(specialF32(r, prod(c.w), ci%3 == 0), c.w...)
		b := tensor.From(specialF32(r, c.w[0], ci%4 == 1), c.w[0])
		in := []*tensor.Tensor{x, w, b}
		if ci%5 == 4 {
			in = in[:2]
		}
		tactics := append([]string{""}, convTactics(node("Conv", c.attrs...),
			[]ir.Type{ir.StaticType(tensor.Float32, c.x), ir.StaticType(tensor.Float32, c.w)})...)
		n := node("Conv", c.attrs...)
		base, err := runConv(ctxAt(nil, kernel.ISAPortable, nil), n, in)
		if err != nil {
			t.Fatalf("case %d: %v", ci, err)
		}
		y0 := base[0].Data.([]float32)
		res := specialF32(r, len(y0), ci%2 == 1)
		for i, v := range res {
			if v != v {
				res[i] = float32(math.NaN())
			}
		}
		for ei := 0; ei < 2*len(epis); ei++ {
			e := epis[ei%len(epis)]
			if ei >= len(epis) {
				e.Residual = res
			}
			if ci%3 == 2 && ei == 0 {
				e = kernel.Epilogue{Residual: res} // the Add alone
			}
			want := unfusedEpi(y0, e.Residual, e)
			check := func(what string, ctx *kernel.Ctx) {
				t.Helper()
				ctx.Epilogue = e
				y := tensor.New(tensor.Float32, base[0].Shape...)
				for i := range y.Data.([]float32) {
					y.Data.([]float32)[i] = -7 // garbage
				}
				if err := intoConv(ctx, n, in, []*tensor.Tensor{y}); err != nil {
					t.Fatal(err)
				}
				if !ctx.Epilogue.Applied {
					t.Fatalf("case %d epilogue %d %s: not applied", ci, ei, what)
				}
				got := y.Data.([]float32)
				if d := sameF32(got, want); d >= 0 {
					t.Fatalf("case %d (%v * %v) epilogue %d %s: y[%d] = %g (%#x), unfused %g (%#x)", ci, c.x, c.w, ei, what, d,
						got[d], math.Float32bits(got[d]), want[d], math.Float32bits(want[d]))
				}
			}
			for _, tac := range tactics {
				n = node("Conv", c.attrs...)
				if tac != "" {
					n = node("Conv", append(append([]*ir.Attr{}, c.attrs...), strAttr(kernel.TacticAttr, tac))...)
				}
				check("portable "+tac, ctxAt(pools[1], kernel.ISAPortable, nil))
				for _, p := range pools {
					check("fast "+tac, ctxAt(p, kernel.ISABest, nil))
				}
				if tac == TacticDirect {
					check("fast AVX2 "+tac, ctxAt(pools[1], kernel.ISAAVX2, nil))
				}
			}
		}
	}
}

// TestEpiTwin: amd64.Epi against its portable twin on blocks of odd
// shapes and strides, with specials in both operands.
func TestEpiTwin(t *testing.T) {
	if !fastOK() {
		t.Skip("no AVX2+FMA")
	}
	r := rand.New(rand.NewSource(12))
	bounds := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), 0, float32(math.Copysign(0, -1)), float32(math.NaN()), 6, -1}
	for i := 0; i < 300; i++ {
		rows, cols := 1+r.Intn(7), 1+r.Intn(40)
		ld := cols + r.Intn(5)
		n := (rows-1)*ld + cols
		y := specialF32(r, n, i%2 == 0)
		var res []float32
		if i%3 != 0 {
			res = specialF32(r, n, i%2 == 1)
			for j, v := range res {
				if v != v {
					res[j] = float32(math.NaN())
				}
			}
			for j, v := range y {
				if v != v {
					y[j] = float32(math.NaN())
				}
			}
		}
		lo, hi := bounds[r.Intn(len(bounds))], bounds[r.Intn(len(bounds))]
		want := append([]float32{}, y...)
		epiPortable(want, res, ld, ld, rows, cols, lo, hi)
		got := append([]float32{}, y...)
		ep := epi{r: res, lo: lo, hi: hi, on: true}
		ep.block(got, ld, rows, cols)
		if d := sameF32(got, want); d >= 0 {
			t.Fatalf("case %d (%dx%d ld %d, lo %g hi %g): y[%d] = %#x, portable %#x", i, rows, cols, ld, lo, hi, d, math.Float32bits(got[d]), math.Float32bits(want[d]))
		}
	}
}
