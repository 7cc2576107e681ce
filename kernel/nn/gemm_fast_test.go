package nn

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
)

// specialF32 is random data salted with the values that break careless
// kernels: NaN, ±Inf, ±0, subnormals, values whose products overflow or
// underflow, and exact halfway cases.
func specialF32(r *rand.Rand, n int, salt bool) []float32 {
	v := randF32(r, n)
	if !salt {
		return v
	}
	specials := []float32{
		float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.Copysign(0, -1)), 0, 1e-40, -1e-40, 3e38, -3e38,
		1e-30, 1.5, math.Float32frombits(1), 1 + 1.0/(1<<23),
	}
	for i := range v {
		switch r.Intn(40) {
		case 0:
			v[i] = specials[r.Intn(len(specials))]
		case 1:
			v[i] = math.Float32frombits(r.Uint32())
		}
	}
	return v
}

func sameF32(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// bothGEMM runs sgemm through the portable twin and through the vector
// kernels at every level the CPU has (AVX2, AVX-512); fast is the first
// level's result that differs from port, or the last level's.
func bothGEMM(pool *parallel.Pool, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int) (fast, port []float32) {
	port = make([]float32, m*n)
	for i := range port {
		port[i] = 7 // must be overwritten
	}
	sgemmP(mach(pool, kernel.ISAPortable, nil), m, n, k, a, ars, acs, b, brs, bcs, port, n)
	for _, l := range vectorLevels() {
		fast = make([]float32, m*n)
		for i := range fast {
			fast[i] = 7
		}
		sgemmP(mach(pool, l, nil), m, n, k, a, ars, acs, b, brs, bcs, fast, n)
		if sameF32(fast, port) >= 0 {
			break
		}
	}
	if fast == nil {
		fast = port
	}
	return fast, port
}

func TestSGEMMTwin(t *testing.T) {
	t.Parallel()
	if !amd64.Enabled {
		t.Skip("no AVX2+FMA: only the portable path exists here")
	}
	r := rand.New(rand.NewSource(3))
	pool := parallel.New(2)
	defer pool.Close()
	type shape struct{ m, n, k int }
	var shapes []shape
	for i := 0; i < 150; i++ {
		shapes = append(shapes, shape{1 + r.Intn(70), 1 + r.Intn(70), 1 + r.Intn(70)})
	}
	shapes = append(shapes, shape{1, 1, 1}, shape{6, 16, 1}, shape{7, 17, 257}, shape{97, 257, 513},
		shape{200, 300, 600}, shape{1, 1000, 512}, shape{512, 1, 300}, shape{64, 3136, 576})
	for i, sh := range shapes {
		m, n, k := sh.m, sh.n, sh.k
		a := specialF32(r, m*k, i%3 == 0)
		b := specialF32(r, k*n, i%3 == 1)
		fast, port := bothGEMM(pool, m, n, k, a, k, 1, b, n, 1)
		if d := sameF32(fast, port); d >= 0 {
			t.Fatalf("%v: C[%d] fast %g (%#x), portable %g (%#x)", sh, d, fast[d], math.Float32bits(fast[d]), port[d], math.Float32bits(port[d]))
		}
		if i%10 == 0 && m*n*k < 1<<20 {
			// Transposed views, and the specification itself.
			at, bt := make([]float32, m*k), make([]float32, k*n)
			for ii := 0; ii < m; ii++ {
				for kk := 0; kk < k; kk++ {
					at[kk*m+ii] = a[ii*k+kk]
				}
			}
			for kk := 0; kk < k; kk++ {
				for jj := 0; jj < n; jj++ {
					bt[jj*k+kk] = b[kk*n+jj]
				}
			}
			f2, p2 := bothGEMM(pool, m, n, k, at, 1, m, bt, 1, k)
			if d := sameF32(f2, fast); d >= 0 {
				t.Fatalf("%v transposed: C[%d] %g, want %g", sh, d, f2[d], fast[d])
			}
			if d := sameF32(p2, fast); d >= 0 {
				t.Fatalf("%v transposed portable: C[%d] %g, want %g", sh, d, p2[d], fast[d])
			}
			for ii := 0; ii < m; ii++ {
				for jj := 0; jj < n; jj++ {
					want := canonNaN(refChain(k, func(kk int) float32 { return a[ii*k+kk] }, func(kk int) float32 { return b[kk*n+jj] }))
					if got := fast[ii*n+jj]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%v: C[%d,%d] = %g, want the chain's %g", sh, ii, jj, got, want)
					}
				}
			}
		}
	}
}

// TestSGEMMWorkersInvariant: the same bits on 1, 2 and 8 workers, and for a
// row computed alone (batch invariance).
func TestSGEMMWorkersInvariant(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(4))
	m, n, k := 131, 517, 300
	a, b := specialF32(r, m*k, true), specialF32(r, k*n, false)
	for _, l := range kernel.ISAs() {
		var first []float32
		for _, w := range []int{1, 2, 8} {
			pool := parallel.New(w)
			c := make([]float32, m*n)
			sgemmP(mach(pool, l, nil), m, n, k, a, k, 1, b, n, 1, c, n)
			pool.Close()
			if first == nil {
				first = c
				continue
			}
			if d := sameF32(c, first); d >= 0 {
				t.Fatalf("%v, %d workers: C[%d] = %g, want %g", l, w, d, c[d], first[d])
			}
		}
		row := make([]float32, n)
		sgemmP(mach(nil, l, nil), 1, n, k, a[77*k:], k, 1, b, n, 1, row, n)
		if d := sameF32(row, first[77*n:78*n]); d >= 0 {
			t.Fatalf("%v, row 77 alone: C[%d] = %g, want %g", l, d, row[d], first[77*n+d])
		}
	}
}

// TestSGEMVTwin: GEMMs of fewer rows than the 6x16 tile (the gather and
// masked-load kernels, B read in place) give the portable bits and the
// chain's, for every transposition of A and B, odd n (masked tails).
func TestSGEMVTwin(t *testing.T) {
	if !amd64.Enabled {
		t.Skip("no AVX2+FMA: only the portable path exists here")
	}
	r := rand.New(rand.NewSource(9))
	pool := parallel.New(3)
	defer pool.Close()
	for i := 0; i < 80; i++ {
		m, n, k := 1+r.Intn(5), 1+r.Intn(90), r.Intn(300)
		if i == 0 {
			m, n, k = 1, 1000, 1280 // a classifier
		}
		a := specialF32(r, m*k, i%2 == 0)
		b := specialF32(r, k*n, i%3 == 0)
		ta, tb := i%4 >= 2, i%2 == 1
		ars, acs, brs, bcs := k, 1, n, 1
		av, bv := a, b
		if ta { // A stored as [k][m]
			av = make([]float32, m*k)
			for ii := 0; ii < m; ii++ {
				for kk := 0; kk < k; kk++ {
					av[kk*m+ii] = a[ii*k+kk]
				}
			}
			ars, acs = 1, m
		}
		if tb { // B stored as [n][k]
			bv = make([]float32, k*n)
			for kk := 0; kk < k; kk++ {
				for jj := 0; jj < n; jj++ {
					bv[jj*k+kk] = b[kk*n+jj]
				}
			}
			brs, bcs = 1, k
		}
		if k == 0 {
			continue
		}
		fast, port := bothGEMM(pool, m, n, k, av, ars, acs, bv, brs, bcs)
		if d := sameF32(fast, port); d >= 0 {
			t.Fatalf("case %d (%dx%dx%d, transA %v, transB %v): C[%d] fast %#x, portable %#x", i, m, n, k, ta, tb, d, math.Float32bits(fast[d]), math.Float32bits(port[d]))
		}
		for ii := 0; ii < m; ii++ {
			for jj := 0; jj < n; jj++ {
				want := canonNaN(refChain(k, func(kk int) float32 { return a[ii*k+kk] }, func(kk int) float32 { return b[kk*n+jj] }))
				if got := fast[ii*n+jj]; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("case %d: C[%d,%d] = %#x, want the chain's %#x", i, ii, jj, math.Float32bits(got), math.Float32bits(want))
				}
			}
		}
	}
}
