package nn

import (
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
	*j = dwAnyJob{s: s, d: t.d, x: x, w: w, bias: bias, y: y, ep: ep}
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
}

var dwAnyJobs = sync.Pool{New: func() any { return new(dwAnyJob) }}

func (j *dwAnyJob) Run(lo, hi int) {
	s, d := j.s, j.d
	P, inSz, kn := d.OH*d.OW, d.H*d.W, len(d.offs)
	buf := getF32(d.bufLen)
	out := getF32(d.n16)
	clear((*buf)[:d.bufLen]) // the padding stays zero: only input elements are written
	for nc := lo; nc < hi; nc++ {
		c := nc % s.C
		d.fill(*buf, j.x[nc*inSz:(nc+1)*inSz])
		amd64.DwTapsZ(d.n16, kn, &d.offs[0], &j.w[c*kn], &(*buf)[0], &(*out)[0])
		yc := j.y[nc*P : (nc+1)*P]
		for oy := 0; oy < d.OH; oy++ {
			copy(yc[oy*d.OW:(oy+1)*d.OW], (*out)[oy*d.Wq:])
		}
		if j.bias != nil {
			bv := j.bias[c]
			for i := range yc {
				yc[i] += bv
			}
		}
		if j.ep.on {
			e := j.ep.at(nc * P)
			e.block(yc, P, 1, P)
			e.activate(yc, P, 1, P)
		}
	}
	putF32(out)
	putF32(buf)
}

// dwAnyOK reports whether dwAny runs the depthwise convolution s here.
func dwAnyOK(pool machine, s *convSetup) bool {
	nd := len(s.g.in)
	return pool.z && s.Cg == 1 && s.Mg == 1 && (nd == 1 || nd == 2) && prod(s.g.out) > 0 && prod(s.g.k) > 0
}

// dwAnyGeom is dwAny's layout of one plane (1-D as one row).
type dwAnyGeom struct {
	H, W, OH, OW   int
	sh, sw, pt, pl int
	Hq, Wq, plane  int     // phase plane rows, columns, size
	offs           []int32 // per tap, row-major
	n16            int     // outputs computed: OH·Wq rounded up to 16
	bufLen         int
}

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
	return d
}

// fill writes plane xc (H x W) into its phase planes in buf; the padding
// and the input elements that no output reads are left as they are (zero).
func (d *dwAnyGeom) fill(buf, xc []float32) {
	for iy := 0; iy < d.H; iy++ {
		pr := iy + d.pt
		a := pr / d.sh
		if a >= d.Hq {
			break
		}
		rowBase := (pr % d.sh) * d.sw * d.plane
		src := xc[iy*d.W : (iy+1)*d.W]
		if d.sw == 1 {
			n := min(d.W, d.Wq-d.pl)
			copy(buf[rowBase+a*d.Wq+d.pl:], src[:max(n, 0)])
			continue
		}
		ix0 := 0
		if d.sw == 2 {
			ix0 = d.fillS2(buf[rowBase:], a, src)
		}
		for ix := ix0; ix < len(src); ix++ {
			v := src[ix]
			pc := ix + d.pl
			b := pc / d.sw
			if b >= d.Wq {
				break
			}
			buf[rowBase+(pc%d.sw)*d.plane+a*d.Wq+b] = v
		}
	}
}

// fillS2 writes the first columns of an input row into the two column
// phases of stride 2 with amd64.Even (even and odd columns, eight at a
// time), as fill's loop would, and returns how many columns it wrote
// (the loop does the rest). base is the row's phase-0 plane; phase 1 is
// d.plane after it.
func (d *dwAnyGeom) fillS2(base []float32, a int, src []float32) int {
	// Column ix goes to phase (ix+pl)%2 at b = (ix+pl)/2: the even columns
	// to phase pl%2 from b = pl/2, the odd ones to the other from (pl+1)/2.
	pe, be := d.pl%2, d.pl/2
	po, bo := 1-pe, (d.pl+1)/2
	n := min((len(src)-1)/2, d.Wq-be, d.Wq-bo) &^ 7 // Even reads src[2i] (and src[2i+1]) for i < n
	if n <= 0 {
		return 0
	}
	row := a * d.Wq
	de, do := base[pe*d.plane+row+be:], base[po*d.plane+row+bo:]
	_, _ = de[n-1], do[n-1]
	amd64.Even(&de[0], &src[0], n)
	amd64.Even(&do[0], &src[1], n)
	return 2 * n
}
