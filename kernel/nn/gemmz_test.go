package nn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// TestGemmZTwin: the AVX-512 GEMM (amd64.GemmZ16 / GemmZ32 from unitZ)
// gives the bits of the portable GEMM followed by the row bias and the
// unfused epilogue, and so do the AVX2 kernels (the AVX2 level): random
// shapes with odd M, N and K, several k blocks (gemmZKC lowered too),
// every tile shape (MR x 16 and MR x 32, remainder rows, masked column
// edges), A and B read in place, packed (forced.packA / packB) and
// transposed, a row bias, a residual laid out as C, a column bias, a
// second residual, bounds with NaN and Inf, an activation, NaN/Inf in
// every operand, 1, 2 and 8 workers. Bit equality only.
func TestGemmZTwin(t *testing.T) {
	t.Parallel()
	if !amd64.EnabledZ {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewSource(77))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	bounds := [][2]float32{{-inf, inf}, {0, inf}, {-0.5, 6}, {nan, nan}, {inf, -inf}, {0.25, -0.25}}
	act := func(_ vmath.Vec, dst, src []float32) {
		for i, v := range src {
			dst[i] = v*v - 0.5*v
		}
	}
	tiles := [][2]int{{8, 2}, {14, 2}, {5, 2}, {1, 2}, {16, 1}, {7, 1}, {1, 1}, {12, 2}}
	shapes := [][3]int{{64, 128, 128}, {64, 384, 128}, {64, 128, 512}, {64, 64, 64}, {6, 16, 1}, {7, 17, 5},
		{13, 40, 300}, {100, 300, 37}, {101, 33, 513}, {9, 47, 260}, {30, 24, 1}, {17, 1, 70}, {8, 32, 3},
		// several row groups with one k block: tiles prefetch the next
		// group's A (unless forced.noPF)
		{250, 70, 96}, {217, 33, 13}}
	for i := 0; i < 20; i++ {
		shapes = append(shapes, [3]int{6 + r.Intn(90), 1 + r.Intn(150), 1 + r.Intn(600)})
	}
	for si, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		salt := si%2 == 0
		a := specialF32(r, m*k, salt)
		b := specialF32(r, k*n, si%3 == 0)
		bias := specialF32(r, m, si%3 == 1)
		res := specialF32(r, m*n, salt)
		cb := specialF32(r, n, salt)
		r2 := specialF32(r, m*n, si%4 == 0)
		// A stored transposed ([k][m]) and B ([n][k]): packed paths.
		at, bt := make([]float32, m*k), make([]float32, k*n)
		for i := 0; i < m; i++ {
			for kk := 0; kk < k; kk++ {
				at[kk*m+i] = a[i*k+kk]
			}
		}
		for kk := 0; kk < k; kk++ {
			for j := 0; j < n; j++ {
				bt[j*k+kk] = b[kk*n+j]
			}
		}
		base := make([]float32, m*n)
		sgemmP(mach(pools[0], kernel.ISAPortable, nil), m, n, k, a, k, 1, b, n, 1, base, n)
		for ei := 0; ei < 8; ei++ {
			var ep epi
			var bs []float32
			if ei%2 == 1 {
				bs = bias
			}
			lohi := bounds[(si+ei)%len(bounds)]
			switch ei / 2 {
			case 1: // residual laid out as C
				ep = epi{r: res, lo: lohi[0], hi: lohi[1], on: true, fast: true}
			case 2: // column bias and a second residual (MatMul's)
				ep = epi{r: cb, col: true, r2: r2, lo: lohi[0], hi: lohi[1], on: true, fast: true}
			case 3: // column bias, bounds and an activation
				ep = epi{r: cb, col: true, lo: lohi[0], hi: lohi[1], on: true, act: act, fast: true}
			}
			want := append([]float32{}, base...)
			if bs != nil {
				addBias(want, bs, m, n)
			}
			if ep.on {
				epiPortable2(want, ep.r, ep.r2, n, ep.ldr(n), m, n, ep.lo, ep.hi)
				ep.activate(want, n, m, n)
			}
			for mode := 0; mode < 5; mode++ {
				tl := tiles[(si+ei+mode)%len(tiles)]
				zs := gemmZShape{tl[0], tl[1], gemmZKC}
				if mode == 1 {
					zs.kc = 1 + r.Intn(100) // many k blocks
				}
				f := &forced{packA: mode == 2, packB: mode == 3, gemmZ: &zs}
				level := kernel.ISABest
				if mode == 4 {
					level = kernel.ISAAVX2
				}
				ta, tb := mode == 2 && si%2 == 0, mode == 3 && si%2 == 1
				for pi, p := range pools {
					got := make([]float32, m*n)
					for i := range got {
						got[i] = -7
					}
					av, ars, acs := a, k, 1
					if ta {
						av, ars, acs = at, 1, m
					}
					mb := &matB{b: b, brs: n, bcs: 1}
					if tb {
						mb = &matB{b: bt, brs: 1, bcs: k}
					}
					sgemmFastB(mach(p, level, f), m, n, k, av, ars, acs, mb, bs, ep, got, n)
					if d := sameF32(got, want); d >= 0 {
						t.Fatalf("%s: c[%d] = %#x, portable %#x", fmt.Sprintf("%dx%dx%d epi %d mode %d tile %v kc %d pool %d", m, n, k, ei, mode, tl, zs.kc, pi),
							d, math.Float32bits(got[d]), math.Float32bits(want[d]))
					}
				}
			}
		}
	}
}

// TestGemmZKernels calls each AVX-512 kernel directly on a tile inside a
// larger C (strided rows, a partial column mask, Load from parked
// values) and checks every output against the chain and the store's
// operations one by one, and that C outside the tile is untouched.
func TestGemmZKernels(t *testing.T) {
	if !amd64.EnabledZ {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewSource(78))
	for nz := 1; nz <= 2; nz++ {
		maxr := amd64.GemmZMax16
		if nz == 2 {
			maxr = amd64.GemmZMax32
		}
		for mr := 1; mr <= maxr; mr++ {
			for trial := 0; trial < 4; trial++ {
				k := 1 + r.Intn(40)
				lda, ldb, ldc := k+r.Intn(5), 16*nz+r.Intn(9), 16*nz+3+r.Intn(7)
				boff := 16
				if trial%2 == 1 {
					boff = 16 * k
					ldb = 16
				}
				cols := 16*(nz-1) + 1 + r.Intn(16)
				if trial == 0 {
					cols = 16 * nz
				}
				a := specialF32(r, mr*lda, trial%2 == 0)
				b := specialF32(r, k*ldb+boff+16, trial%3 == 0)
				c0 := specialF32(r, (mr+1)*ldc, trial == 2)
				bias := specialF32(r, mr, true)
				rr := specialF32(r, mr*ldc, true)
				r2 := specialF32(r, mr*ldc, true)
				lo, hi := float32(-0.75), float32(2)
				if trial == 3 {
					lo, hi = float32(math.NaN()), float32(math.Inf(1))
				}
				load := trial % 2
				c := append([]float32{}, c0...)
				p := amd64.GemmZArgs{K: k, A: &a[0], LDA: lda, B: &b[0], LDB: ldb, BOff: boff, C: &c[0], LDC: ldc, Load: load,
					Bias: &bias[0], R: &rr[0], LDR: ldc, R2: &r2[0], LDR2: ldc, Lo: lo, Hi: hi, Clamp: true,
					Mask: 1<<(cols-16*(nz-1)) - 1}
				if nz == 2 {
					amd64.GemmZ32(mr, &p)
				} else {
					amd64.GemmZ16(mr, &p)
				}
				for i := 0; i <= mr; i++ {
					for j := 0; j < ldc; j++ {
						got := c[i*ldc+j]
						want := c0[i*ldc+j]
						if i < mr && j < cols {
							bj := j
							if j >= 16 {
								bj = boff + j - 16
							}
							acc := float32(0)
							if load == 1 {
								acc = c0[i*ldc+j]
							}
							for kk := 0; kk < k; kk++ {
								acc = fma32(a[i*lda+kk], b[kk*ldb+bj], acc)
							}
							v := canonNaN(acc) + bias[i]
							v = v + rr[i*ldc+j]
							v = v + r2[i*ldc+j]
							if v < lo {
								v = lo
							}
							if v > hi {
								v = hi
							}
							want = v
						}
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("GemmZ%dx%d k %d cols %d load %d: c[%d,%d] = %#x, want %#x", mr, 16*nz, k, cols, load, i, j,
								math.Float32bits(got), math.Float32bits(want))
						}
					}
				}
			}
		}
	}
}

// The AVX2 kernels where the AVX-512 ones would run: TestSGEMMTwin,
// TestSGEMMWorkersInvariant, TestSGEMMStoreTwin and TestSGEMMResidual2Twin
// run at every level the CPU has (kernel.ISAs), AVX2 included.
