package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// A float32 MaxPool of unit strides (GoogLeNet's and Inception's 3x3,
// pads 1 branch pools) runs maxPool2D's three steps over whole planes
// instead of row by row (whose per-row calls dominated small planes:
// 256x28x28 took 400 µs): the plane is copied once into a buffer padded
// with -inf, of row stride wp; step 1 folds each flat position with the
// kw columns after it (maxInto from -inf, column order), step 2 folds the
// kh rows below (row order), so acc[oy*wp+ox] is the first largest
// non-NaN tap of the window in row-major order (padding's -inf never
// replaces; a window with no tap inside the input stays -inf), exactly
// step 1-2's hm and fold; step 3 sets the outputs whose window's first tap
// is a NaN to it: for outputs past the leading pads that tap is at the
// same flat position of the padded plane, one pass; the outputs in the
// leading pads' rows and columns are checked one by one. The vector
// twins are maxPool2D's (MaxInto, NaNFirstS1); its row kernels, on the
// portable level, are this path's twin.

// maxPoolS1OK reports whether maxPool2D runs g as maxPoolS1 on a fast
// machine: two dimensions (maxPool2D passes the row view of one), unit
// strides, no dilation, and padded planes not much larger than the input
// and output ones.
func maxPoolS1OK(fast bool, g *geom) bool {
	if !fast || len(g.in) != 2 || g.stride[0] != 1 || g.stride[1] != 1 || g.dil[0] != 1 || g.dil[1] != 1 || g.out[0] < 1 || g.out[1] < 1 {
		return false
	}
	hp, wp := g.padded()
	return hp*wp <= 4*(prod(g.in)+prod(g.out))+64
}

// maxPoolS1 is maxPool2D for maxPoolS1OK(true, g).
func maxPoolS1(pool machine, g *geom, NC int, x, y []float32) {
	j := maxPoolS1Jobs.Get().(*maxPoolS1Job)
	*j = maxPoolS1Job{g: g, x: x, y: y}
	pool.Run(NC, NC*prod(g.in)*(g.k[0]+g.k[1]), j)
	*j = maxPoolS1Job{}
	maxPoolS1Jobs.Put(j)
}

type maxPoolS1Job struct {
	g    *geom
	x, y []float32
}

var maxPoolS1Jobs = sync.Pool{New: func() any { return new(maxPoolS1Job) }}

func (j *maxPoolS1Job) Run(lo, hi int) {
	g := j.g
	H, W, OH, OW, kh, kw, pt, pl := g.in[0], g.in[1], g.out[0], g.out[1], g.k[0], g.k[1], g.padB[0], g.padB[1]
	hp, wp := g.padded()
	// hm covers every padded row: Lh positions (a row's last kw-1 are
	// read past by nothing that is kept); acc the outputs' L.
	Lh, L := (hp-1)*wp+wp-kw+1, (OH-1)*wp+OW
	pbuf, hbuf, abuf := getF32(hp*wp), getF32(Lh), getF32(L)
	xp, hm, acc := (*pbuf)[:hp*wp], (*hbuf)[:Lh], (*abuf)[:L]
	fillInf(xp)
	for c := lo; c < hi; c++ {
		xc, yc := j.x[c*H*W:(c+1)*H*W], j.y[c*OH*OW:(c+1)*OH*OW]
		intoPadded(xp, xc, g, wp)
		fillInf(hm)
		for kx := 0; kx < kw; kx++ {
			maxInto(true, hm, xp[kx:kx+Lh])
		}
		// hm holds no NaN (a fold from -inf with > never takes one), so
		// folding its first row into -inf is copying it.
		copy(acc, hm[:L])
		for ky := 1; ky < kh; ky++ {
			maxInto(true, acc, hm[ky*wp:ky*wp+L])
		}
		// Step 3 past the leading pads: the first tap of output (oy, ox)
		// is padded position (oy, ox); padding there is -inf, never a NaN.
		o := pt*wp + pl
		if o < L {
			nanFirstFlat(xp[o:o+L-o], acc[o:])
		}
		for oy := 0; oy < OH; oy++ {
			yr := yc[oy*OW : (oy+1)*OW]
			copy(yr, acc[oy*wp:oy*wp+OW])
			// The leading pads: the window's first tap inside the input,
			// if it has one.
			iy0, iy1 := max(oy-pt, 0), min(oy-pt+kh, H)
			if iy0 >= iy1 {
				continue
			}
			for ox := 0; ox < OW; ox++ {
				if oy >= pt && ox >= pl {
					break
				}
				ix0, ix1 := max(ox-pl, 0), min(ox-pl+kw, W)
				if ix0 < ix1 {
					if v := xc[iy0*W+ix0]; v != v {
						yr[ox] = v
					}
				}
			}
		}
	}
	putF32(pbuf)
	putF32(hbuf)
	putF32(abuf)
}

// fillInf sets d to -inf, by doubling copies.
func fillInf(d []float32) {
	if len(d) == 0 {
		return
	}
	d[0] = float32(math.Inf(-1))
	for k := 1; k < len(d); k *= 2 {
		copy(d[k:], d[:k])
	}
}

// nanFirstFlat sets y[i] = x[i] where x[i] is a NaN (NaNFirstS1, then the
// tail).
func nanFirstFlat(x, y []float32) {
	y = y[:len(x)]
	n := len(x) &^ 7
	if n > 0 {
		amd64.NaNFirstS1(&x[0], &y[0], n)
	}
	for i := n; i < len(x); i++ {
		if v := x[i]; v != v {
			y[i] = v
		}
	}
}
