package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel/vmath"
)

// A float32 AveragePool of unit strides (Inception's 3x3, pads 1 pools,
// and their Pad folded in by compile's fold-pad-pool) runs a whole plane
// per tap: the plane is copied once into a zero-padded buffer of row
// stride wp, and each output's sum acc[oy*wp+ox] gets its taps added in
// the window's row-major order, one vmath.Add32s over the flat buffer per
// tap (acc + x, acc first). A window's taps in the padding add +0, which
// changes nothing: the sum starts from +0 and a sum from +0 is never -0,
// so these are sumPoolF32's additions of the in-input taps, in its order.
// Each output is then divided by its window's count (inside the input, or
// inside the padded input for count_include_pad), which is separable: the
// rows' count times the columns'. Per level the Vec's vector and scalar
// additions and divisions give the same bits, NaNs included (Add32's
// rule); plain Go's sum in sumPoolF32 may keep the other NaN's payload
// where two NaNs meet, which the contract leaves free.

// avgPoolS1OK reports whether g is an AveragePool geometry avgPoolS1 runs:
// two spatial dimensions (or one, as its row view), unit strides and
// dilations, and padded planes not much larger than the input and output
// planes (pads far larger than the window run sumPoolF32).
func avgPoolS1OK(g *geom) bool {
	if len(g.in) == 1 && g.row != nil {
		g = g.row
	}
	if len(g.in) != 2 || g.stride[0] != 1 || g.stride[1] != 1 || g.dil[0] != 1 || g.dil[1] != 1 || g.out[0] < 1 || g.out[1] < 1 {
		return false
	}
	hp, wp := g.padded()
	return hp*wp <= 4*(prod(g.in)+prod(g.out))+64
}

// avgPoolS1 computes the float32 AveragePool of NC planes of x into y
// (avgPoolS1OK(g) must hold).
func avgPoolS1(pool machine, g *geom, NC int, x, y []float32, inclPad bool) {
	if len(g.in) == 1 {
		g = g.row
	}
	j := avgPoolJobs.Get().(*avgPoolJob)
	*j = avgPoolJob{g: g, x: x, y: y, vec: pool.vec, inclPad: inclPad}
	pool.Run(NC, NC*prod(g.out)*prod(g.k), j)
	*j = avgPoolJob{}
	avgPoolJobs.Put(j)
}

type avgPoolJob struct {
	g       *geom
	x, y    []float32
	vec     vmath.Vec
	inclPad bool
}

var avgPoolJobs = sync.Pool{New: func() any { return new(avgPoolJob) }}

// winCount returns how many of the k taps o+t-pb (t < k) of an output o lie
// in [0, n), or in [-pb, n+pe) with incl.
func winCount(o, k, n, pb, pe int, incl bool) int {
	lo, hi := 0, n
	if incl {
		lo, hi = -pb, n+pe
	}
	return max(0, min(o-pb+k, hi)-max(o-pb, lo))
}

func (j *avgPoolJob) Run(lo, hi int) {
	g, v := j.g, j.vec
	H, W, OH, OW, kh, kw, pt, pl := g.in[0], g.in[1], g.out[0], g.out[1], g.k[0], g.k[1], g.padB[0], g.padB[1]
	hp, wp := g.padded()
	L := (OH-1)*wp + OW
	pbuf, abuf := getF32(hp*wp), getF32(L)
	xp, acc := (*pbuf)[:hp*wp], (*abuf)[:L]
	clear(xp)
	// Column runs of equal count: [ox0, ox1) with count c.
	type run struct{ ox0, ox1, c int }
	var runBuf [8]run
	runs := runBuf[:0]
	for ox := 0; ox < OW; {
		c := winCount(ox, kw, W, pl, g.padE[1], j.inclPad)
		e := ox + 1
		for e < OW && winCount(e, kw, W, pl, g.padE[1], j.inclPad) == c {
			e++
		}
		runs = append(runs, run{ox, e, c})
		ox = e
	}
	for c := lo; c < hi; c++ {
		xc, yc := j.x[c*H*W:(c+1)*H*W], j.y[c*OH*OW:(c+1)*OH*OW]
		intoPadded(xp, xc, g, wp)
		clear(acc)
		for ky := 0; ky < kh; ky++ {
			for kx := 0; kx < kw; kx++ {
				o := ky*wp + kx
				v.Add32s(acc, acc, xp[o:o+L])
			}
		}
		for oy := 0; oy < OH; oy++ {
			r := winCount(oy, kh, H, pt, g.padE[0], j.inclPad)
			for _, ru := range runs {
				v.DivScalar32s(yc[oy*OW+ru.ox0:oy*OW+ru.ox1], acc[oy*wp+ru.ox0:oy*wp+ru.ox1], float32(r*ru.c))
			}
		}
	}
	putF32(pbuf)
	putF32(abuf)
}

// intoPadded copies the plane xc (g.in) into the padded plane xp of row
// stride wp, after g.padB's rows and columns; the padding is left as it is.
func intoPadded(xp, xc []float32, g *geom, wp int) {
	H, W, pt, pl := g.in[0], g.in[1], g.padB[0], g.padB[1]
	for iy := 0; iy < H; iy++ {
		copy(xp[(pt+iy)*wp+pl:(pt+iy)*wp+pl+W], xc[iy*W:(iy+1)*W])
	}
}
