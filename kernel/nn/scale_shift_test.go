package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/tensor"
)

// TestScaleShiftTwins checks the ScaleShift layer at every level (the
// AVX-512 planes, the scalar loop) bit for bit, with and without the Relu,
// on planes on and off the 16-lane groups and inputs with NaN, ±Inf and
// -0; and the portable level against BatchNormalization then Relu.
func TestScaleShiftTwins(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	for _, shape := range [][]int{{1, 3, 5, 7}, {2, 4, 16}, {1, 2, 33, 3}, {3, 5}} {
		for _, relu := range []int64{0, 1} {
			t.Run(fmt.Sprintf("%v_relu%d", shape, relu), func(t *testing.T) {
				C := shape[1]
				x := tensor.New(tensor.Float32, shape...)
				d := x.Data.([]float32)
				for i := range d {
					d[i] = float32(r.NormFloat64())
				}
				d[0], d[len(d)/3], d[len(d)/2], d[len(d)-1] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1)), float32(math.Inf(-1))
				p := make([][]float32, 4)
				for i := range p {
					p[i] = make([]float32, C)
					for c := range p[i] {
						p[i][c] = float32(r.NormFloat64())
					}
				}
				for c := range p[3] {
					p[3][c] = float32(math.Abs(float64(p[3][c]))) + 0.1
				}
				a, b := ScaleShiftParams(p[0], p[1], p[2], p[3], 1e-5)
				n := &ir.Node{OpType: OpScaleShift, Attrs: map[string]*ir.Attr{"relu": {Name: "relu", Kind: ir.AttrInt, I: relu}}}
				in := []*tensor.Tensor{x, tensor.From(a, C), tensor.From(b, C)}
				got, err := kerneltest.Twins(t, "ScaleShift", nil, func(kc *kernel.Ctx) ([]*tensor.Tensor, error) { return runScaleShift(kc, n, in) })
				if err != nil {
					t.Fatal(err)
				}
				bn := &ir.Node{OpType: "BatchNormalization", Version: 15, Attrs: map[string]*ir.Attr{}}
				want, err := runBatchNorm(nil, bn, []*tensor.Tensor{x, tensor.From(p[0], C), tensor.From(p[1], C), tensor.From(p[2], C), tensor.From(p[3], C)})
				if err != nil {
					t.Fatal(err)
				}
				w := want[0].Data.([]float32)
				if relu == 1 {
					for i, v := range w {
						if v < 0 {
							w[i] = 0
						}
					}
				}
				g := got[0].Data.([]float32)
				for i := range w {
					if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
						t.Fatalf("element %d: %v (%#x), BatchNormalization+Relu %v (%#x)", i, g[i], math.Float32bits(g[i]), w[i], math.Float32bits(w[i]))
					}
				}
			})
		}
	}
}

// TestScaleShiftTails checks every level against the portable loop on
// planes of 0 to 33 floats (the 32-, 16- and 8-lane groups and every tail
// after them), with and without the Relu, on inputs holding NaNs (quiet,
// signalling, negative, with payloads), ±Inf, ±0 and values whose product
// underflows, and a channel with B = -0 so that -0 outputs reach the Relu.
func TestScaleShiftTails(t *testing.T) {
	r := rand.New(rand.NewSource(33))
	special := []float32{
		math.Float32frombits(0x7fc12345), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000),
		float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), -1e-30, 1e-30,
	}
	const C = 3
	a := []float32{1e-20, -2.5, 0.75}
	b := []float32{float32(math.Copysign(0, -1)), 0.125, -1}
	for S := 0; S <= 33; S++ {
		for _, relu := range []int64{0, 1} {
			x := tensor.New(tensor.Float32, 2, C, S)
			d := x.Data.([]float32)
			for i := range d {
				if r.Intn(4) == 0 {
					d[i] = special[r.Intn(len(special))]
				} else {
					d[i] = float32(r.NormFloat64())
				}
			}
			n := &ir.Node{OpType: OpScaleShift, Attrs: map[string]*ir.Attr{"relu": {Name: "relu", Kind: ir.AttrInt, I: relu}}}
			in := []*tensor.Tensor{x, tensor.From(a, C), tensor.From(b, C)}
			got, err := kerneltest.Twins(t, fmt.Sprintf("ScaleShift S=%d relu=%d", S, relu), nil, func(kc *kernel.Ctx) ([]*tensor.Tensor, error) { return runScaleShift(kc, n, in) })
			if err != nil {
				t.Fatal(err)
			}
			g := got[0].Data.([]float32)
			for i, v := range d {
				w := float32(v*a[i/S%C]) + b[i/S%C]
				if relu == 1 && w < 0 {
					w = 0
				}
				if math.Float32bits(g[i]) != math.Float32bits(w) {
					t.Fatalf("S=%d relu=%d element %d: %v (%#x), want %v (%#x)", S, relu, i, g[i], math.Float32bits(g[i]), w, math.Float32bits(w))
				}
			}
		}
	}
}
