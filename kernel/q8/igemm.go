package q8

import (
	"math"
	"sync"
)

// The integer GEMM: C[m×n] (int32) = A[m×k] · B[k×n] over int16 values in
// [−127, 127], from panels packed as the AVX2 tile reads them:
//
//	A: panels of 6 rows; panel p, k-pair kk, row i: ap[p*kp*12 + kk*12 + 2i + e] = A[6p+i, 2kk+e]
//	B: panels of 16 columns; panel q: bp[q*kp*32 + kk*32 + 2j + e] = B[2kk+e, 16q+j]
//
// zero-padded to whole panels and an even k. Every output is an exact
// integer sum, so the portable tile below and the vector tile agree bit for
// bit however the work is blocked or split between threads.
const (
	tileM = 6
	tileN = 16
	kcP   = 128 // k-pairs per cache block
	mcP   = 8   // row panels per macro tile
	ncP   = 8   // column panels per macro tile
	// MaxK bounds the reduction length: 127·127·MaxK < 2³¹.
	MaxK = 131072
)

func pairs(k int) int { return (k + 1) / 2 }

// packA packs rows [0, m) of A (A[i,kk] = a[i*lda+kk], k columns).
func packA(dst []int16, a []int16, m, k, lda int) {
	kp := pairs(k)
	mp := (m + tileM - 1) / tileM
	for p := 0; p < mp; p++ {
		packAPanel(dst[p*kp*2*tileM:(p+1)*kp*2*tileM], a, p, m, k, lda)
	}
}

func packAPanel(d []int16, a []int16, p, m, k, lda int) {
	kp := pairs(k)
	clear(d)
	for i := 0; i < tileM; i++ {
		r := p*tileM + i
		if r >= m {
			break
		}
		row := a[r*lda : r*lda+k]
		for kk := 0; kk < k; kk++ {
			d[(kk>>1)*2*tileM+2*i+kk&1] = row[kk]
		}
	}
	_ = kp
}

// packB packs B[kk,j] = b[kk*ldb+j] (k rows, n columns), panels [q0, q1).
func packB(c twins, dst []int16, b []int16, n, k, ldb, q0, q1 int) {
	kp := pairs(k)
	for q := q0; q < q1; q++ {
		d := dst[q*kp*2*tileN : (q+1)*kp*2*tileN]
		j0 := q * tileN
		cols := min(tileN, n-j0)
		if cols < tileN || k&1 == 1 {
			clear(d)
		}
		kk := 0
		if c.fast && cols == tileN && k >= 2 {
			full := k / 2
			_ = b[(2*full-1)*ldb+j0+tileN-1]
			interleave(&d[0], &b[j0], ldb, full)
			kk = 2 * full
		}
		for ; kk < k; kk++ {
			src := b[kk*ldb+j0 : kk*ldb+j0+cols]
			o := d[(kk>>1)*2*tileN+kk&1:]
			for j, v := range src {
				o[2*j] = v
			}
		}
	}
}

// packBT packs B[kk,j] = w[j*ldw+kk] (B given transposed, as weights
// [n, k]).
func packBT(dst []int16, w []int8, n, k, ldw int) {
	kp := pairs(k)
	np := (n + tileN - 1) / tileN
	clear(dst[:np*kp*2*tileN])
	for j := 0; j < n; j++ {
		q, jj := j/tileN, j%tileN
		d := dst[q*kp*2*tileN:]
		row := w[j*ldw : j*ldw+k]
		for kk, v := range row {
			d[(kk>>1)*2*tileN+2*jj+kk&1] = int16(v)
		}
	}
}

// packedLen returns the int16 lengths of packed A (m rows) and B (n cols).
func packedLen(m, n, k int) (int, int) {
	kp := pairs(k)
	return (m + tileM - 1) / tileM * kp * 2 * tileM, (n + tileN - 1) / tileN * kp * 2 * tileN
}

// gemmJob runs one packed integer GEMM over macro tiles.
type gemmJob struct {
	m, n, kp int
	ap, bp   []int16
	c        []int32
	ldc      int
	mb, nb   int
	mc       int // row panels per macro tile
	twins    twins
}

var gemmJobs = sync.Pool{New: func() any { return new(gemmJob) }}

// igemm computes c[i*ldc+j] for i < m, j < n from packed panels.
func igemm(pool machine, m, n, k int, ap, bp []int16, c []int32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	j := gemmJobs.Get().(*gemmJob)
	mp, np := (m+tileM-1)/tileM, (n+tileN-1)/tileN
	// A few row panels form one macro tile, so that B streams through
	// the cache once (the sums do not depend on the blocking).
	mc := mcP
	if mp <= 6*mcP {
		mc = mp
	}
	*j = gemmJob{m: m, n: n, kp: pairs(k), ap: ap, bp: bp, c: c, ldc: ldc,
		mb: (mp + mc - 1) / mc, nb: (np + ncP - 1) / ncP, mc: mc, twins: pool.twins}
	pool.Run(j.mb*j.nb, m*n*k/2, j)
	*j = gemmJob{}
	gemmJobs.Put(j)
}

// Run implements parallel.Task over macro tiles (column block major).
func (j *gemmJob) Run(lo, hi int) {
	var tile [tileM * tileN]int32
	mp, np := (j.m+tileM-1)/tileM, (j.n+tileN-1)/tileN
	for u := lo; u < hi; u++ {
		bj, bi := u/j.mb, u%j.mb
		p0, p1 := bi*j.mc, min(mp, (bi+1)*j.mc)
		q0, q1 := bj*ncP, min(np, (bj+1)*ncP)
		for pc := 0; pc < j.kp; pc += kcP {
			kb := min(kcP, j.kp-pc)
			load := 0
			if pc > 0 {
				load = 1
			}
			for q := q0; q < q1; q++ {
				bpan := j.bp[(q*j.kp+pc)*2*tileN:]
				cols := min(tileN, j.n-q*tileN)
				for p := p0; p < p1; p++ {
					apan := j.ap[(p*j.kp+pc)*2*tileM:]
					rows := min(tileM, j.m-p*tileM)
					off := p*tileM*j.ldc + q*tileN
					if rows == tileM && cols == tileN {
						runTile(j.twins, kb, apan, bpan, j.c[off:], j.ldc, load)
						continue
					}
					runTile(j.twins, kb, apan, bpan, tile[:], tileN, 0)
					for ii := 0; ii < rows; ii++ {
						dst := j.c[off+ii*j.ldc : off+ii*j.ldc+cols]
						src := tile[ii*tileN : ii*tileN+cols]
						if load != 0 {
							for jj := range dst {
								dst[jj] += src[jj]
							}
						} else {
							copy(dst, src)
						}
					}
				}
			}
		}
	}
}

func runTile(cp twins, kb int, ap, bp []int16, c []int32, ldc, load int) {
	if cp.fast {
		_ = ap[kb*2*tileM-1]
		_ = bp[kb*2*tileN-1]
		_ = c[(tileM-1)*ldc+tileN-1]
		if cp.vnni {
			tile6x16vnni(kb, &ap[0], &bp[0], &c[0], ldc, load)
			return
		}
		tile6x16(kb, &ap[0], &bp[0], &c[0], ldc, load)
		return
	}
	tilePortable(kb, ap, bp, c, ldc, load)
}

// tilePortable is tile6x16 in Go.
func tilePortable(kb int, ap, bp []int16, c []int32, ldc, load int) {
	var acc [tileM][tileN]int32
	for kk := 0; kk < kb; kk++ {
		a := (*[2 * tileM]int16)(ap[kk*2*tileM:])
		b := (*[2 * tileN]int16)(bp[kk*2*tileN:])
		for i := 0; i < tileM; i++ {
			a0, a1 := int32(a[2*i]), int32(a[2*i+1])
			r := &acc[i]
			for jj := 0; jj < tileN; jj++ {
				r[jj] += a0*int32(b[2*jj]) + a1*int32(b[2*jj+1])
			}
		}
	}
	for i := 0; i < tileM; i++ {
		dst := c[i*ldc : i*ldc+tileN]
		if load != 0 {
			for jj := range dst {
				dst[jj] += acc[i][jj]
			}
		} else {
			copy(dst, acc[i][:])
		}
	}
}

// quantize writes q[i] = clamp(roundHalfEven(float32(x[i]·inv)), −127,
// 127), NaN → 0, as int16.
func quantize(c twins, q []int16, x []float32, inv float32) {
	i := 0
	if c.fast && len(x) >= 8 {
		n8 := len(x) &^ 7
		_ = q[n8-1]
		quant8(&q[0], &x[0], inv, n8)
		i = n8
	}
	for ; i < len(x); i++ {
		q[i] = quantize1(x[i], inv)
	}
}

func quantize1(x, inv float32) int16 {
	v := float32(x * inv)
	switch {
	case v != v:
		return 0
	case v > 127:
		v = 127
	case v < -127:
		v = -127
	}
	return int16(math.RoundToEven(float64(v)))
}
