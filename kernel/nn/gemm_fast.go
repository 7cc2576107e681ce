package nn

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/kernel/amd64"
)

// The AVX2+FMA GEMM (kernel/amd64.Sgemm6x16) is the vector twin of sgemm's
// portable path. It computes the same chains: each output is
// acc = FMA(A[i,k], B[k,j], acc) over k ascending from +0, one rounding per
// step (VFMADD231PS is vmath.FMA32 lane-wise). The blocking is
// GotoBLAS/BLIS style and only decides which chains run together:
//
//   - A with contiguous rows (convolution weights, MatMul's A) is read in
//     place, six row pointers per tile (amd64.Sgemm6x16R); other A views
//     are packed once, up front, into panels of 6 rows (a[kk*6+i]),
//     zero-padded. Rows past M (a repeated row, or padding) are computed
//     and thrown away.
//   - Outputs are split into column blocks of at most gemmNC columns,
//     whole 16-column panels spread evenly over the blocks (with several
//     workers, a multiple of the workers: each takes the same number of
//     panels), and, when there are fewer column blocks than workers, row
//     chunks; the pool's workers take contiguous ranges of these units.
//     Row chunks of one column block share its B blocks, packed once, up
//     front, by all workers.
//   - A unit walks k in blocks of gemmKC. For each k block it packs its
//     columns of B for those k steps into a block of 16-column panels
//     (b[kk*16+j], zero-padded) that stays in L2 (from a matrix, or
//     straight from the convolution input: im2col is never materialised),
//     then runs the 6x16 microkernel over its rows in groups of gemmMC.
//     After the first k block each register tile is reloaded from C, where
//     the float32 accumulators were parked, and continued at the next k.
//     Storing and reloading a float32 is exact, so this is still one chain
//     in k order (no split-K, no partial sums added together).
//
// Where the CPU has AVX-512 (amd64.EnabledZ), units run unitZ instead:
// the same blocking with tiles of gemmZMR rows by 32 columns
// (amd64.GemmZ32, or GemmZ16), and the same chains and store.
const (
	gemmMR = 6
	gemmNR = 16
	gemmKC = 256
	gemmMC = 16 * gemmMR
	gemmNC = 16 * gemmNR
	// gemmSharedB is the most floats of B packed up front for row chunks
	// to share (16 MiB).
	gemmSharedB = 1 << 22
)

// scratch buffers, reused across calls so that warm runs do not allocate:
// one pool per power-of-two capacity, so that a pooled buffer always fits
// (a single pool can keep handing back a buffer too small for the caller).
var f32Bufs [48]sync.Pool

func getF32(n int) *[]float32 {
	c := bits.Len(uint(max(n, 1) - 1))
	if v, ok := f32Bufs[c].Get().(*[]float32); ok {
		*v = (*v)[:n]
		return v
	}
	s := make([]float32, n, 1<<c)
	return &s
}

func putF32(v *[]float32) { f32Bufs[bits.Len(uint(max(cap(*v), 1)-1))].Put(v) }

// bSource fills a block of packed B panels: for the columns
// [j0, j0+cols) and the k steps [k0, k0+kb), panel qq (columns
// j0+16qq ..) at dst[qq*16*kb:], step kk at [kk*16:], lanes past cols zero.
type bSource interface {
	packB(dst []float32, k0, kb, j0, cols int)
}

// matB is a B matrix: B(kk, j) = b[kk*brs + j*bcs].
type matB struct {
	b        []float32
	brs, bcs int
}

func (m *matB) packB(dst []float32, k0, kb, j0, cols int) {
	for qq := 0; qq*gemmNR < cols; qq++ {
		pan := dst[qq*gemmNR*kb : (qq+1)*gemmNR*kb]
		c0 := j0 + qq*gemmNR
		w := min(gemmNR, j0+cols-c0)
		if m.bcs == 1 {
			src := m.b[k0*m.brs+c0:]
			if w == gemmNR {
				for kk := 0; kk < kb; kk++ {
					*(*[gemmNR]float32)(pan[kk*gemmNR:]) = *(*[gemmNR]float32)(src[kk*m.brs:])
				}
				continue
			}
			for kk := 0; kk < kb; kk++ {
				d := pan[kk*gemmNR : kk*gemmNR+gemmNR]
				copy(d, src[kk*m.brs:kk*m.brs+w])
				clear(d[w:])
			}
			continue
		}
		for jj := 0; jj < gemmNR; jj++ {
			if jj >= w {
				for kk := 0; kk < kb; kk++ {
					pan[kk*gemmNR+jj] = 0
				}
				continue
			}
			src := m.b[(c0+jj)*m.bcs+k0*m.brs:]
			for kk := 0; kk < kb; kk++ {
				pan[kk*gemmNR+jj] = src[kk*m.brs]
			}
		}
	}
}

// gemmJob is one fast sgemm call; it is both the A packing and the
// compute task (phase selects which).
type gemmJob struct {
	m, n, k  int
	a        []float32
	ars, acs int
	src      bSource
	c        []float32
	ldc      int
	ap       []float32
	bp       []float32 // B packed up front (shared by row chunks), or nil
	mp       int
	npan     int       // 16-column panels
	nblk     int       // column blocks
	kcb      int       // k block size
	mchunks  int       // row chunks per column block
	mcp      int       // row panels per chunk
	bias     []float32 // per row of C, added after the chain, or nil
	ep       epi       // the fused epilogue, applied after the bias
	epFuse   bool      // ep goes into the microkernels' store (r and c apart)
	phase    int
	z        bool // the AVX-512 kernels (unitZ): row panels of gemmZMR rows, A packed row-major
	mr       int  // rows per row panel: gemmMR, or gemmZMR when z
	nz       int  // unitZ's 16-column panels per tile (gemmZNZ)
	f        *forced
}

var gemmJobs = sync.Pool{New: func() any { return new(gemmJob) }}

// bBlocks is a free list of the units' packed B blocks (one size; at most
// one per concurrently running unit, kept for good: a sync.Pool would drop
// them at every GC and allocate 256 KiB again).
var bBlocks struct {
	sync.Mutex
	free []*[gemmNC * gemmKC]float32
}

func getBBlock() *[gemmNC * gemmKC]float32 {
	bBlocks.Lock()
	defer bBlocks.Unlock()
	if n := len(bBlocks.free); n > 0 {
		b := bBlocks.free[n-1]
		bBlocks.free = bBlocks.free[:n-1]
		return b
	}
	return new([gemmNC * gemmKC]float32)
}

func putBBlock(b *[gemmNC * gemmKC]float32) {
	bBlocks.Lock()
	bBlocks.free = append(bBlocks.free, b)
	bBlocks.Unlock()
}

var matBs = sync.Pool{New: func() any { return new(matB) }}

func sgemmFast(pool machine, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int, c []float32, ldc int) {
	mb := matBs.Get().(*matB)
	*mb = matB{b: b, brs: brs, bcs: bcs}
	sgemmFastB(pool, m, n, k, a, ars, acs, mb, nil, epi{}, c, ldc)
	*mb = matB{}
	matBs.Put(mb)
}

// sgemmFastB is sgemmFast with B given by src. bias, when not nil, is
// added to each output after its chain, c[i,j] = acc + bias[i], as its
// tile is finished (the same float32 addition a later pass would do), and
// then the epilogue ep, if on, to the finished tile (ep.r laid out as c,
// or a column bias of n floats), and its activation to each row group's
// part of a column block once all its tiles are final.
func sgemmFastB(pool machine, m, n, k int, a []float32, ars, acs int, src bSource, bias []float32, ep epi, c []float32, ldc int) {
	j := gemmJobs.Get().(*gemmJob)
	f := pool.f()
	z := pool.z
	zs := gemmZShape{gemmZMR, gemmZNZ, gemmZKC}
	if f.gemmZ != nil {
		zs = *f.gemmZ
	}
	mr := gemmMR
	if z {
		mr = zs.mr
	}
	mp := (m + mr - 1) / mr
	npan := (n + gemmNR - 1) / gemmNR
	nblk := (npan + gemmNC/gemmNR - 1) / (gemmNC / gemmNR)
	// Row chunks only where column blocks are fewer than the workers;
	// otherwise as many blocks as a multiple of the workers, so that each
	// gets the same number of panels.
	mchunks := 1
	if w := pool.Workers(); w > 1 && nblk < w {
		mchunks = min(mp, (w+nblk-1)/nblk)
	} else if w > 1 {
		nblk = min(npan, (nblk+w-1)/w*w)
	}
	mcp := (mp + mchunks - 1) / mchunks
	mchunks = (mp + mcp - 1) / mcp
	// k blocks of equal size (at most gemmKC): no short last block whose
	// tiles would be loaded and stored for a few steps.
	kc := gemmKC
	if z {
		kc = min(gemmKC, zs.kc)
	}
	nkb := (k + kc - 1) / kc
	kcb := (k + nkb - 1) / nkb
	*j = gemmJob{m: m, n: n, k: k, a: a, ars: ars, acs: acs, src: src, c: c, ldc: ldc,
		mp: mp, npan: npan, nblk: nblk, kcb: kcb, mchunks: mchunks, mcp: mcp, bias: bias, ep: ep,
		z: z, mr: mr, nz: zs.nz, f: f}
	j.epFuse = ep.on && !overlaps(ep.r, c) && !overlaps(ep.r2, c)
	// Row chunks of a column block would each pack its B blocks: pack
	// them once, up front, all workers sharing the packing, where the
	// packed B is not too large (a B matrix with contiguous rows is mostly
	// read in place and is left as it is).
	var bbuf *[]float32
	_, packed := src.(*packedB)
	if mb, ok := src.(*matB); mchunks > 1 && !packed && npan*gemmNR*k <= gemmSharedB && !(ok && mb.bcs == 1 && acs == 1 && !f.packA && !f.packB) {
		bbuf = getF32(npan * gemmNR * k)
		j.bp = *bbuf
		j.phase = 2
		pool.Run(nblk*((k+kcb-1)/kcb), n*k*2, j)
	}
	// A with contiguous rows is read in place (Sgemm6x16R); otherwise it
	// is packed into panels first.
	var abuf *[]float32
	if acs != 1 || f.packA {
		abuf = getF32(mp * mr * k)
		j.ap = *abuf
		j.phase = 0
		pool.Run(mp, m*k*8, j)
	}
	j.phase = 1
	pool.Run(nblk*mchunks, m*n*k, j)
	if abuf != nil {
		putF32(abuf)
	}
	if bbuf != nil {
		putF32(bbuf)
	}
	*j = gemmJob{}
	gemmJobs.Put(j)
}

// Run implements parallel.Task: packing A's panels [lo, hi) in phase 0,
// units (column block, row chunk) [lo, hi) in phase 1, B blocks (column
// block, k block) [lo, hi) in phase 2.
func (j *gemmJob) Run(lo, hi int) {
	switch j.phase {
	case 0:
		for u := lo; u < hi; u++ {
			if j.z {
				j.packAZ(u)
			} else {
				j.packA(u)
			}
		}
		return
	case 2:
		nkb := (j.k + j.kcb - 1) / j.kcb
		for u := lo; u < hi; u++ {
			bj, pc := u/nkb, u%nkb*j.kcb
			j0, ncols := j.block(bj)
			kb := min(j.kcb, j.k-pc)
			j.src.packB(j.bp[j0*j.k+pc*((ncols+gemmNR-1)/gemmNR*gemmNR):], pc, kb, j0, ncols)
		}
		return
	}
	bbuf := getBBlock()
	for u := lo; u < hi; u++ {
		if j.z {
			j.unitZ(u/j.mchunks, u%j.mchunks, bbuf[:])
		} else {
			j.unit(u/j.mchunks, u%j.mchunks, bbuf[:])
		}
	}
	putBBlock(bbuf)
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

// block returns column block bj's first column and column count: whole
// panels, spread evenly over the blocks.
func (j *gemmJob) block(bj int) (j0, ncols int) {
	p0, p1 := bj*j.npan/j.nblk, (bj+1)*j.npan/j.nblk
	return p0 * gemmNR, min(p1*gemmNR, j.n) - p0*gemmNR
}

// unit computes the outputs of column block bj and row chunk mc.
//
// A last row panel of fewer than 6 rows (M not a multiple of 6) is, where
// A is read in place and k is one block, computed as the full panel of
// the last 6 rows instead: the rows it shares with the panel before it
// are the same chains (the same A rows, B columns and k order, from +0)
// with the same store, so they are written again with the same bits,
// before the row group's activation and by the same worker. That saves
// the edge tile's copies and its separate epilogue pass.
func (j *gemmJob) unit(bj, mc int, bblk []float32) {
	var tile [gemmMR * gemmNR]float32
	var rowp [gemmMC / gemmMR][gemmMR]*float32
	var btile [gemmMR]float32
	var st amd64.Store
	k, ldc, m := j.k, j.ldc, j.m
	j0, ncols := j.block(bj)
	nq := (ncols + gemmNR - 1) / gemmNR
	pA, pZ := mc*j.mcp, min(j.mp, (mc+1)*j.mcp)
	// A B matrix with contiguous rows is read in place too
	// (Sgemm6x16RB), all but a last partial panel, which is packed.
	mb, _ := j.src.(*matB)
	directB := mb != nil && mb.bcs == 1 && j.ap == nil && !j.f.packB
	// B packed at bind time is read in place, panel by panel.
	pk, _ := j.src.(*packedB)
	kcb := j.kcb
	// shift: the last partial row panel runs as the last 6 rows (above).
	shift := j.ap == nil && kcb >= k && m > gemmMR && m%gemmMR != 0 && (!j.ep.on || j.epFuse)
	for pc := 0; pc < k; pc += kcb {
		kb := min(kcb, k-pc)
		switch {
		case pk != nil:
		case j.bp != nil:
			// Packed up front: column block bj's panels for all k at
			// j.bp[j0*k:], k block pc at [pc*nq*16:].
			bblk = j.bp[j0*k+pc*nq*gemmNR:]
		case !directB:
			j.src.packB(bblk, pc, kb, j0, ncols)
		case ncols%gemmNR != 0:
			e := (nq - 1) * gemmNR
			mb.packB(bblk, pc, kb, j0+e, ncols-e)
		}
		load := 0
		if pc > 0 {
			load = 1
		}
		final := pc+kb == k
		last := final && j.bias != nil
		epil := final && j.ep.on
		for p0 := pA; p0 < pZ; p0 += gemmMC / gemmMR {
			p1 := min(pZ, p0+gemmMC/gemmMR)
			// The panels' first rows (r0) and valid rows, and, for A
			// read in place, their row pointers at this k block: once
			// per k block, not per tile.
			var r0s [gemmMC / gemmMR]int32
			var nrows [gemmMC / gemmMR]int8
			for p := p0; p < p1; p++ {
				r0, rows := p*gemmMR, min(gemmMR, m-p*gemmMR)
				if rows < gemmMR && shift && p > p0 {
					r0, rows = m-gemmMR, gemmMR
				}
				r0s[p-p0], nrows[p-p0] = int32(r0), int8(rows)
				if j.ap == nil {
					rp := &rowp[p-p0]
					for ii := range rp {
						rp[ii] = &j.a[(r0+min(ii, rows-1))*j.ars+pc]
					}
				}
			}
			for qq := 0; qq < nq; qq++ {
				q := j0/gemmNR + qq
				cols := min(gemmNR, j.n-q*gemmNR)
				var bpan []float32
				var bdir *float32
				switch {
				case pk != nil:
					bpan = pk.p[(q*k+pc)*gemmNR:]
				case directB && cols == gemmNR:
					bdir = &mb.b[pc*mb.brs+q*gemmNR]
				case directB:
					bpan = bblk
				default:
					bpan = bblk[qq*gemmNR*kb:]
				}
				// The epilogue's operand for this column (a column bias
				// is the same for every tile of the column).
				var colR *float32
				if epil && j.epFuse && j.ep.r != nil && j.ep.col {
					colR = &j.ep.r[q*gemmNR]
				}
				for p := p0; p < p1; p++ {
					r0, rows := int(r0s[p-p0]), int(nrows[p-p0])
					off := r0*ldc + q*gemmNR
					var apan []float32
					if j.ap != nil {
						apan = j.ap[p*gemmMR*k+pc*gemmMR:]
					}
					full := rows == gemmMR && cols == gemmNR
					dst, ld := &j.c[off], ldc
					if !full {
						// Edge tile: run the full 6x16 tile on a copy and
						// keep the valid part (padding lanes are separate
						// chains).
						if load != 0 {
							for ii := 0; ii < rows; ii++ {
								copy(tile[ii*gemmNR:ii*gemmNR+cols], j.c[off+ii*ldc:off+ii*ldc+cols])
							}
						}
						dst, ld = &tile[0], gemmNR
					}
					// The bias goes in with the last k block's store, and
					// so does the epilogue of a full tile (an edge tile's
					// residual is not laid out as the copy: it gets the
					// epilogue after it is written back).
					var bias *float32
					if last {
						if rows == gemmMR {
							bias = &j.bias[r0]
						} else {
							var bt [gemmMR]float32
							copy(bt[:], j.bias[r0:r0+rows])
							btile = bt
							bias = &btile[0]
						}
					}
					var stp *amd64.Store
					epInStore := epil && full && j.epFuse
					if bias != nil || epInStore {
						st = amd64.Store{Bias: bias}
						if epInStore {
							switch {
							case colR != nil:
								st.R = colR
							case j.ep.r != nil:
								// ep.tile(off, q*gemmNR)'s operand,
								// without copying the epilogue.
								st.R, st.LDR = &j.ep.r[off], ldc
							}
							// With a second residual the bounds come
							// after it (amd64.Epi below).
							st.Lo, st.Hi, st.Clamp = j.ep.lo, j.ep.hi, j.ep.r2 == nil
						}
						stp = &st
					}
					switch {
					case apan != nil:
						amd64.Sgemm6x16(kb, &apan[0], &bpan[0], dst, ld, load, stp)
					case bdir != nil:
						amd64.Sgemm6x16RB(kb, &rowp[p-p0], bdir, mb.brs, dst, ld, load, stp)
					case cols <= gemmNR/2:
						amd64.Sgemm6x8R(kb, &rowp[p-p0], &bpan[0], dst, ld, load, bias)
					default:
						amd64.Sgemm6x16R(kb, &rowp[p-p0], &bpan[0], dst, ld, load, stp)
					}
					if !full {
						for ii := 0; ii < rows; ii++ {
							copy(j.c[off+ii*ldc:off+ii*ldc+cols], tile[ii*gemmNR:ii*gemmNR+cols])
						}
					}
					if epInStore && j.ep.r2 != nil {
						// The store added the bias and the first
						// operand; the second residual and the bounds
						// follow, on the tile still in L1.
						_ = j.ep.r2[off+(gemmMR-1)*ldc+gemmNR-1]
						amd64.Epi(dst, ldc, &j.ep.r2[off], ldc, gemmMR, gemmNR, j.ep.lo, j.ep.hi)
					}
					if epil && !epInStore {
						// The tile's chains and bias are final: the
						// epilogue while the tile is in L1.
						ep := j.ep.tile(off, q*gemmNR)
						ep.block(j.c[off:], ldc, rows, cols)
					}
				}
			}
			if epil && j.ep.act != nil {
				// The activation (kernel.Epilogue.Act) over this row
				// group's part of the column block, now final: one call
				// per row of ncols outputs, still in cache.
				i0 := p0 * gemmMR
				j.ep.activate(j.c[i0*ldc+j0:], ldc, min(m, p1*gemmMR)-i0, ncols)
			}
		}
	}
}

// gemvJob is a GEMM of fewer rows than the 6x16 tile: each row of C is
// computed in blocks of 16 outputs straight from B (amd64.GemvG16 or
// GemvC16), without packing either operand. Units are (row, block).
type gemvJob struct {
	m, n, k  int
	a        []float32
	ars, acs int
	b        []float32
	brs, bcs int
	c        []float32
	ldc, nb  int
}

var gemvJobs = sync.Pool{New: func() any { return new(gemvJob) }}

func sgemvFast(pool machine, m, n, k int, a []float32, ars, acs int, b []float32, brs, bcs int, c []float32, ldc int) {
	j := gemvJobs.Get().(*gemvJob)
	nb := (n + gemmNR - 1) / gemmNR
	*j = gemvJob{m: m, n: n, k: k, a: a, ars: ars, acs: acs, b: b, brs: brs, bcs: bcs, c: c, ldc: ldc, nb: nb}
	pool.Run(m*nb, m*n*k*4, j)
	*j = gemvJob{}
	gemvJobs.Put(j)
}

func (j *gemvJob) Run(lo, hi int) {
	var idx, mask [gemmNR]int32
	var out [gemmNR]float32
	for u := lo; u < hi; u++ {
		i, q := u/j.nb, u%j.nb
		j0 := q * gemmNR
		cols := min(gemmNR, j.n-j0)
		for jj := range mask {
			mask[jj], idx[jj] = 0, 0
			if jj < cols {
				mask[jj], idx[jj] = -1, int32(jj*j.bcs)
			}
		}
		x := &j.a[i*j.ars]
		b := &j.b[j0*j.bcs]
		if j.bcs == 1 {
			amd64.GemvC16(j.k, x, j.acs, b, j.brs, &mask[0], &out[0])
		} else {
			amd64.GemvG16(j.k, x, j.acs, b, j.brs, &idx[0], &mask[0], &out[0])
		}
		copy(j.c[i*j.ldc+j0:i*j.ldc+j0+cols], out[:cols])
	}
}

// overlaps reports whether r and c share memory (the residual must be
// read before the tile that covers it is written: with a shared buffer
// the epilogue runs as a separate pass over each finished tile).
func overlaps(r, c []float32) bool {
	if len(r) == 0 || len(c) == 0 {
		return false
	}
	r0, c0 := uintptr(unsafe.Pointer(&r[0])), uintptr(unsafe.Pointer(&c[0]))
	return r0 < c0+uintptr(len(c))*4 && c0 < r0+uintptr(len(r))*4
}

// The AVX-512 path (amd64.GemmZ16 / GemmZ32, where amd64.EnabledZ). The
// same blocking and the same chains as unit's, with other tiles: rows in
// panels of gemmZMR (a last panel of fewer rows runs the kernel of that
// many rows, nothing computed twice), columns in tiles of two 16-column
// panels (one for an odd last full panel, and one masked tile for a
// partial panel: lanes past the matrix are computed from B's zero padding
// and neither read nor stored in C). A that is not read in place is
// copied row-major (packAZ) and then read as a matrix.
const (
	// gemmZMR is the rows of a full tile (at most amd64.GemmZMax32;
	// amd64.GemmZMax16 with gemmZNZ = 1).
	gemmZMR = 8
	// gemmZNZ is the 16-column panels of a full tile (1 or 2).
	gemmZNZ = 2
	// gemmZKC is the largest k block of the AVX-512 path.
	gemmZKC = gemmKC
)

// gemmZShape is the AVX-512 path's register blocking: mr rows by nz
// 16-column panels, k blocks of at most kc. Benchmarks of the tile choice
// force others (forced.gemmZ); the bits are the same.
type gemmZShape struct{ mr, nz, kc int }

// packAZ copies A's row panel p (rows p*mr ..) row-major: A(i, kk) to
// ap[i*k+kk].
func (j *gemmJob) packAZ(p int) {
	k := j.k
	for i := p * j.mr; i < min(j.m, (p+1)*j.mr); i++ {
		dst := j.ap[i*k : (i+1)*k]
		if j.acs == 1 {
			copy(dst, j.a[i*j.ars:i*j.ars+k])
			continue
		}
		for kk := range dst {
			dst[kk] = j.a[i*j.ars+kk*j.acs]
		}
	}
}

// unitZ is unit on the AVX-512 kernels: the outputs of column block bj
// and row chunk mc.
func (j *gemmJob) unitZ(bj, mc int, bblk []float32) {
	var ar amd64.GemmZArgs
	k, ldc, m := j.k, j.ldc, j.m
	j0, ncols := j.block(bj)
	nq := (ncols + gemmNR - 1) / gemmNR
	nfull := ncols / gemmNR
	i0, i1 := mc*j.mcp*j.mr, min(m, (mc+1)*j.mcp*j.mr)
	a, lda := j.a, j.ars
	if j.ap != nil {
		a, lda = j.ap, k
	}
	// B with contiguous rows is read in place (unless packed up front),
	// all but a last partial panel, which is packed.
	mb, _ := j.src.(*matB)
	directB := mb != nil && mb.bcs == 1 && j.bp == nil && !j.f.packB
	pk, _ := j.src.(*packedB)
	mr, nz := j.mr, j.nz
	mc0 := max(1, 96/mr) * mr // rows per row group
	kcb := j.kcb
	ar.LDA, ar.LDC = lda, ldc
	for pc := 0; pc < k; pc += kcb {
		kb := min(kcb, k-pc)
		switch {
		case pk != nil:
		case j.bp != nil:
			bblk = j.bp[j0*k+pc*nq*gemmNR:]
		case !directB:
			j.src.packB(bblk, pc, kb, j0, ncols)
		case nq > nfull:
			e := nfull * gemmNR
			mb.packB(bblk, pc, kb, j0+e, ncols-e)
		}
		ar.K, ar.Load = kb, 0
		if pc > 0 {
			ar.Load = 1
		}
		final := pc+kb == k
		last := final && j.bias != nil
		epil := final && j.ep.on
		epInStore := epil && j.epFuse
		for g0 := i0; g0 < i1; g0 += mc0 {
			g1 := min(i1, g0+mc0)
			for qq := 0; qq < nq; {
				q := j0/gemmNR + qq
				w := 1
				if nz == 2 && qq+1 < nfull {
					w = 2
				}
				cols := min(w*gemmNR, j.n-q*gemmNR)
				ar.Mask = 1<<16 - 1
				if cols < w*gemmNR {
					ar.Mask = 1<<(cols-(w-1)*gemmNR) - 1
				}
				switch {
				case pk != nil:
					ar.B, ar.LDB, ar.BOff = pk.panel(q, pc), gemmNR, gemmNR*k
				case directB && qq < nfull:
					ar.B, ar.LDB, ar.BOff = &mb.b[pc*mb.brs+q*gemmNR], mb.brs, gemmNR
				case directB:
					ar.B, ar.LDB, ar.BOff = &bblk[0], gemmNR, gemmNR*kb
				default:
					ar.B, ar.LDB, ar.BOff = &bblk[qq*gemmNR*kb], gemmNR, gemmNR*kb
				}
				// The epilogue's operand for this column (a column bias
				// is the same for every row).
				var colR *float32
				if epInStore && j.ep.r != nil && j.ep.col {
					_ = j.ep.r[q*gemmNR+cols-1]
					colR = &j.ep.r[q*gemmNR]
				}
				for i := g0; i < g1; i += mr {
					rows := min(mr, g1-i)
					off := i*ldc + q*gemmNR
					_ = a[(i+rows-1)*lda+pc+kb-1]
					_ = j.c[off+(rows-1)*ldc+cols-1]
					ar.A, ar.C = &a[i*lda+pc], &j.c[off]
					ar.Bias, ar.R, ar.R2, ar.Clamp = nil, nil, nil, false
					if last {
						_ = j.bias[i+rows-1]
						ar.Bias = &j.bias[i]
					}
					if epInStore {
						switch {
						case colR != nil:
							ar.R, ar.LDR = colR, 0
						case j.ep.r != nil:
							_ = j.ep.r[off+(rows-1)*ldc+cols-1]
							ar.R, ar.LDR = &j.ep.r[off], ldc
						}
						if j.ep.r2 != nil {
							_ = j.ep.r2[off+(rows-1)*ldc+cols-1]
							ar.R2, ar.LDR2 = &j.ep.r2[off], ldc
						}
						ar.Lo, ar.Hi, ar.Clamp = j.ep.lo, j.ep.hi, true
					}
					// The first column panel's tiles prefetch the next row
					// group's A rows (contiguous when one k block spans
					// all of k), which would otherwise come from memory
					// on that group's first pass.
					ar.PF = nil
					if !j.f.noPF && qq == 0 && kb == lda && i+mc0+mr <= i1 {
						ar.PF = &a[(i+mc0)*lda]
					}
					if w == 2 {
						amd64.GemmZ32(rows, &ar)
					} else {
						amd64.GemmZ16(rows, &ar)
					}
					if epil && !epInStore {
						// The residual shares C's memory: the epilogue
						// in a pass over the finished tile.
						ep := j.ep.tile(off, q*gemmNR)
						ep.block(j.c[off:], ldc, rows, cols)
					}
				}
				qq += w
			}
			if epil && j.ep.act != nil {
				// The activation over this row group's part of the
				// column block, now final (as in unit).
				j.ep.activate(j.c[g0*ldc+j0:], ldc, g1-g0, ncols)
			}
		}
	}
}
