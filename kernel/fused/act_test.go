package fused_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// siluInputs returns float32 values that reach every branch of
// Sigmoid32: NaNs of both signs and several payloads, ±Inf, ±0,
// subnormals, every float32 around the ends of Exp32's range (|x| from
// 86 to 90, where Ldexp32 scales by 2^-126..2^128 and the Sigmoid is
// subnormal or 1), a sweep over the exponents, and random values.
func siluInputs() []float32 {
	var xs []float32
	for _, b := range []uint32{0x7fc00000, 0xffc00000, 0x7fc12345, 0xffa00001, 0x7f800001} {
		xs = append(xs, math.Float32frombits(b))
	}
	xs = append(xs, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), math.Float32frombits(0x807fffff), math.Float32frombits(0x00400000))
	for _, sign := range []uint32{0, 1 << 31} {
		lo, hi := math.Float32bits(86), math.Float32bits(90)
		for b := lo; b <= hi; b += 3 {
			xs = append(xs, math.Float32frombits(b|sign))
		}
		for b := uint32(0); b < 0x7f800000; b += 0x3f01 {
			xs = append(xs, math.Float32frombits(b|sign))
		}
	}
	r := rand.New(rand.NewPCG(16, 1))
	for range 20000 {
		xs = append(xs, float32(r.NormFloat64()*8))
	}
	return xs
}

// siluNodes runs Sigmoid and then Mul (x first, or the Sigmoid's output
// first) as the unfused nodes, on the portable twins: the bits a SiLU
// epilogue must give, NaNs included (which NaN a product of two returns
// is the Mul kernel's).
func siluNodes(t *testing.T, xs []float32, sigFirst bool) []float32 {
	return gateMulNodes(t, xs, &ir.Node{Name: "s", OpType: "Sigmoid", Version: 13, Attrs: map[string]*ir.Attr{}}, sigFirst)
}

// gateMulNodes runs the gate node and then Mul on xs, as siluNodes.
func gateMulNodes(t *testing.T, xs []float32, gate *ir.Node, sigFirst bool) []float32 {
	t.Helper()
	reg := builtin.Registry()
	c := &kernel.Ctx{ISA: kernel.ISAPortable}
	run := func(n *ir.Node, args ...*tensor.Tensor) *tensor.Tensor {
		op, err := reg.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		out, err := op.Run(c, n, args)
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	x := tensor.From(append([]float32{}, xs...), len(xs))
	gate.Inputs, gate.Outputs = []string{"x"}, []string{"s"}
	s := run(gate, x)
	mul := &ir.Node{Name: "m", OpType: "Mul", Version: 14, Inputs: []string{"x", "s"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}
	if sigFirst {
		return run(mul, s, x).Data.([]float32)
	}
	return run(mul, x, s).Data.([]float32)
}

// TestSiLUAct: every SiLU Act (AVX-512, the vector Sigmoid, the portable
// twins), in both operand orders, gives the bits of the Sigmoid and Mul
// nodes, out of place and in place, for runs of every length up to 40
// (the masked tails) and for long runs.
func TestSiLUAct(t *testing.T) {
	xs := siluInputs()
	want := [2][]float32{siluNodes(t, xs, false), siluNodes(t, xs, true)}
	for i, x := range xs {
		if s := vmath.Sigmoid32(x); x == x && math.Float32bits(want[0][i]) != math.Float32bits(x*s) {
			t.Fatalf("x=%v: the nodes give %v, x·Sigmoid32(x) is %v", x, want[0][i], x*s)
		}
	}
	forms := fused.SiLUForms()
	if !amd64.EnabledZ {
		t.Log("no AVX-512 here: SiLUZ not tested")
	}
	check := func(name string, got, w []float32, off int) {
		t.Helper()
		for i := range got {
			if !sameFloat(got[i], w[i]) {
				t.Fatalf("%s: x=%v (%#08x): got %v (%#08x), want %v (%#08x)", name, xs[off+i], math.Float32bits(xs[off+i]),
					got[i], math.Float32bits(got[i]), w[i], math.Float32bits(w[i]))
			}
		}
	}
	for _, f := range forms {
		w := want[0]
		if f.SigFirst {
			w = want[1]
		}
		got := make([]float32, len(xs))
		f.F(f.V, got, xs)
		check(f.Name, got, w, 0)
		in := append([]float32{}, xs...)
		f.F(f.V, in, in)
		check(f.Name+" in place", in, w, 0)
		for n := 0; n <= 140; n++ { // SiLUZ: four vectors a pass, then one, then a masked tail
			for _, off := range []int{0, 3, 17} {
				d := make([]float32, n+1)
				d[n] = 42
				f.F(f.V, d[:n], xs[off:off+n])
				check(f.Name+" short", d[:n], w[off:off+n], off)
				if d[n] != 42 {
					t.Fatalf("%s: %d outputs: wrote past the end", f.Name, n)
				}
			}
		}
	}
	// siluAct picks the form of each level.
	for _, l := range kernel.ISAs() {
		c := &kernel.Ctx{ISA: l}
		for _, sf := range []bool{false, true} {
			got := make([]float32, len(xs))
			fused.SiLUAct(c, sf)(c.Vec(), got, xs)
			w := want[0]
			if sf {
				w = want[1]
			}
			check(l.String(), got, w, 0)
		}
	}
}

func BenchmarkSiLUAct(b *testing.B) {
	xs := make([]float32, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range xs {
		xs[i] = float32(r.NormFloat64() * 4)
	}
	for _, f := range fused.SiLUForms() {
		b.Run(f.Name, func(b *testing.B) {
			d := make([]float32, len(xs))
			b.SetBytes(int64(4 * len(xs)))
			for b.Loop() {
				f.F(f.V, d, xs)
			}
		})
	}
}

// gateNodes runs a HardSigmoid (alpha a, beta b) and then Mul as the
// unfused nodes on the portable twins.
func gateNodes(t *testing.T, xs []float32, a, b float32, sigFirst bool) []float32 {
	return gateMulNodes(t, xs, &ir.Node{Name: "h", OpType: "HardSigmoid", Version: 6, Attrs: map[string]*ir.Attr{
		"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: a}, "beta": {Name: "beta", Kind: ir.AttrFloat, F: b}}}, sigFirst)
}

// TestHardSwishAct: HardSigmoidMul's Acts (portable, AVX2, AVX-512) give
// the bits of the HardSigmoid and Mul nodes, in both operand orders and
// for three (alpha, beta), over NaNs (which leave their group of 8 or 16
// to the portable loop), infinities, both zeros, the bends at ±3, and runs
// of every length up to 140 at offsets with and without NaNs, in place and
// out of place; and the Act each level picks gives the same bits.
func TestHardSwishAct(t *testing.T) {
	xs := siluInputs()
	for _, v := range []float32{-3, 3, -2.9999998, 3.0000002, -2.5, 2.5, 0.5, -0.5} {
		xs = append(xs, v, -v)
	}
	if !amd64.EnabledZ {
		t.Log("no AVX-512 here: HardSwishZ not tested")
	}
	negZero := float32(math.Copysign(0, -1)) // beta -0: a -0 before max(0, ·)
	for _, ab := range [][2]float32{{1.0 / 6, 0.5}, {0.2, 0.5}, {0.25, negZero}} {
		for _, sf := range []bool{false, true} {
			want := gateNodes(t, xs, ab[0], ab[1], sf)
			acts := fused.HardSwishActs(ab[0], ab[1], sf)
			type form struct {
				name string
				f    func(vmath.Vec, []float32, []float32)
				v    vmath.Vec
			}
			forms := []form{{"portable", acts[0], vmath.Vec{}}, {"avx2", acts[0], vmath.Vector(false)}}
			if amd64.EnabledZ {
				forms = append(forms, form{"avx512", acts[1], vmath.Vec{}})
			}
			for _, fm := range forms {
				name, f := fm.name, fm.f
				check := func(got, w []float32, off int) {
					t.Helper()
					for i := range got {
						if !sameFloat(got[i], w[i]) {
							t.Fatalf("%s a=%v b=%v sigFirst=%v: x=%v (%#08x): got %#08x, want %#08x", name, ab[0], ab[1], sf, xs[off+i], math.Float32bits(xs[off+i]), math.Float32bits(got[i]), math.Float32bits(w[i]))
						}
					}
				}
				got := make([]float32, len(xs))
				f(fm.v, got, xs)
				check(got, want, 0)
				in := append([]float32{}, xs...)
				f(fm.v, in, in)
				check(in, want, 0)
				// Offset 0 starts with NaNs, 5 with ±Inf and ±0, 5000 and
				// len(xs)-140 (the bends) with none: every tail length,
				// after four-vector passes, with and without a NaN group.
				for n := 0; n <= 140; n++ {
					for _, off := range []int{0, 5, 5000, len(xs) - 140} {
						d := make([]float32, n+1)
						d[n] = 42
						f(fm.v, d[:n], xs[off:off+n])
						check(d[:n], want[off:off+n], off)
						if d[n] != 42 {
							t.Fatalf("%s: %d outputs: wrote past the end", name, n)
						}
						copy(d, xs[off:off+n])
						f(fm.v, d[:n], d[:n])
						check(d[:n], want[off:off+n], off)
					}
				}
			}
			// Into's choice per level (partAct, epilogue): the Ctx's Vec.
			for _, l := range kernel.ISAs() {
				c := &kernel.Ctx{ISA: l}
				f := acts[0]
				if c.AVX512() && amd64.EnabledZ {
					f = acts[1]
				}
				got := make([]float32, len(xs))
				f(c.Vec(), got, xs)
				for i := range got {
					if !sameFloat(got[i], want[i]) {
						t.Fatalf("%v: x=%v: got %#08x, want %#08x", l, xs[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

func BenchmarkHardSwishAct(b *testing.B) {
	xs := make([]float32, 4096)
	r := rand.New(rand.NewPCG(1, 3))
	for i := range xs {
		xs[i] = float32(r.NormFloat64() * 4)
	}
	acts := fused.HardSwishActs(1.0/6, 0.5, false)
	forms := map[string]func(d []float32){
		"portable": func(d []float32) { acts[0](vmath.Vec{}, d, xs) },
		"avx2":     func(d []float32) { acts[0](vmath.Vector(false), d, xs) },
	}
	if amd64.EnabledZ {
		forms["avx512"] = func(d []float32) { acts[1](vmath.Vec{}, d, xs) }
	}
	for _, name := range []string{"portable", "avx2", "avx512"} {
		f, ok := forms[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			d := make([]float32, len(xs))
			b.SetBytes(int64(4 * len(xs)))
			for b.Loop() {
				f(d)
			}
		})
	}
}
