package elementwise

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// TestVectorTwins runs the operators whose float32 path uses vmath's slice
// functions on the vector and on the portable path (vmath.UsePortable),
// through Run and Into, and requires the same bits; it also checks Gelu
// against its float32 formula written out per element.
func TestVectorTwins(t *testing.T) {
	defer vmath.UsePortable(false)
	r := rand.New(rand.NewSource(11))
	tanh := map[string]*ir.Attr{"approximate": {Name: "approximate", Kind: ir.AttrString, S: "tanh"}}
	cases := []struct {
		op    string
		attrs map[string]*ir.Attr
	}{{"Exp", nil}, {"Tanh", nil}, {"Sigmoid", nil}, {"Erf", nil}, {"Gelu", nil}, {"Gelu", tanh}}
	for _, c := range cases {
		n := &ir.Node{OpType: c.op, Version: 20, Attrs: c.attrs}
		o := Ops()[c.op]
		for size := 0; size <= 70; size += 1 {
			x := randF32(r, []int{size})
			var res [2][2]*tensor.Tensor
			for p, portable := range []bool{false, true} {
				vmath.UsePortable(portable)
				out, err := o.Run(&kernel.Ctx{}, n, []*tensor.Tensor{x})
				if err != nil {
					t.Fatal(err)
				}
				into := tensor.New(tensor.Float32, size)
				if err := o.Into(&kernel.Ctx{}, n, []*tensor.Tensor{x}, []*tensor.Tensor{into}); err != nil {
					t.Fatal(err)
				}
				res[p] = [2]*tensor.Tensor{out[0], into}
			}
			for _, got := range []*tensor.Tensor{res[0][0], res[0][1], res[1][1]} {
				if !sameBits(got, res[1][0]) {
					t.Fatalf("%s %v size %d: vector/Into differ from portable Run: %v vs %v", c.op, c.attrs, size, got.Data, res[1][0].Data)
				}
			}
			if c.op == "Gelu" {
				xs, ys := x.Data.([]float32), res[0][0].Data.([]float32)
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
