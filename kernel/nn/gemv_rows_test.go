package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

// TestGemvRowsTwin: GEMMs of fewer rows than the 6x16 tile with B's
// columns contiguous and n >= gemvRowsMin (amd64.GemvRows: chains parked
// in C between blocks of four k steps, masked tails) give the portable
// bits and the chain's, with specials, k not a multiple of 4, A read with
// a stride (transA), a row stride of C wider than n, 1 and 3 workers.
func TestGemvRowsTwin(t *testing.T) {
	t.Parallel()
	if !fastOK() {
		t.Skip("no AVX2+FMA: only the portable path exists here")
	}
	r := rand.New(rand.NewSource(31))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := 0; i < 60; i++ {
		m, n, k := 1+r.Intn(5), gemvRowsMin+r.Intn(700), 1+r.Intn(300)
		if i == 0 {
			m, n, k = 1, 1000, 1280
		}
		a := specialF32(r, m*k, i%2 == 0)
		b := specialF32(r, k*n, i%3 == 0)
		ars, acs, av := k, 1, a
		if i%4 == 1 { // A stored as [k][m]
			av = make([]float32, m*k)
			for ii := 0; ii < m; ii++ {
				for kk := 0; kk < k; kk++ {
					av[kk*m+ii] = a[ii*k+kk]
				}
			}
			ars, acs = 1, m
		}
		ldc := n + i%3
		for _, p := range pools {
			fast, port := make([]float32, m*ldc), make([]float32, m*ldc)
			for j := range fast {
				fast[j], port[j] = 7, 7
			}
			sgemmP(mach(p, kernel.ISABest, nil), m, n, k, av, ars, acs, b, n, 1, fast, ldc)
			sgemmP(mach(p, kernel.ISAPortable, nil), m, n, k, av, ars, acs, b, n, 1, port, ldc)
			if d := sameF32(fast, port); d >= 0 {
				t.Fatalf("case %d (%dx%dx%d), %d workers: C[%d] fast %#x, portable %#x", i, m, n, k, p.Workers(), d, math.Float32bits(fast[d]), math.Float32bits(port[d]))
			}
			for ii := 0; ii < m; ii++ {
				for jj := 0; jj < ldc; jj++ {
					want := float32(7)
					if jj < n {
						want = canonNaN(refChain(k, func(kk int) float32 { return a[ii*k+kk] }, func(kk int) float32 { return b[kk*n+jj] }))
					}
					if got := fast[ii*ldc+jj]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("case %d: C[%d,%d] = %#x, want %#x", i, ii, jj, math.Float32bits(got), math.Float32bits(want))
					}
				}
			}
		}
	}
}
