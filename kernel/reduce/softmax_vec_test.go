package reduce

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/kerneltest"
)

// TestSoftmaxLine32Twin checks the float32 last-axis line (vmath.Exp32s, on
// the vector and on the portable path, also in place) against the generic
// softmaxLine with the scalar vmath.Exp32: the same bits.
func TestSoftmaxLine32Twin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	sizes := []int{}
	for n := 0; n <= 70; n++ {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, 255, 256, 257, 511, 513, 1000)
	for _, size := range sizes {
		for rep := 0; rep < 6; rep++ {
			x := make([]float32, size)
			for i := range x {
				x[i] = float32(r.NormFloat64() * float64(rep*rep*4+1))
				if rep == 5 {
					switch r.IntN(30) {
					case 0:
						x[i] = float32(math.Inf(1 - 2*r.IntN(2)))
					case 1:
						x[i] = float32(math.NaN())
					case 2:
						x[i] = -200
					}
				}
			}
			for _, k := range []smKind{softmaxKind, logSoftmaxKind} {
				want := make([]float32, size)
				softmaxLine(k, x, want, 0, size, 1, f32)
				for _, l := range kerneltest.Levels() {
					v, portable := (&kernel.Ctx{ISA: l}).Vec(), l
					got := make([]float32, size)
					softmaxLine32(v, k, x, got)
					in := append([]float32(nil), x...)
					softmaxLine32(v, k, in, in)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(in[i]) != math.Float32bits(want[i]) {
							t.Fatalf("kind %d size %d %v at %d: %g (in place %g), want %g", k, size, portable, i, got[i], in[i], want[i])
						}
					}
				}
			}
		}
	}
}
