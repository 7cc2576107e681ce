package elementwise

import (
	"math"
	"testing"

	"github.com/vouchml/vouch/kernel/vmath"
)

// TestDivRowScalarTwin: divRow's float32 row by a scalar (vmath's vector
// division) gives the scalar loop's bits, specials and a tail included,
// in place too.
func TestDivRowScalarTwin(t *testing.T) {
	vals := []float32{1, -2.5, 3e-39, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 7, 1e38, 0.1, -0.3, 5}
	for _, portable := range []bool{false, true} {
		row := rowsFor(vmath.Vector(true), divRow[float32], divRowVec[float32])
		if portable {
			row = rowsFor(vmath.Vec{}, divRow[float32], divRowVec[float32])
		}
		for _, s := range []float32{8, 0.3, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN()), 1e-40} {
			for n := 0; n <= len(vals); n++ {
				a := vals[:n]
				got := make([]float32, n)
				row(got, a, []float32{s}, 1, 0)
				in := append([]float32{}, a...)
				row(in, in, []float32{s}, 1, 0)
				for i := range a {
					w := math.Float32bits(a[i] / s)
					if math.Float32bits(got[i]) != w || math.Float32bits(in[i]) != w {
						t.Fatalf("portable %v: %v / %v = %v (in place %v), want %v", portable, a[i], s, got[i], in[i], a[i]/s)
					}
				}
			}
		}
	}
}
