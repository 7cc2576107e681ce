package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// Two-dimensional float32 MaxPool without indices, separably, with
// exactly maxPoolInto's bits. maxPoolInto's rule: best starts at the
// window's first tap inside the input and a later tap replaces it only when
// v > best. So the result is that first tap when it is a NaN (nothing
// replaces a NaN), and otherwise the first largest non-NaN tap in
// row-major order (which decides the sign of a zero maximum); a window
// with no tap inside the input gives -inf. Here:
//
//  1. each input row is reduced across the kernel's columns from -inf
//     with "if v > best": hm[iy][ox], the first largest non-NaN tap of the
//     row in window column ox (-inf when there is none);
//  2. each output folds its window's rows of hm in order with the same
//     rule (rows are visited top to bottom, so the first largest of the
//     whole window in row-major order wins);
//  3. where the window's first tap is a NaN, the output is that NaN.
//
// The vector twins (amd64.MaxRowS1, MaxRowS2, MaxInto) run VMAXPS with the
// running best as second source: v > best ? v : best, lane by lane, the
// portable comparison exactly; NaNFirstS1/S2 are step 3's blend.

// maxPool2DOK reports whether g has the 2-D, undilated shape that
// maxPool2D handles, with a column stride no wider than the padded row: the
// padded row copy spans (OW rounded up to 8 - 1) strides, so a stride of
// 2^31 would claim 60 GB for a 4x4 input (issue 20); such a pool runs the
// allocation-free maxPoolInto, with the same bits.
//
// A 1-D pool (a Conv1d network's) is run as one row of a 2-D pool (its
// geom's row view): one row's windows have the same taps in the same order.
func maxPool2DOK(g *geom) bool {
	if len(g.in) == 1 && g.row != nil {
		g = g.row
	}
	return len(g.in) == 2 && g.dil[0] == 1 && g.dil[1] == 1 &&
		g.stride[1] <= g.in[1]+g.padB[1]+g.padE[1]+g.k[1]
}

type maxPoolJob struct {
	g    *geom
	x, y []float32
	fast bool // the vector row kernels
}

var maxPoolJobs = sync.Pool{New: func() any { return new(maxPoolJob) }}

// maxPool2D computes the float32 MaxPool of NC planes into y.
func maxPool2D(pool machine, g *geom, NC int, x, y []float32) {
	maxPool2DTab(pool, g, nil, NC, x, y)
}

// maxPool2DTab is maxPool2D with g's maxFlat layout, if it was built
// (maxFlatTabFor; nil: built here where maxFlat runs).
func maxPool2DTab(pool machine, g *geom, t *maxFlatTab, NC int, x, y []float32) {
	if len(g.in) == 1 {
		g = g.row
	}
	if maxFlatOK(pool, g) {
		if t == nil {
			t = newMaxFlatTab(g)
		}
		maxFlat(pool, t, NC, x, y)
		return
	}
	if maxPoolS1OK(pool.fast, g) {
		maxPoolS1(pool, g, NC, x, y)
		return
	}
	j := maxPoolJobs.Get().(*maxPoolJob)
	*j = maxPoolJob{g: g, x: x, y: y, fast: pool.fast}
	pool.Run(NC, NC*prod(g.in)*(g.k[0]+g.k[1]), j)
	*j = maxPoolJob{}
	maxPoolJobs.Put(j)
}

func (j *maxPoolJob) Run(lo, hi int) {
	g := j.g
	if a, n, ok := maxPoolK3S2OK(j.fast, g); ok {
		for c := lo; c < hi; c++ {
			maxPoolK3S2Plane(g, a, n, j.x[c*prod(g.in):(c+1)*prod(g.in)], j.y[c*prod(g.out):(c+1)*prod(g.out)])
		}
		return
	}
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	kw, sw, pl := g.k[1], g.stride[1], g.padB[1]
	// Rows are reduced on a copy padded with -inf (which never replaces
	// best) to whole vectors: OWr windows, Wp floats.
	OWr := (OW + 7) &^ 7
	Wp := max(pl+W, (OWr-1)*sw+kw, 2*OWr+kw)
	hbuf, rbuf := getF32(H*OWr), getF32(Wp)
	hm, row := *hbuf, *rbuf
	inf := float32(math.Inf(-1))
	for i := range row {
		row[i] = inf
	}
	for c := lo; c < hi; c++ {
		xc := j.x[c*H*W : (c+1)*H*W]
		for iy := 0; iy < H; iy++ {
			copy(row[pl:pl+W], xc[iy*W:(iy+1)*W])
			maxRow(j.fast, row, kw, sw, hm[iy*OWr:(iy+1)*OWr])
		}
		yc := j.y[c*OH*OW : (c+1)*OH*OW]
		for oy := 0; oy < OH; oy++ {
			yr := yc[oy*OW : (oy+1)*OW]
			first := true
			for ky := 0; ky < g.k[0]; ky++ {
				iy := oy*g.stride[0] + ky - g.padB[0]
				if iy < 0 || iy >= H {
					continue
				}
				src := hm[iy*OWr : iy*OWr+OW]
				if first {
					copy(yr, src)
					first = false
					continue
				}
				maxInto(j.fast, yr, src)
			}
			if first {
				for i := range yr {
					yr[i] = inf
				}
				continue
			}
			iy0 := max(oy*g.stride[0]-g.padB[0], 0)
			nanFirst(j.fast, g, xc[iy0*W:(iy0+1)*W], yr)
		}
	}
	putF32(hbuf)
	putF32(rbuf)
}

// maxRow reduces the padded row xp across kw columns at stride sw: h[ox]
// is the first largest non-NaN of xp[ox*sw .. ox*sw+kw-1] (from -inf, with
// "if v > best"). len(h) is a multiple of 8 and xp is long enough for the
// vector kernels' reads.
func maxRow(fast bool, xp []float32, kw, sw int, h []float32) {
	if fast && (sw == 1 || sw == 2) {
		if sw == 1 {
			amd64.MaxRowS1(&xp[0], kw, &h[0], len(h))
		} else {
			amd64.MaxRowS2(&xp[0], kw, &h[0], len(h))
		}
		return
	}
	for ox := range h {
		best := float32(math.Inf(-1))
		for _, v := range xp[ox*sw : ox*sw+kw] {
			if v > best {
				best = v
			}
		}
		h[ox] = best
	}
}

// maxInto sets d[i] = s[i] when s[i] > d[i].
func maxInto(fast bool, d, s []float32) {
	s = s[:len(d)]
	i := 0
	if fast {
		if n := len(d) &^ 7; n > 0 {
			amd64.MaxInto(&d[0], &s[0], n)
			i = n
		}
	}
	for ; i < len(d); i++ {
		if s[i] > d[i] {
			d[i] = s[i]
		}
	}
}

// nanFirst sets y[ox] to the first tap of window column ox in row xr (the
// window's first tap) where that tap is a NaN.
func nanFirst(fast bool, g *geom, xr, y []float32) {
	W, OW, sw, pl := len(xr), len(y), g.stride[1], g.padB[1]
	// Columns whose first tap is ox*sw-pl >= 0 and inside the row: [lo, hi).
	lo := min((pl+sw-1)/sw, OW)
	hi := max(lo, min(OW, (W-1+pl)/sw+1))
	for ox := 0; ox < lo; ox++ {
		// The first tap inside the row is column 0, if the window reaches it.
		if ox*sw-pl+g.k[1] > 0 && W > 0 {
			if v := xr[0]; v != v {
				y[ox] = v
			}
		}
	}
	ox := lo
	if fast && (sw == 1 || sw == 2) {
		n := (hi - lo) &^ 7
		// NaNFirstS2 reads 2n floats from the first tap.
		for sw == 2 && n > 0 && lo*sw-pl+2*n > W {
			n -= 8
		}
		if n > 0 {
			if sw == 1 {
				amd64.NaNFirstS1(&xr[lo-pl], &y[lo], n)
			} else {
				amd64.NaNFirstS2(&xr[lo*2-pl], &y[lo], n)
			}
			ox += n
		}
	}
	for ; ox < hi; ox++ {
		if v := xr[ox*sw-pl]; v != v {
			y[ox] = v
		}
	}
}

// maxPoolK3S2OK reports whether g's windows are 3 columns wide at column
// stride 2 with a left pad of 0 or 1, so that amd64.MaxPoolK3S2 computes
// the outputs [a, a+n) of each row, whose taps all lie inside the row, n
// >= 8 of them (and, with a left pad of 1, output 0 too).
func maxPoolK3S2OK(fast bool, g *geom) (a, n int, ok bool) {
	W, OW, pl := g.in[1], g.out[1], g.padB[1]
	if !fast || g.k[1] != 3 || g.stride[1] != 2 || pl > 1 || W+pl < 3 {
		return 0, 0, false
	}
	// Output ox reads columns 2ox-pl .. 2ox-pl+2.
	a = pl
	b := min(OW, (W-3+pl)/2+1)
	return a, b - a, b-a >= 8
}

// maxPoolK3S2Plane is maxPoolJob's plane for maxPoolK3S2OK's geometry:
// the window rows of each output row are found here, the outputs [a,
// a+n) (and output 0 when a is 1) computed by amd64.MaxPoolK3S2, any
// outputs past them by maxWindow. The rule and so the bits are
// maxPoolInto's.
func maxPoolK3S2Plane(g *geom, a, n int, xc, yc []float32) {
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	kh, sh, pt, pl := g.k[0], g.stride[0], g.padB[0], g.padB[1]
	for oy := 0; oy < OH; oy++ {
		yr := yc[oy*OW : (oy+1)*OW]
		iy0, iy1 := max(oy*sh-pt, 0), min(oy*sh-pt+kh, H)
		if iy1 <= iy0 {
			for i := range yr {
				yr[i] = float32(math.Inf(-1))
			}
			continue
		}
		// the last tap read: row iy1-1, column 2(a+n-1)-pl+2
		_ = xc[(iy1-1)*W+2*(a+n-1)-pl+2]
		amd64.MaxPoolK3S2(&xc[iy0*W+2*a-pl], W, iy1-iy0, &yr[a], n, a)
		for ox := a + n; ox < OW; ox++ {
			yr[ox] = maxWindow(xc, W, iy0, iy1, ox*2-pl, ox*2-pl+3)
		}
	}
}

// maxWindow is maxPoolInto's rule over rows [iy0, iy1) and columns
// [ix0, ix1) of the plane xc (W columns), the columns clipped to the row:
// the first tap, replaced by each later one that is larger; -inf when no
// column is inside.
func maxWindow(xc []float32, W, iy0, iy1, ix0, ix1 int) float32 {
	ix0, ix1 = max(ix0, 0), min(ix1, W)
	if ix1 <= ix0 {
		return float32(math.Inf(-1))
	}
	best := xc[iy0*W+ix0]
	for iy := iy0; iy < iy1; iy++ {
		for _, v := range xc[iy*W+ix0 : iy*W+ix1] {
			if v > best {
				best = v
			}
		}
	}
	return best
}
