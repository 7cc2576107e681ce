package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

// TestSGEMMResidual2Twin: MatMul's epilogue with a second residual
// (kernel.Epilogue.Residual2), y = clamp((acc + cb[j]) + r2[i,j]), on the
// vector GEMM (the column bias in the tiles' store, then r2 and the
// bounds on each finished tile; edge tiles through the separate pass)
// and on the portable path, gives the bits of those float32 operations
// done one by one: shapes whose last row panel has fewer than 6 rows
// (computed as the last 6 rows), one k block and several, several row
// groups and column blocks, NaN/Inf operands and bounds, 1, 2 and 8
// workers, with and without the column bias.
func TestSGEMMResidual2Twin(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(31))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	inf := float32(math.Inf(1))
	bounds := [][2]float32{{-inf, inf}, {0, inf}, {-0.5, 6}}
	shapes := [][3]int{{64, 128, 128}, {64, 128, 512}, {64, 384, 128}, {7, 17, 5}, {13, 40, 300}, {100, 300, 37}, {101, 33, 64}, {6, 16, 1}, {200, 48, 20}}
	for i := 0; i < 8; i++ {
		shapes = append(shapes, [3]int{6 + r.Intn(120), 1 + r.Intn(200), 1 + r.Intn(600)})
	}
	for si, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		salt := si%2 == 0
		a := specialF32(r, m*k, salt)
		b := specialF32(r, k*n, salt)
		cb := specialF32(r, n, salt)
		r2 := specialF32(r, m*n, salt)
		base := make([]float32, m*n)
		sgemmP(mach(pools[0], kernel.ISAPortable, nil), m, n, k, a, k, 1, b, n, 1, base, n)
		for bi, lohi := range bounds {
			for _, withCB := range []bool{true, false} {
				ep := epi{r2: r2, lo: lohi[0], hi: lohi[1], on: true}
				if withCB {
					ep.r, ep.col = cb, true
				}
				want := make([]float32, m*n)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						v := base[i*n+j]
						if withCB {
							v = v + cb[j]
						}
						v = v + r2[i*n+j]
						if v < ep.lo {
							v = ep.lo
						}
						if v > ep.hi {
							v = ep.hi
						}
						want[i*n+j] = v
					}
				}
				for _, portable := range kernel.ISAs() {
					for pi, p := range pools {
						got := make([]float32, m*n)
						for i := range got {
							got[i] = -7
						}
						mp := mach(p, portable, nil)
						ep := ep
						ep.fast = mp.fast
						sgemmEp(mp, m, n, k, a, k, 1, b, n, 1, got, n, ep)
						if d := sameF32(got, want); d >= 0 {
							t.Fatalf("%s: c[%d] = %#x, want %#x", fmt.Sprintf("%dx%dx%d bounds %d bias %v portable %v pool %d", m, n, k, bi, withCB, portable, pi),
								d, math.Float32bits(got[d]), math.Float32bits(want[d]))
						}
					}
				}
			}
		}
	}
}
