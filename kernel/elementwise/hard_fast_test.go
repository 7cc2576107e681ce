package elementwise

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
	"github.com/vouchml/vouch/tensor"
)

// TestHardSigmoidTwins: HardSigmoid's Into at every level has Run's bits,
// on every length up to 40 (the 8- and 16-lane groups and their tails)
// and longer ones, with NaN, ±Inf, ±0 and values at and around both
// bounds at random places (or none: the NaN-free runs), for the default
// and other alpha/beta (beta -0 gives a -0 before max(0, ·)).
func TestHardSigmoidTwins(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		-2.5, 2.5, -3, 3, 1e-30, -1e-30, math.Float32frombits(0x7fa00001)}
	sizes := []int{47, 100, 1000}
	for n := 0; n <= 40; n++ {
		sizes = append(sizes, n)
	}
	for _, ab := range [][2]float32{{0.2, 0.5}, {1.0 / 6, 0.5}, {0, 0}, {-1, 0}, {0.25, float32(math.Copysign(0, -1))}} {
		for _, size := range sizes {
			for _, rate := range []int{0, 4, 40} { // one value in rate is special (0: none)
				x := make([]float32, size)
				for i := range x {
					if rate > 0 && r.Intn(rate) == 0 {
						x[i] = special[r.Intn(len(special))]
						continue
					}
					x[i] = float32(r.NormFloat64() * 4)
				}
				n := &ir.Node{OpType: "HardSigmoid", Attrs: map[string]*ir.Attr{
					"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: ab[0]}, "beta": {Name: "beta", Kind: ir.AttrFloat, F: ab[1]}}}
				in := []*tensor.Tensor{tensor.From(x, size)}
				want, err := Ops()["HardSigmoid"].Run(nil, n, in)
				if err != nil {
					t.Fatal(err)
				}
				got, err := kerneltest.Twins(t, "HardSigmoid", nil, func(c *kernel.Ctx) ([]*tensor.Tensor, error) {
					out := tensor.New(tensor.Float32, size)
					return []*tensor.Tensor{out}, Ops()["HardSigmoid"].Into(c, n, in, []*tensor.Tensor{out})
				})
				if err != nil {
					t.Fatal(err)
				}
				if !sameBits(got[0], want[0]) {
					t.Fatalf("alpha %v beta %v, %d values: Into %v, Run %v", ab[0], ab[1], size, got[0].Data, want[0].Data)
				}
			}
		}
	}
}
