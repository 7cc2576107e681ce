package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

// TestSGEMMStoreTwin: the vector GEMM with a bias and a fused epilogue in
// its microkernels' final store (Sgemm6x16, Sgemm6x16R, Sgemm6x16RB, and
// Sgemm6x8R / edge tiles through the separate pass) gives the bits of the
// portable GEMM followed by the bias and the unfused epilogue: random
// shapes with odd edges, several k blocks, NaN/Inf in every operand and
// in the bounds, 1, 2 and 8 workers, with and without an epilogue.
func TestSGEMMStoreTwin(t *testing.T) {
	t.Parallel()
	if !fastOK() {
		t.Skip("no AVX2+FMA")
	}
	r := rand.New(rand.NewSource(21))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	bounds := [][2]float32{{-inf, inf}, {0, inf}, {0, 6}, {-inf, 0.25}, {nan, nan}, {inf, -inf}, {0.5, -0.5}}
	shapes := [][3]int{{6, 16, 1}, {12, 32, 300}, {7, 17, 5}, {64, 49, 576}, {13, 40, 513}, {96, 256, 64}, {100, 300, 37}, {6, 8, 260}, {30, 24, 1}}
	for i := 0; i < 12; i++ {
		shapes = append(shapes, [3]int{6 + r.Intn(70), 1 + r.Intn(200), 1 + r.Intn(600)})
	}
	for si, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		salt := si%2 == 0
		a := specialF32(r, m*k, salt)
		b := specialF32(r, k*n, salt)
		bias := specialF32(r, m, si%3 == 0)
		res := specialF32(r, m*n, salt)
		for i, v := range res {
			if v != v {
				res[i] = nan
			}
		}
		base := make([]float32, m*n)
		sgemmP(mach(pools[0], kernel.ISAPortable, nil), m, n, k, a, k, 1, b, n, 1, base, n)
		for ei := 0; ei <= 2*len(bounds); ei++ {
			var ep epi
			var bs []float32
			if ei > 0 {
				lohi := bounds[(ei-1)%len(bounds)]
				ep = epi{lo: lohi[0], hi: lohi[1], on: true, fast: true}
				if ei > len(bounds) {
					ep.r = res
				}
			}
			if ei%2 == 0 {
				bs = bias
			}
			want := append([]float32{}, base...)
			if bs != nil {
				addBias(want, bs, m, n)
			}
			if ep.on {
				epiPortable(want, ep.r, n, n, m, n, ep.lo, ep.hi)
			}
			for mode := 0; mode < 3*len(vectorLevels()); mode++ {
				l := vectorLevels()[mode/3]
				f := &forced{packA: mode%3 == 2, packB: mode%3 >= 1}
				for pi, p := range pools {
					got := make([]float32, m*n)
					for i := range got {
						got[i] = -7
					}
					mb := &matB{b: b, brs: n, bcs: 1}
					sgemmFastB(mach(p, l, f), m, n, k, a, k, 1, mb, bs, ep, got, n)
					if d := sameF32(got, want); d >= 0 {
						t.Fatalf("%s: c[%d] = %#x, portable %#x", fmt.Sprintf("%dx%dx%d epi %d mode %d (%v) pool %d", m, n, k, ei, mode, l, pi),
							d, math.Float32bits(got[d]), math.Float32bits(want[d]))
					}
				}
			}
		}
	}
}
