package reduce

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
)

// TestSoftmax4LinesTwin: softmax4Lines32 (four lines' sums side by side)
// gives softmaxLine32's bits line by line, on the vector and portable
// paths, in place and not, with NaN, ±Inf and ±0 in the lines.
func TestSoftmax4LinesTwin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(4, 4))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1e30, -1e30}
	kerneltest.TestAllImplementations(t, nil, func(t *testing.T, c *kernel.Ctx) {
		v, portable := c.Vec(), c.Level()
		for _, size := range []int{1, 3, 8, 13, 64, 65} {
			for trial := 0; trial < 20; trial++ {
				x := make([]float32, 4*size)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 4)
					if r.IntN(40) == 0 {
						x[i] = special[r.IntN(len(special))]
					}
				}
				want := make([]float32, len(x))
				for l := 0; l < 4; l++ {
					softmaxLine32(v, softmaxKind, x[l*size:(l+1)*size], want[l*size:(l+1)*size])
				}
				got := make([]float32, len(x))
				softmax4Lines32(v, x, got, size)
				inPlace := append([]float32{}, x...)
				softmax4Lines32(v, inPlace, inPlace, size)
				for i := range want {
					w := math.Float32bits(want[i])
					if g := math.Float32bits(got[i]); g != w {
						t.Fatalf("%v size %d: y[%d] = %#x, want %#x", portable, size, i, g, w)
					}
					if g := math.Float32bits(inPlace[i]); g != w {
						t.Fatalf("%v size %d in place: y[%d] = %#x, want %#x", portable, size, i, g, w)
					}
				}
			}
		}
	})
}
