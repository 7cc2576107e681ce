package nn

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestConvTransposeTiled checks the all-taps GEMM and its scatter with
// the bias against convGEMM's zero-inserted columns and addBias, bit for
// bit, at every level and at 1 and 2 workers, for kernels that tile the output (2x2/2, 3x3/3,
// 2x3/(2,3), a batch of 2, tap rows fewer than a register tile, with and
// without a bias, W' kept in a State and W changed), with NaN, ±Inf and -0 inputs and -0 biases; and that a non-finite weight or an overlapping kernel
// leaves the general path to run.
func TestConvTransposeTiled(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i, c := range []struct {
		n, cin, m, h, w, kh, kw int
		bias                    bool
	}{
		{1, 8, 4, 5, 6, 2, 2, false}, {2, 3, 5, 4, 3, 3, 3, true}, {1, 17, 6, 3, 7, 2, 3, true},
		{1, 5, 1, 9, 8, 2, 2, true}, {2, 40, 16, 6, 5, 2, 2, true},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			x := tensor.New(tensor.Float32, c.n, c.cin, c.h, c.w)
			w := tensor.New(tensor.Float32, c.cin, c.m, c.kh, c.kw)
			for _, d := range [][]float32{x.Data.([]float32), w.Data.([]float32)} {
				for j := range d {
					d[j] = float32(r.NormFloat64())
				}
			}
			xd := x.Data.([]float32)
			xd[0], xd[3], xd[len(xd)-1] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
			n := &ir.Node{OpType: "ConvTranspose", Attrs: map[string]*ir.Attr{
				"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(c.kh), int64(c.kw)}}}}
			s := &convSetup{N: c.n, C: c.cin, G: 1, Cg: c.cin, Mg: c.m, M: c.m}
			g, err := transposeGeom(n, []int{c.h, c.w}, []int{c.kh, c.kw})
			if err != nil {
				t.Fatal(err)
			}
			s.g = g
			want := convGEMM(machine{}, s, xd, regroup(s, w.Data.([]float32)), true, sgemmP)
			var bias []float32
			if c.bias {
				bias = make([]float32, c.m)
				for j := range bias {
					bias[j] = float32(r.NormFloat64())
				}
				bias[0] = float32(math.Copysign(0, -1))
				addBias(want, bias, c.m, prod(g.out))
			}
			for _, p := range pools {
				got, err := kerneltest.Twins(t, "ConvTranspose", &kernel.Ctx{Pool: p}, func(kc *kernel.Ctx) ([]*tensor.Tensor, error) {
					y := make([]float32, len(want))
					if !convTransposeTiled(machineOf(kc), n, s, xd, w.Data.([]float32), bias, y) {
						t.Fatal("convTransposeTiled declined")
					}
					return []*tensor.Tensor{tensor.From(y, len(y))}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				gd := got[0].Data.([]float32)
				for j := range want {
					if math.Float32bits(gd[j]) != math.Float32bits(want[j]) {
						t.Fatalf("%d workers: output %d: %v (%#x), convGEMM %v (%#x)", p.Workers(), j, gd[j], math.Float32bits(gd[j]), want[j], math.Float32bits(want[j]))
					}
				}
			}
			// With a State the transposed W is kept: a changed W (an
			// input that is not an initializer) must be transposed again.
			st := &kernel.Ctx{Pool: pools[1], State: &kernel.State{}}
			for round := 0; round < 2; round++ {
				wd := w.Data.([]float32)
				wd[len(wd)/2] += float32(round)
				ref := convGEMM(machine{}, s, xd, regroup(s, wd), true, sgemmP)
				if bias != nil {
					addBias(ref, bias, c.m, prod(g.out))
				}
				y := make([]float32, len(ref))
				if !convTransposeTiled(machineOf(st), n, s, xd, wd, bias, y) {
					t.Fatal("convTransposeTiled declined")
				}
				if d := sameF32(y, ref); d >= 0 {
					t.Fatalf("kept weights, round %d: y[%d] = %v, convGEMM %v", round, d, y[d], ref[d])
				}
			}
			w.Data.([]float32)[1] = float32(math.Inf(-1))
			if convTransposeTiled(machine{}, n, s, xd, w.Data.([]float32), bias, make([]float32, len(want))) {
				t.Error("an infinite weight took the tiled path")
			}
		})
	}
	n := &ir.Node{OpType: "ConvTranspose", Attrs: map[string]*ir.Attr{"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{1, 1}}}}
	g, _ := transposeGeom(n, []int{4, 4}, []int{2, 2})
	s := &convSetup{N: 1, C: 1, G: 1, Cg: 1, Mg: 1, M: 1, g: g}
	if convTransposeTiled(machine{}, n, s, make([]float32, 16), make([]float32, 4), nil, make([]float32, 25)) {
		t.Error("an overlapping kernel (stride 1) took the tiled path")
	}
}

// BenchmarkConvTransposeTiled times unet_small's up-convolutions (2x2/2,
// with a bias) on one worker, W' kept as in a bound plan.
func BenchmarkConvTransposeTiled(b *testing.B) {
	for _, c := range []struct{ cin, m, h int }{{128, 64, 16}, {64, 32, 32}, {32, 16, 64}} {
		b.Run(fmt.Sprintf("%dx%d_%d", c.cin, c.m, c.h), func(b *testing.B) {
			n := &ir.Node{OpType: "ConvTranspose", Attrs: map[string]*ir.Attr{
				"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{2, 2}}}}
			g, err := transposeGeom(n, []int{c.h, c.h}, []int{2, 2})
			if err != nil {
				b.Fatal(err)
			}
			s := &convSetup{N: 1, C: c.cin, G: 1, Cg: c.cin, Mg: c.m, M: c.m, g: g}
			r := rand.New(rand.NewSource(1))
			x, w, bias := make([]float32, c.cin*c.h*c.h), make([]float32, c.cin*c.m*4), make([]float32, c.m)
			for _, d := range [][]float32{x, w, bias} {
				for j := range d {
					d[j] = float32(r.NormFloat64())
				}
			}
			y := make([]float32, c.m*4*c.h*c.h)
			p := parallel.New(1)
			defer p.Close()
			pool := machineOf(&kernel.Ctx{Pool: p, State: &kernel.State{}})
			for i := 0; i < b.N; i++ {
				convTransposeTiled(pool, n, s, x, w, bias, y)
			}
		})
	}
}

// TestConvTransposeInto: intoConvTranspose gives Run's bits, into a
// preallocated output, for a tiled kernel (twice, the geometry and W'
// kept in the State) and for an overlapping one (through Run), with and
// without a bias; an output of the wrong size is an error.
func TestConvTransposeInto(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	p := parallel.New(2)
	defer p.Close()
	for i, c := range []struct {
		x, w    []int
		attrs   []*ir.Attr
		useBias bool
	}{
		{[]int{1, 8, 5, 6}, []int{8, 4, 2, 2}, []*ir.Attr{ints("strides", 2, 2)}, true},
		{[]int{2, 6, 4, 4}, []int{6, 3, 3, 3}, []*ir.Attr{ints("strides", 3, 3)}, false},
		{[]int{1, 4, 5, 5}, []int{4, 2, 3, 3}, []*ir.Attr{ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}, true},
	} {
		n := node("ConvTranspose", c.attrs...)
		in := []*tensor.Tensor{tensor.From(specialF32(r, prod(c.x), true), c.x...), tensor.From(specialF32(r, prod(c.w), false), c.w...)}
		if c.useBias {
			in = append(in, tensor.From(specialF32(r, c.w[1], false), c.w[1]))
		}
		ctx := &kernel.Ctx{Pool: p, State: &kernel.State{}}
		want, err := runConvTranspose(ctx, n, in)
		if err != nil {
			t.Fatal(err)
		}
		for rep := 0; rep < 2; rep++ {
			y := tensor.New(tensor.Float32, want[0].Shape...)
			if err := intoConvTranspose(ctx, n, in, []*tensor.Tensor{y}); err != nil {
				t.Fatal(err)
			}
			if d := sameF32(y.Data.([]float32), want[0].Data.([]float32)); d >= 0 {
				t.Fatalf("case %d, run %d: y[%d] = %g, Run %g", i, rep, d, y.Data.([]float32)[d], want[0].Data.([]float32)[d])
			}
		}
		if err := intoConvTranspose(ctx, n, in, []*tensor.Tensor{tensor.New(tensor.Float32, 3)}); err == nil {
			t.Errorf("case %d: an output of 3 elements was accepted", i)
		}
	}
}

// TestConvTransposeEmptyOutputWithBias: pads that leave no output pixels
// (1x1 input, 2x2 kernel, pads 1 on every side) with a bias give an empty
// output (or a clear error), never a division by zero in the bias pass.
func TestConvTransposeEmptyOutputWithBias(t *testing.T) {
	p := parallel.New(1)
	defer p.Close()
	n := node("ConvTranspose", ints("pads", 1, 1, 1, 1))
	for _, x := range []*tensor.Tensor{tensor.From([]float32{1, 2}, 1, 2, 1, 1), tensor.From([]float64{1, 2}, 1, 2, 1, 1)} {
		w := tensor.New(x.DType, 2, 3, 2, 2)
		b := tensor.New(x.DType, 3)
		ctx := &kernel.Ctx{Pool: p, State: &kernel.State{}}
		out, err := runConvTranspose(ctx, n, []*tensor.Tensor{x, w, b})
		if err != nil {
			if !strings.Contains(err.Error(), "ConvTranspose") && !strings.Contains(err.Error(), "output") {
				t.Fatalf("%v: the error does not say what is wrong: %v", x.DType, err)
			}
			continue
		}
		if got := tensor.NumElems(out[0].Shape); got != 0 {
			t.Fatalf("%v: output %v has %d elements, want none", x.DType, out[0].Shape, got)
		}
	}
}
