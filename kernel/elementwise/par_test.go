package elementwise

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestSquare32: Pow's exponent-2 path gives math.Pow's float32 bits for
// random bit patterns (every exponent, subnormals, infinities, NaNs of
// any payload) and the specials.
func TestSquare32(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 3))
	x := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1e-20, 1.8446743e19, math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000)}
	for range 1 << 18 {
		x = append(x, math.Float32frombits(r.Uint32()))
	}
	d := make([]float32, len(x))
	square32(d, x, 1)
	for i, v := range x {
		if want := float32(math.Pow(float64(v), 2)); math.Float32bits(d[i]) != math.Float32bits(want) {
			t.Fatalf("%g (%#x)²: %g (%#x), math.Pow %g (%#x)", v, math.Float32bits(v), d[i], math.Float32bits(d[i]), want, math.Float32bits(want))
		}
	}
}

// TestElementwiseParallel: float32 arithmetic (with broadcasts), Pow and
// unary layers large enough to be split over the workers give, at 1, 2 and
// 3 workers and every instruction-set level, in place too, the bits of
// the portable Run; the split Into allocates nothing.
func TestElementwiseParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 4))
	pools := []*parallel.Pool{nil, parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	ops := Ops()
	rnd := func(shape ...int) *tensor.Tensor {
		x := tensor.New(tensor.Float32, shape...)
		for i := range x.Data.([]float32) {
			x.Data.([]float32)[i] = float32(r.NormFloat64() * 2)
		}
		return x
	}
	big := []int{3, 97, 331}
	cases := []struct {
		op string
		in []*tensor.Tensor
	}{
		{"Add", []*tensor.Tensor{rnd(big...), rnd(big...)}},
		{"Add", []*tensor.Tensor{rnd(big...), rnd(331)}},
		{"Sub", []*tensor.Tensor{rnd(3, 1, 331), rnd(big...)}},
		{"Mul", []*tensor.Tensor{rnd(big...), rnd(3, 97, 1)}},
		{"Mul", []*tensor.Tensor{rnd(1, 40000), rnd(1)}},
		{"Div", []*tensor.Tensor{rnd(big...), rnd(1, 97, 331)}},
		{"Pow", []*tensor.Tensor{rnd(big...), tensor.Scalar(float32(2))}},
		{"Pow", []*tensor.Tensor{rnd(big...), tensor.Scalar(float32(3))}},
		{"Sigmoid", []*tensor.Tensor{rnd(big...)}},
		{"Exp", []*tensor.Tensor{rnd(70001)}},
		{"Tanh", []*tensor.Tensor{rnd(big...)}},
		{"Erf", []*tensor.Tensor{rnd(big...)}},
	}
	for _, tc := range cases {
		n := &ir.Node{OpType: tc.op, Version: 13}
		want, err := ops[tc.op].Run(&kernel.Ctx{ISA: kernel.ISAPortable}, n, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		wd := want[0].Data.([]float32)
		for _, l := range kerneltest.Levels() {
			for _, p := range pools {
				ctx := &kernel.Ctx{ISA: l, Pool: p}
				out := tensor.New(tensor.Float32, want[0].Shape...)
				outs := []*tensor.Tensor{out}
				if err := ops[tc.op].Into(ctx, n, tc.in, outs); err != nil {
					t.Fatal(err)
				}
				var inPlace []float32
				if tensor.NumElems(tc.in[0].Shape) == len(wd) { // the first input's storage as the output
					x := tensor.From(append([]float32(nil), tc.in[0].Data.([]float32)...), tc.in[0].Shape...)
					in := append([]*tensor.Tensor{x}, tc.in[1:]...)
					if err := ops[tc.op].Into(ctx, n, in, []*tensor.Tensor{x}); err != nil {
						t.Fatal(err)
					}
					inPlace = x.Data.([]float32)
				}
				for i, w := range wd {
					g := out.Data.([]float32)[i]
					if math.Float32bits(g) != math.Float32bits(w) || (inPlace != nil && math.Float32bits(inPlace[i]) != math.Float32bits(w)) {
						t.Fatalf("%s of %v at %v, %d workers, element %d: %g, want %g", tc.op, tc.in[0].Shape, l, p.Workers(), i, g, w)
					}
				}
				got := 0.0
				if !raceEnabled {
					got = testing.AllocsPerRun(3, func() { _ = ops[tc.op].Into(ctx, n, tc.in, outs) })
				}
				if got != 0 {
					t.Fatalf("%s Into at %d workers allocates %.0f times", tc.op, p.Workers(), got)
				}
			}
		}
	}
}

// TestRowsRange2: every cut of a broadcast plan's output into two ranges
// writes what rows2 writes.
func TestRowsRange2(t *testing.T) {
	a := make([]float32, 2*3*5)
	b := make([]float32, 3)
	for i := range a {
		a[i] = float32(i)
	}
	for i := range b {
		b[i] = float32(100 * (i + 1))
	}
	var p bplan
	if !p.init([]int{2, 3, 5}, 2, &[3][]int{{2, 3, 5}, {3, 1}}) {
		t.Fatal("no plan")
	}
	want := make([]float32, 30)
	rows2(&p, want, a, b, addRow[float32])
	for cut := 0; cut <= 30; cut++ {
		got := make([]float32, 30)
		rowsRange2(&p, got, a, b, addRow[float32], 0, cut)
		rowsRange2(&p, got, a, b, addRow[float32], cut, 30)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("cut at %d: %v, want %v", cut, got, want)
			}
		}
	}
}
