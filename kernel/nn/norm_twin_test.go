package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// layerNorm32Ref is the scalar definition of layerNorm32, one row at a
// time: the sequential sum, m = s/D, the chain q = FMA32(x-m, x-m, q),
// inv = 1/sqrt(q/D+eps), y = float32(float32((x-m)*inv)*scale) + bias.
func layerNorm32Ref(x, scale, bias []float32, si, bi []int, D int, eps float32, y, mean, inv []float32) {
	for r := 0; r < len(x)/max(D, 1); r++ {
		row := x[r*D : (r+1)*D]
		var s float32
		for _, v := range row {
			s += v
		}
		m := s / float32(D)
		var q float32
		for _, v := range row {
			q = vmath.FMA32(v-m, v-m, q)
		}
		iv := 1 / float32(math.Sqrt(float64(q/float32(D)+eps)))
		mean[r], inv[r] = m, iv
		for j, v := range row {
			t := float32(float32((v-m)*iv) * scale[at(si, j)])
			if bias != nil {
				t += bias[at(bi, j)]
			}
			y[r*D+j] = t
		}
	}
}

// TestLayerNorm32Twins checks layerNorm32 on the vector and the portable
// paths against the scalar definition, bit for bit, on random shapes (row
// and column tails), with and without bias and index maps, with NaN, ±Inf
// and ±0 mixed in.
func TestLayerNorm32Twins(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 3e38}
	gen := func(n int, special bool) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64()*4 + 1)
			if special && r.IntN(40) == 0 {
				v[i] = sp[r.IntN(len(sp))]
			}
		}
		return v
	}
	for it := 0; it < 300; it++ {
		R, D := 1+r.IntN(30), 1+r.IntN(80)
		special := it%4 == 0
		x, sc := gen(R*D, special), gen(D, special)
		var bias []float32
		if it%3 != 0 {
			bias = gen(D, special)
		}
		var si, bi []int
		if it%5 == 0 {
			si, bi = make([]int, D), make([]int, D)
			for j := range si {
				si[j], bi[j] = r.IntN(D), r.IntN(D)
			}
		}
		want, wm, wi := make([]float32, R*D), make([]float32, R), make([]float32, R)
		layerNorm32Ref(x, sc, bias, si, bi, D, 1e-5, want, wm, wi)
		canonNaNs(want, wm, wi) // the contract: NaN results are the canonical NaN
		for _, portable := range kernel.ISAs() {
			y, m, iv := make([]float32, R*D), make([]float32, R), make([]float32, R)
			layerNorm32(ctxAt(nil, portable, nil).Vec(), x, sc, bias, si, bi, D, 1e-5, y, m, iv)
			for _, c := range []struct {
				what      string
				got, want []float32
			}{{"y", y, want}, {"mean", m, wm}, {"inv", iv, wi}} {
				for i := range c.want {
					if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
						t.Fatalf("R=%d D=%d %v: %s[%d] = %#08x, want %#08x", R, D, portable, c.what, i, math.Float32bits(c.got[i]), math.Float32bits(c.want[i]))
					}
				}
			}
		}
	}
}

// canonNaNs replaces every NaN with the canonical NaN, as the kernels write
// them (which NaN plain float code returns depends on the compiled code).
func canonNaNs(vs ...[]float32) {
	for _, v := range vs {
		for i := range v {
			v[i] = canonNaN(v[i])
		}
	}
}
