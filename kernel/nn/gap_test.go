package nn

import (
	"math"
	"math/rand"
	"testing"
)

// gapRef is GlobalAveragePool's sum as the sequential chain per channel.
func gapRef[F float32 | float64](x []F, S int, y []F) {
	for c := range y {
		var s F
		for _, v := range x[c*S : (c+1)*S] {
			s += v
		}
		y[c] = s / F(S)
	}
}

// TestGlobalPoolInterleavedBits checks that the eight-channel sums give
// the sequential chains' bits, on odd channel counts and plane sizes.
func TestGlobalPoolInterleavedBits(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, nc := range []int{1, 7, 8, 9, 15, 16, 17, 1280, 1283} {
		for _, S := range []int{1, 2, 3, 49, 50, 196} {
			x := make([]float32, nc*S)
			for i := range x {
				x[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.Intn(7)-3)))
			}
			if nc > 3 {
				x[3*S] = float32(math.Inf(1))
				x[S+S/2] = float32(math.NaN())
			}
			got, want := make([]float32, nc), make([]float32, nc)
			globalPoolInto(x, S, false, got)
			gapRef(x, S, want)
			for c := range got {
				if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
					t.Fatalf("nc %d S %d c %d: %v want %v", nc, S, c, got[c], want[c])
				}
			}
			xd := make([]float64, nc*S)
			for i := range xd {
				xd[i] = r.NormFloat64()
			}
			gd, wd := make([]float64, nc), make([]float64, nc)
			globalPoolInto(xd, S, false, gd)
			gapRef(xd, S, wd)
			for c := range gd {
				if math.Float64bits(gd[c]) != math.Float64bits(wd[c]) {
					t.Fatalf("f64 nc %d S %d c %d: %v want %v", nc, S, c, gd[c], wd[c])
				}
			}
		}
	}
}

// BenchmarkGlobalAveragePool is mobilenet_v2's last pool (1280x7x7).
func BenchmarkGlobalAveragePool(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	x, y := randF32(r, 1280*49), make([]float32, 1280)
	for i := 0; i < b.N; i++ {
		globalPoolInto(x, 49, false, y)
	}
}
