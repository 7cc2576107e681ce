package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// dwAny is the AVX-512 twin of depthwiseInto for any 1-D or 2-D depthwise
// convolution (group == C == M): any kernel size, stride, dilation and
// padding. depthwiseInto walks the taps of every output with index
// arithmetic, one scalar FMA at a time (a 5x5 layer of EfficientNet took
// 20-40 ms); here each channel plane is first copied into zero-padded
// phase planes, one per (row, column) residue of the stride, so that the
// input of tap (ky, kx) for every output (oy, ox) is the element at
//
//	phase(ky·dh mod sh, kx·dw mod sw) + (oy + ky·dh div sh)·Wq + (ox + kx·dw div sw)
//
// and the outputs, taken as one flat run q = oy·Wq + ox (the columns
// ox ≥ OW are computed and dropped), read every tap as one contiguous
// vector load at a fixed offset: amd64.DwTapsZ. Each output is the chain
// over the taps in row-major order from +0, padding taps included as
// FMA(0, w, acc), then canon: depthwiseInto's chain, so the bits are the
// same. Then, on each plane as it is copied out (still in cache), the
// bias (y = acc + B[c], addBias's addition) and the epilogue ep (the
// residual, the clamp, the activation: ep.all's operations, elementwise,
// so applying them plane by plane changes nothing).
//
// The layout is built once per setup (groupTapsGeom's, which a depthwise
// convolution, one input channel a group, shares) and the call runs a
// pooled job, so that a bound plan's calls allocate nothing.
func dwAny(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	t := s.groupTapsGeom()
	j := dwAnyJobs.Get().(*dwAnyJob)
	*j = dwAnyJob{s: s, d: t.d, x: x, w: w, bias: bias, y: y, ep: ep, z: pool.z}
	pool.Run(s.N*s.C, s.N*s.C*t.P*len(t.d.offs), j)
	*j = dwAnyJob{}
	dwAnyJobs.Put(j)
}

// dwAnyJob is one dwAny call: units (image, channel) planes.
type dwAnyJob struct {
	s             *convSetup
	d             *dwAnyGeom
	x, w, bias, y []float32
	ep            epi
	z             bool // AVX-512 (DwTapsZ, DwStoreZ); else AVX2 (DwTapsA, DwStoreA)
}

var dwAnyJobs = sync.Pool{New: func() any { return new(dwAnyJob) }}

func (j *dwAnyJob) Run(lo, hi int) {
	s, d := j.s, j.d
	P, inSz, kn := d.OH*d.OW, d.H*d.W, len(d.offs)
	buf := getF32(d.bufLen)
	out := getF32(d.n16)
	clear((*buf)[:d.bufLen]) // the padding stays zero: only input elements are written
	// The clamp goes into the store unless a residual comes first.
	blo, bhi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		blo, bhi = j.ep.lo, j.ep.hi
	}
	for nc := lo; nc < hi; nc++ {
		c := nc % s.C
		d.fill(*buf, j.x[nc*inSz:(nc+1)*inSz], j.z)
		if j.z {
			amd64.DwTapsZ(d.n16, kn, &d.offs[0], &j.w[c*kn], &(*buf)[0], &(*out)[0])
		} else {
			amd64.DwTapsA(d.n16, kn, &d.offs[0], &j.w[c*kn], &(*buf)[0], &(*out)[0])
		}
		yc := j.y[nc*P : (nc+1)*P]
		bv := negZero // y = acc + -0 is acc, bit for bit
		if j.bias != nil {
			bv = j.bias[c]
		}
		_ = (*out)[(d.OH-1)*d.Wq+d.OW-1]
		if j.z {
			amd64.DwStoreZ(&(*out)[0], d.Wq, &yc[0], d.OW, d.OH, d.OW, bv, blo, bhi)
		} else {
			amd64.DwStoreA(&(*out)[0], d.Wq, &yc[0], d.OW, d.OH, d.OW, bv, blo, bhi)
		}
		if late {
			e := j.ep.at(nc * P)
			e.block(yc, P, 1, P)
		}
		j.ep.activate(yc, P, 1, P)
	}
	putF32(out)
	putF32(buf)
}

// dwAnyOK reports whether dwAny runs the depthwise convolution s here.
func dwAnyOK(pool machine, s *convSetup) bool {
	nd := len(s.g.in)
	return (pool.z || pool.fast) && s.Cg == 1 && s.Mg == 1 && (nd == 1 || nd == 2) && prod(s.g.out) > 0 && prod(s.g.k) > 0
}

// dwAnyGeom is dwAny's layout of one plane (1-D as one row).
type dwAnyGeom struct {
	H, W, OH, OW   int
	sh, sw, pt, pl int
	Hq, Wq, plane  int     // phase plane rows, columns, size
	offs           []int32 // per tap, row-major
	n16            int     // outputs computed: OH·Wq rounded up to 16
	bufLen         int
	// rows[iy] is input row iy's row phase plane offset and row in it
	// (for the rows some output reads; the rest, at the end, are left out);
	// colIx[q] and colB[q] the first input column of column phase q and
	// its column there: fill's tables, so that it divides nothing.
	rows        []dwRow
	colIx, colB []int
	// groups are rows's rows by row phase: input rows iy0, iy0+sh, ...
	// (n of them) at rows a0, a0+1, ... of the phase planes at base
	// (fillS2 splits each group's rows in one call).
	groups []dwRowGroup
}

// dwRowGroup is a run of input rows that fill consecutive rows of one row
// phase.
type dwRowGroup struct{ iy0, n, base, a0 int }

// dwRow is an input row's place in dwAny's phase planes.
type dwRow struct{ base, a int }

func newDwAnyGeom(g *geom) *dwAnyGeom {
	// Dimensions as 2-D: a 1-D convolution is one row.
	at := func(v []int, i, def int) int {
		if len(v) == 1 {
			if i == 0 {
				return def
			}
			return v[0]
		}
		return v[i]
	}
	d := &dwAnyGeom{
		H: at(g.in, 0, 1), W: at(g.in, 1, 1), OH: at(g.out, 0, 1), OW: at(g.out, 1, 1),
		sh: at(g.stride, 0, 1), sw: at(g.stride, 1, 1), pt: at(g.padB, 0, 0), pl: at(g.padB, 1, 0),
	}
	KH, KW, dh, dw := at(g.k, 0, 1), at(g.k, 1, 1), at(g.dil, 0, 1), at(g.dil, 1, 1)
	// The padded extent the outputs read, in phase-plane units.
	Hp := (d.OH-1)*d.sh + (KH-1)*dh + 1
	Wp := (d.OW-1)*d.sw + (KW-1)*dw + 1
	d.Hq, d.Wq = (Hp+d.sh-1)/d.sh, (Wp+d.sw-1)/d.sw
	d.plane = d.Hq * d.Wq
	maxOff := 0
	for ky := 0; ky < KH; ky++ {
		for kx := 0; kx < KW; kx++ {
			r, c := ky*dh, kx*dw
			off := ((r%d.sh)*d.sw+c%d.sw)*d.plane + (r/d.sh)*d.Wq + c/d.sw
			d.offs = append(d.offs, int32(off))
			maxOff = max(maxOff, off)
		}
	}
	d.n16 = (d.OH*d.Wq + 15) &^ 15
	d.bufLen = max(d.sh*d.sw*d.plane, maxOff+d.n16)
	for iy := 0; iy < d.H; iy++ {
		pr := iy + d.pt
		if pr/d.sh >= d.Hq {
			break
		}
		d.rows = append(d.rows, dwRow{base: (pr % d.sh) * d.sw * d.plane, a: pr / d.sh})
	}
	for iy, r := range d.rows {
		found := false
		for k := range d.groups { // at most sh groups
			if gr := &d.groups[k]; gr.base == r.base && gr.iy0+gr.n*d.sh == iy && gr.a0+gr.n == r.a {
				gr.n++
				found = true
				break
			}
		}
		if !found {
			d.groups = append(d.groups, dwRowGroup{iy0: iy, n: 1, base: r.base, a0: r.a})
		}
	}
	for q := 0; q < d.sw; q++ {
		ix := ((q-d.pl)%d.sw + d.sw) % d.sw // the first with (ix+pl) mod sw = q
		d.colIx, d.colB = append(d.colIx, ix), append(d.colB, (ix+d.pl)/d.sw)
	}
	return d
}

// fill writes plane xc (H x W) into its phase planes in buf; the padding
// and the input elements that no output reads are left as they are (zero).
// Input column ix goes to column phase (ix+pl) mod sw at (ix+pl) div sw:
// each phase's columns are a strided copy.
func (d *dwAnyGeom) fill(buf, xc []float32, z bool) {
	W, Wq, sw := d.W, d.Wq, d.sw
	switch {
	case sw == 2:
		for _, gr := range d.groups {
			d.fillS2(buf, xc, gr, z)
		}
		return
	case sw == 1:
		// Each row phase's rows in one call (AVX2: CopyRowsA).
		n := min(W, Wq-d.pl)
		if n <= 0 {
			return
		}
		for _, gr := range d.groups {
			src := xc[gr.iy0*W : (gr.iy0+(gr.n-1)*d.sh)*W+n]
			o := gr.base + gr.a0*Wq + d.pl
			dst := buf[o : o+(gr.n-1)*Wq+n]
			if z {
				amd64.CopyRowsZ(&src[0], n, gr.n, d.sh*W, &dst[0], Wq)
			} else {
				amd64.CopyRowsA(&src[0], n, gr.n, d.sh*W, &dst[0], Wq)
			}
		}
		return
	}
	for iy, r := range d.rows {
		src := xc[iy*W : (iy+1)*W]
		// One column phase at a time: a strided copy each.
		for q := 0; q < sw; q++ {
			ix, b := d.colIx[q], d.colB[q]
			if b >= Wq {
				continue
			}
			o := r.base + q*d.plane + r.a*Wq
			dst := buf[o+b : o+Wq]
			for i := range dst {
				if ix >= W {
					break
				}
				dst[i] = src[ix]
				ix += sw
			}
		}
	}
}

// fillS2 writes a group of input rows (one row phase's) into the two
// column phases of stride 2 through amd64.Deint2Z (z) or Deint2A, in one
// call: the even
// columns to phase pl mod 2 from column pl div 2 of each row, the odd ones
// to the other phase from (pl+1) div 2, as many as fit a row of Wq.
func (d *dwAnyGeom) fillS2(buf, xc []float32, gr dwRowGroup, z bool) {
	pe, be := d.pl%2, d.pl/2
	po, bo := 1-pe, (d.pl+1)/2
	ne := max(0, min((d.W+1)/2, d.Wq-be))
	no := max(0, min(d.W/2, d.Wq-bo))
	if (ne == 0 && no == 0) || gr.n == 0 {
		return
	}
	ld := d.sh * d.W // input rows of one row phase are sh rows apart
	src := xc[gr.iy0*d.W : (gr.iy0+(gr.n-1)*d.sh+1)*d.W]
	row := gr.base + gr.a0*d.Wq
	last := (gr.n - 1) * d.Wq // the group's last row, from its first
	ev, od := &buf[row], &buf[row]
	if ne > 0 {
		de := buf[row+pe*d.plane+be : row+pe*d.plane+be+last+ne]
		ev = &de[0]
	}
	if no > 0 {
		do := buf[row+po*d.plane+bo : row+po*d.plane+bo+last+no]
		od = &do[0]
	}
	if z {
		amd64.Deint2Z(&src[0], d.W, gr.n, ld, ev, ne, od, no, d.Wq, &amd64.Deint2Idx)
	} else {
		amd64.Deint2A(&src[0], d.W, gr.n, ld, ev, ne, od, no, d.Wq)
	}
}
