package elementwise

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// TestVectorTwins runs the operators whose float32 path uses vmath's slice
// functions at every instruction-set level (kerneltest.Twins), through Run
// and Into, and requires the same bits; it also checks Gelu and HardSwish
// (amd64.HardSwishY) against their float32 formulas written out per
// element.
func TestVectorTwins(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(11))
	tanh := map[string]*ir.Attr{"approximate": {Name: "approximate", Kind: ir.AttrString, S: "tanh"}}
	cases := []struct {
		op    string
		attrs map[string]*ir.Attr
	}{{"Exp", nil}, {"Tanh", nil}, {"Sigmoid", nil}, {"Erf", nil}, {"Gelu", nil}, {"Gelu", tanh}, {"HardSwish", nil}}
	for _, c := range cases {
		n := &ir.Node{OpType: c.op, Version: 20, Attrs: c.attrs}
		o := Ops()[c.op]
		for size := 0; size <= 70; size += 1 {
			x := randF32(r, []int{size})
			res, _ := kerneltest.Twins(t, fmt.Sprintf("%s %v size %d", c.op, c.attrs, size), nil, func(kc *kernel.Ctx) ([]*tensor.Tensor, error) {
				out, err := o.Run(kc, n, []*tensor.Tensor{x})
				if err != nil {
					return nil, err
				}
				into := tensor.New(tensor.Float32, size)
				if err := o.Into(kc, n, []*tensor.Tensor{x}, []*tensor.Tensor{into}); err != nil {
					return nil, err
				}
				if !sameBits(out[0], into) {
					t.Fatalf("%s %v size %d at %v: Into differs from Run", c.op, c.attrs, size, kc.Level())
				}
				return out, nil
			})
			if c.op == "HardSwish" { // the formula, x·h with Go's min and max
				xs, ys := x.Data.([]float32), res[0].Data.([]float32)
				for i, v := range xs {
					if want := v * max(0, min(1, float32(v*(1.0/6))+0.5)); math.Float32bits(want) != math.Float32bits(ys[i]) {
						t.Fatalf("HardSwish at %g: %g, formula %g", v, ys[i], want)
					}
				}
			}
			if c.op == "Gelu" {
				xs, ys := x.Data.([]float32), res[0].Data.([]float32)
				for i, v := range xs {
					var want float32
					if c.attrs == nil {
						want = 0.5 * v * (1 + vmath.Erf32(v*float32(1/math.Sqrt2)))
					} else {
						in := float32(0.7978845608028654) * (v + float32(float32(0.044715)*v*v*v))
						want = 0.5 * v * (1 + vmath.Tanh32(in))
					}
					if math.Float32bits(want) != math.Float32bits(ys[i]) {
						t.Fatalf("Gelu %v at %g: %g, formula %g", c.attrs, v, ys[i], want)
					}
				}
			}
		}
	}
}
