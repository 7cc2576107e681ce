package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
)

// The AVX2+FMA GEMM (kernel/amd64.Sgemm6x16) is the vector twin of sgemm's
// portable path. It computes the same chains: each output is
// acc = FMA(A[i,k], B[k,j], acc) over k ascending from +0, one rounding per
// step (VFMADD231PS is vmath.FMA32 lane-wise). The blocking is MLAS/BLIS
// style and only decides which chains run together:
//
//   - A is packed into panels of 6 rows (a[kk*6+i]) and B into panels of 16
//     columns (b[kk*16+j]), zero-padded; padded lanes are computed and
//     thrown away.
//   - Outputs are split into macro tiles of gemmMC rows by gemmNC columns;
//     the pool's workers take contiguous ranges of macro tiles.
//   - Inside a macro tile k is walked in blocks of gemmKC: after the first
//     block each 6x16 register tile is reloaded from C, where the float32
//     accumulators were parked, and continued at the next k. Storing and
//     reloading a float32 is exact, so this is still one chain in k order
//     (no split-K, no partial sums added together).
const (
	gemmMR = 6
	gemmNR = 16
	gemmKC = 256
	gemmMC = 16 * gemmMR
	gemmNC = 16 * gemmNR
)

// fastKernels selects the vector twins. It starts true where the CPU has
// AVX2 and FMA.
var fastKernels = amd64.Enabled

// UsePortable forces the portable twins of every vectorised kernel of this
// package when on is true (as on a CPU without AVX2+FMA), and restores the
// CPU's choice when false. Both paths give the same bits; replay and twin
// tests use it to prove that. It must not be called while kernels run.
func UsePortable(on bool) { fastKernels = amd64.Enabled && !on }

// poolOf returns the context's worker pool, or the default one.
func poolOf(c *kernel.Ctx) *parallel.Pool {
	if c != nil && c.Pool != nil {
		return c.Pool
	}
	return parallel.Default()
}

// scratch buffers, reused across calls so that warm runs do not allocate.
var f32Bufs sync.Pool

func getF32(n int) *[]float32 {
	if v, ok := f32Bufs.Get().(*[]float32); ok {
		if cap(*v) >= n {
			*v = (*v)[:n]
			return v
		}
		f32Bufs.Put(v)
	}
	s := make([]float32, n, n+n/8)
	return &s
}

func putF32(v *[]float32) { f32Bufs.Put(v) }

// gemmJob is one fast sgemm call; it is both the packing and the compute
// task (phase selects which).
type gemmJob struct {
	m, n, k            int
	a                  []float32
	ars, acs           int
	b                  []float32
	brs, bcs           int
	c                  []float32
	ldc                int
	ap, bp             []float32
	mp, np, mblk, nblk int
	phase              int
}

var gemmJobs = sync.Pool{New: func() any { return new(gemmJob) }}

func sgemmFast(pool *parallel.Pool, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int, c []float32, ldc int) {
	j := gemmJobs.Get().(*gemmJob)
	mp, np := (m+gemmMR-1)/gemmMR, (n+gemmNR-1)/gemmNR
	*j = gemmJob{m: m, n: n, k: k, a: a, ars: ars, acs: acs, b: b, brs: brs, bcs: bcs, c: c, ldc: ldc,
		mp: mp, np: np, mblk: (m + gemmMC - 1) / gemmMC, nblk: (n + gemmNC - 1) / gemmNC}
	abuf, bbuf := getF32(mp*gemmMR*k), getF32(np*gemmNR*k)
	j.ap, j.bp = *abuf, *bbuf
	j.phase = 0
	pool.Run(mp+np, (m+n)*k*8, j)
	j.phase = 1
	pool.Run(j.mblk*j.nblk, m*n*k, j)
	putF32(abuf)
	putF32(bbuf)
	*j = gemmJob{}
	gemmJobs.Put(j)
}

// Run implements parallel.Task: packing panels [lo, hi) (A's then B's) in
// phase 0, macro tiles [lo, hi) in phase 1.
func (j *gemmJob) Run(lo, hi int) {
	if j.phase == 0 {
		for u := lo; u < hi; u++ {
			if u < j.mp {
				j.packA(u)
			} else {
				j.packB(u - j.mp)
			}
		}
		return
	}
	var tile [gemmMR * gemmNR]float32
	for u := lo; u < hi; u++ {
		j.macro(u/j.nblk, u%j.nblk, &tile)
	}
}

func (j *gemmJob) packA(p int) {
	k := j.k
	dst := j.ap[p*gemmMR*k : (p+1)*gemmMR*k]
	rows := min(gemmMR, j.m-p*gemmMR)
	if rows == gemmMR && j.acs == 1 {
		// The common case: six contiguous rows, interleaved step by step.
		base := p * gemmMR * j.ars
		r0 := j.a[base : base+k]
		r1 := j.a[base+j.ars:][:len(r0)]
		r2 := j.a[base+2*j.ars:][:len(r0)]
		r3 := j.a[base+3*j.ars:][:len(r0)]
		r4 := j.a[base+4*j.ars:][:len(r0)]
		r5 := j.a[base+5*j.ars:][:len(r0)]
		for kk := range r0 {
			o := (*[gemmMR]float32)(dst[kk*gemmMR:])
			o[0], o[1], o[2], o[3], o[4], o[5] = r0[kk], r1[kk], r2[kk], r3[kk], r4[kk], r5[kk]
		}
		return
	}
	for ii := 0; ii < rows; ii++ {
		src := (p*gemmMR + ii) * j.ars
		if j.acs == 1 {
			row := j.a[src : src+k]
			for kk, v := range row {
				dst[kk*gemmMR+ii] = v
			}
			continue
		}
		for kk := 0; kk < k; kk++ {
			dst[kk*gemmMR+ii] = j.a[src+kk*j.acs]
		}
	}
	for ii := rows; ii < gemmMR; ii++ {
		for kk := 0; kk < k; kk++ {
			dst[kk*gemmMR+ii] = 0
		}
	}
}

func (j *gemmJob) packB(q int) {
	k := j.k
	dst := j.bp[q*gemmNR*k : (q+1)*gemmNR*k]
	cols := min(gemmNR, j.n-q*gemmNR)
	j0 := q * gemmNR
	if j.bcs == 1 && cols == gemmNR {
		for kk := 0; kk < k; kk++ {
			*(*[gemmNR]float32)(dst[kk*gemmNR:]) = *(*[gemmNR]float32)(j.b[kk*j.brs+j0:])
		}
		return
	}
	if j.bcs == 1 {
		for kk := 0; kk < k; kk++ {
			d := dst[kk*gemmNR : kk*gemmNR+gemmNR]
			src := j.b[kk*j.brs+j0 : kk*j.brs+j0+cols]
			copy(d, src)
			clear(d[cols:])
		}
		return
	}
	for jj := 0; jj < gemmNR; jj++ {
		if jj >= cols {
			for kk := 0; kk < k; kk++ {
				dst[kk*gemmNR+jj] = 0
			}
			continue
		}
		src := (j0 + jj) * j.bcs
		for kk := 0; kk < k; kk++ {
			dst[kk*gemmNR+jj] = j.b[src+kk*j.brs]
		}
	}
}

// macro computes the outputs of macro tile (bi, bj).
func (j *gemmJob) macro(bi, bj int, tile *[gemmMR * gemmNR]float32) {
	k, ldc := j.k, j.ldc
	p0, p1 := bi*(gemmMC/gemmMR), min(j.mp, (bi+1)*(gemmMC/gemmMR))
	q0, q1 := bj*(gemmNC/gemmNR), min(j.np, (bj+1)*(gemmNC/gemmNR))
	for pc := 0; pc < k; pc += gemmKC {
		kb := min(gemmKC, k-pc)
		load := 0
		if pc > 0 {
			load = 1
		}
		for q := q0; q < q1; q++ {
			bpan := j.bp[q*gemmNR*k+pc*gemmNR:]
			cols := min(gemmNR, j.n-q*gemmNR)
			for p := p0; p < p1; p++ {
				apan := j.ap[p*gemmMR*k+pc*gemmMR:]
				rows := min(gemmMR, j.m-p*gemmMR)
				off := p*gemmMR*ldc + q*gemmNR
				if rows == gemmMR && cols == gemmNR {
					amd64.Sgemm6x16(kb, &apan[0], &bpan[0], &j.c[off], ldc, load)
					continue
				}
				// Edge tile: run the full 6x16 tile on a copy and keep the
				// valid part (padding lanes are separate chains).
				if load != 0 {
					for ii := 0; ii < rows; ii++ {
						copy(tile[ii*gemmNR:ii*gemmNR+cols], j.c[off+ii*ldc:off+ii*ldc+cols])
					}
				}
				amd64.Sgemm6x16(kb, &apan[0], &bpan[0], &tile[0], gemmNR, load)
				for ii := 0; ii < rows; ii++ {
					copy(j.c[off+ii*ldc:off+ii*ldc+cols], tile[ii*gemmNR:ii*gemmNR+cols])
				}
			}
		}
	}
}
