package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// GEMM: the one dot-product engine behind MatMul, Gemm, Conv (im2col and
// 1x1), ConvTranspose and Einsum.
//
// Determinism rules (DESIGN.md), which every caller relies on:
//
//   - Each float32 output C[i,j] is exactly one fused multiply-add chain
//     acc = FMA32(A[i,k], B[k,j], acc) for k = 0, 1, ..., K-1 in ascending
//     order, starting from acc = +0. There is no split-K and no partial sum
//     added later; an accumulator may be parked in memory between k blocks
//     (storing a float32 is exact), which changes nothing.
//   - Blocking and threading only choose which outputs are computed
//     together: a 4x8 register block holds 32 independent chains, and
//     threads split the set of outputs, never k. So the result of a row
//     never depends on the other rows (batch invariance), on the number of
//     threads, or on how M and N are padded to the block size (padding rows
//     and columns are computed and thrown away).
//   - A chain whose result is NaN stores the canonical quiet NaN
//     (0x7fc00000): which NaN payload an FMA propagates differs between
//     CPUs (and between x86's VFMADD and Go's float64 emulation), so the
//     payload is not allowed to reach the output.
//   - Bias, alpha and beta are not part of the chain: callers apply them
//     afterwards as separate, individually rounded float32 operations,
//     documented where they happen (Gemm: float32(alpha*acc) +
//     float32(beta*C); Conv: acc + bias).
//
// The fused multiply-add is vmath.FMA32. The micro-kernel inlines FMA32's
// own fast path (the exact float64 sum of the exact product and the
// addend, rounded once, when that rounding cannot be a double rounding)
// and calls vmath.FMA32 for every other case, so each step is bit for bit
// vmath.FMA32.
//
// float64 outputs follow the same order with math.FMA.

const (
	mr = 4  // rows of the register block
	nr = 8  // columns of the register block
	nc = 64 // columns of B kept hot while all row panels pass over them
)

// fmaFast is the check that FMA32's float64 sum s may be rounded to float32
// once: exponent within float32's normal range and the bits below float32
// precision not exactly one half (see vmath.FMA32). A sum of exactly zero
// is also final (the product is exact and float64 addition of exact values
// yields zero only for an exact zero, with IEEE's sign rule); callers test
// s == 0 separately, which keeps ReLU-sparse inputs off the slow path.
func fmaFast(u uint64) bool {
	return (u>>52)&0x7ff-(1023-125) < 252 && u&(1<<29-1) != 1<<28
}

// fma32 is vmath.FMA32 with its fast path inlined (as in micro).
func fma32(a, b, c float32) float32 {
	s := float64(a)*float64(b) + float64(c)
	if fmaFast(math.Float64bits(s)) || s == 0 {
		return float32(s)
	}
	return vmath.FMA32(a, b, c)
}

// sgemmP sets c[i*ldc+j] for i < m, j < n to the FMA chain over k of
// A(i,kk) = a[i*ars+kk*acs] and B(kk,j) = b[kk*brs+j*bcs], on pool: the
// AVX2+FMA twin where pool allows it, else the portable kernel below.
// Both give the same bits.
func sgemmP(pool machine, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	if pool.fast {
		if m < gemmMR && bcs == 1 && n >= gemvRowsMin {
			sgemvRows(pool, m, n, k, a, ars, acs, b, brs, c, ldc)
			return
		}
		if m < gemmMR && n*bcs < 1<<31-16*bcs {
			sgemvFast(pool, m, n, k, a, ars, acs, b, brs, bcs, c, ldc)
			return
		}
		sgemmFast(pool, m, n, k, a, ars, acs, b, brs, bcs, c, ldc)
		return
	}
	sgemmPortable(pool, m, n, k, a, ars, acs, b, brs, bcs, c, ldc)
}

// sgemmEp is sgemmP followed by the epilogue ep (epiCols: a column bias
// of n floats, a clamp and an activation, or off) on each of the m x n
// outputs. The
// packed GEMM applies it in each tile's store, the other paths in a pass
// over each row after the product; the operations are the same.
func sgemmEp(pool machine, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int, c []float32, ldc int, ep epi) {
	if !ep.on {
		sgemmP(pool, m, n, k, a, ars, acs, b, brs, bcs, c, ldc)
		return
	}
	if pool.fast && k > 0 && m >= gemmMR && n > 0 {
		mb := matBs.Get().(*matB)
		*mb = matB{b: b, brs: brs, bcs: bcs}
		sgemmFastB(pool, m, n, k, a, ars, acs, mb, nil, ep, c, ldc)
		*mb = matB{}
		matBs.Put(mb)
		return
	}
	sgemmP(pool, m, n, k, a, ars, acs, b, brs, bcs, c, ldc)
	if m > 0 && n > 0 {
		ep.block(c, ldc, m, n)
		ep.activate(c, ldc, m, n)
	}
}

// sgemmPortable is the portable twin: a 4x8 register block in Go.
func sgemmPortable(pool machine, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int, c []float32, ldc int) {
	mp := (m + mr - 1) / mr
	np := (n + nr - 1) / nr
	ap := make([]float32, mp*mr*k)
	for p := 0; p < mp; p++ {
		dst := ap[p*mr*k:]
		for ii := 0; ii < mr; ii++ {
			i := p*mr + ii
			if i >= m {
				break
			}
			src := i * ars
			for kk := 0; kk < k; kk++ {
				dst[kk*mr+ii] = a[src+kk*acs]
			}
		}
	}
	bp := make([]float32, np*nr*k)
	for q := 0; q < np; q++ {
		dst := bp[q*nr*k:]
		for jj := 0; jj < nr; jj++ {
			j := q*nr + jj
			if j >= n {
				break
			}
			src := j * bcs
			for kk := 0; kk < k; kk++ {
				dst[kk*nr+jj] = b[src+kk*brs]
			}
		}
	}
	// Work units: (column block, row panel), column blocks outermost so a
	// block of packed B stays in cache while every row panel passes.
	qpb := nc / nr
	nb := (np + qpb - 1) / qpb
	units := nb * mp
	run := func(lo, hi int) {
		var acc [mr * nr]float32
		for u := lo; u < hi; u++ {
			blk, p := u/mp, u%mp
			rows := min(mr, m-p*mr)
			apan := ap[p*mr*k : (p+1)*mr*k]
			for q := blk * qpb; q < min(np, (blk+1)*qpb); q++ {
				micro(k, apan, bp[q*nr*k:(q+1)*nr*k], &acc, rows)
				cols := min(nr, n-q*nr)
				for ii := 0; ii < rows; ii++ {
					dst := c[(p*mr+ii)*ldc+q*nr : (p*mr+ii)*ldc+q*nr+cols]
					for jj := range dst {
						dst[jj] = canonNaN(acc[ii*nr+jj])
					}
				}
			}
		}
	}
	pool.Run(units, m*n*k, parallel.Func(run))
}

// For splits [0, units) into contiguous ranges over the pool's workers
// when the work (in multiply-adds) is worth it.
func (m machine) For(units, work int, run func(lo, hi int)) {
	m.Run(units, work, parallel.Func(run))
}

// micro runs the 4x8 register block over all of k: acc[ii*8+jj] is the
// chain of row ii and column jj. Rows at or past rows are left alone.
func micro(k int, ap, bp []float32, acc *[mr * nr]float32, rows int) {
	*acc = [mr * nr]float32{}
	for kk := 0; kk < k; kk++ {
		b := (*[nr]float32)(bp[kk*nr:])
		a := (*[mr]float32)(ap[kk*mr:])
		for ii := 0; ii < rows; ii++ {
			av := a[ii]
			x := float64(av)
			r := (*[nr]float32)(acc[ii*nr:])
			for jj := 0; jj < nr; jj++ {
				s := x*float64(b[jj]) + float64(r[jj])
				if fmaFast(math.Float64bits(s)) || s == 0 {
					r[jj] = float32(s)
				} else {
					r[jj] = vmath.FMA32(av, b[jj], r[jj])
				}
			}
		}
	}
}

// canonNaN returns v, or the canonical quiet NaN when v is a NaN.
func canonNaN(v float32) float32 {
	if v != v {
		return math.Float32frombits(0x7fc00000)
	}
	return v
}

// dot32 is one FMA chain over k: sum of a[i*as]*b[i*bs], from +0.
func dot32(k int, a []float32, as int, b []float32, bs int) float32 {
	var acc float32
	for i := 0; i < k; i++ {
		av, bv := a[i*as], b[i*bs]
		s := float64(av)*float64(bv) + float64(acc)
		if fmaFast(math.Float64bits(s)) || s == 0 {
			acc = float32(s)
		} else {
			acc = vmath.FMA32(av, bv, acc)
		}
	}
	return acc
}

// dgemm is sgemm for float64 with math.FMA, the same chains in the same
// order.
func dgemm(pool machine, m, n, k int, a []float64, ars, acs int, b []float64, brs, bcs int, c []float64, ldc int) {
	pool.For(m, m*n*k, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for j := 0; j < n; j++ {
				var acc float64
				for kk := 0; kk < k; kk++ {
					acc = math.FMA(a[i*ars+kk*acs], b[kk*brs+j*bcs], acc)
				}
				c[i*ldc+j] = acc
			}
		}
	})
}

// gemvRowsMin is the least number of columns for which a GEMM of fewer
// rows than the 6x16 tile, with B's columns contiguous, streams B row by
// row (amd64.GemvRows) instead of computing 16 columns over all of k at a
// time (amd64.GemvC16, which reads B one 64-byte piece per row, each in
// another page once a row of B is a few KB long).
const gemvRowsMin = 64

// gemvRowsCols is the number of columns in one work unit of sgemvRows.
const gemvRowsCols = 64

// sgemvRows is sgemm for m < gemmMR and bcs == 1 through amd64.GemvRows:
// each output row's chains, parked in c between blocks of four k steps,
// over one contiguous range of columns per worker; then NaN results are
// canonicalised. The chains are sgemm's, so are the bits.
func sgemvRows(pool machine, m, n, k int, a []float32, ars, acs int, b []float32, brs int, c []float32, ldc int) {
	j := gemvRowsJobs.Get().(*gemvRowsJob)
	nu := (n + gemvRowsCols - 1) / gemvRowsCols
	*j = gemvRowsJob{m: m, n: n, k: k, a: a, ars: ars, acs: acs, b: b, brs: brs, c: c, ldc: ldc, nu: nu}
	pool.Run(m*nu, m*n*k, j)
	*j = gemvRowsJob{}
	gemvRowsJobs.Put(j)
}

type gemvRowsJob struct {
	m, n, k  int
	a        []float32
	ars, acs int
	b        []float32
	brs      int
	c        []float32
	ldc, nu  int
}

var gemvRowsJobs = sync.Pool{New: func() any { return new(gemvRowsJob) }}

// gemvTailMasks[t] selects the first t lanes of a vector.
var gemvTailMasks = func() (m [8][8]int32) {
	for t := range m {
		for l := 0; l < t; l++ {
			m[t][l] = -1
		}
	}
	return m
}()

func (j *gemvRowsJob) Run(lo, hi int) {
	for u := lo; u < hi; {
		i, q0 := u/j.nu, u%j.nu
		q1 := min(j.nu, q0+hi-u)
		u += q1 - q0
		j0, j1 := q0*gemvRowsCols, min(j.n, q1*gemvRowsCols)
		cols := j1 - j0
		y := j.c[i*j.ldc+j0 : i*j.ldc+j1]
		// bounds: the last element of x and of B's block that is read
		_ = j.a[i*j.ars+(j.k-1)*j.acs]
		_ = j.b[(j.k-1)*j.brs+j1-1]
		var mask *int32
		if t := cols & 7; t != 0 {
			mask = &gemvTailMasks[t][0]
		}
		amd64.GemvRows(j.k, &j.a[i*j.ars], j.acs, &j.b[j0], j.brs, &y[0], cols, mask)
		for jj, v := range y {
			if v != v {
				y[jj] = math.Float32frombits(0x7fc00000)
			}
		}
	}
}
