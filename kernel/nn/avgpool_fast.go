package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
)

// A float32 AveragePool of unit strides (Inception's 3x3, pads 1 pools,
// and their Pad folded in by compile's fold-pad-pool) runs a group of
// whole planes per tap: the planes are copied once into zero-padded
// buffers of row stride wp, one after the other, and each output's sum
// acc[oy*wp+ox] gets its taps added in the window's row-major order, one
// vmath.Add32s over the flat buffer per tap (acc + x, acc first). A window's taps in the padding add +0, which
// changes nothing: the sum starts from +0 and a sum from +0 is never -0,
// so these are sumPoolF32's additions of the in-input taps, in its order.
// Each output is then divided by its window's count (inside the input, or
// inside the padded input for count_include_pad), which is separable: the
// rows' count times the columns'. Per level the Vec's vector and scalar
// additions and divisions give the same bits, NaNs included (Add32's
// rule); plain Go's sum in sumPoolF32 may keep the other NaN's payload
// where two NaNs meet, which the contract leaves free. On AVX-512 and
// AVX2 all of a window's taps are added in one pass (amd64.SumTapsZ,
// SumTaps8: VADDPS with the sum its first source, Add32's rule), not one
// pass over the group per tap.

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

// avgPoolPlanes computes the float32 AveragePool of NC planes of x into y
// (avgPoolS1OK(g) or avgPoolSOK(g) must hold).
func avgPoolPlanes(pool machine, g *geom, NC int, x, y []float32, inclPad bool) {
	if len(g.in) == 1 {
		g = g.row
	}
	j := avgPoolJobs.Get().(*avgPoolJob)
	*j = avgPoolJob{g: g, x: x, y: y, vec: pool.vec, fast: pool.fast, z: pool.z, inclPad: inclPad}
	pool.Run(NC, NC*prod(g.out)*prod(g.k), j)
	*j = avgPoolJob{}
	avgPoolJobs.Put(j)
}

type avgPoolJob struct {
	g       *geom
	x, y    []float32
	vec     vmath.Vec
	fast    bool // amd64.SumTaps8 (stride 1), amd64.SumTapsS2 (stride 2)
	z       bool // amd64.SumTapsZ (stride 1)
	inclPad bool
}

var avgPoolJobs = sync.Pool{New: func() any { return new(avgPoolJob) }}

// winCount returns how many of the k taps o*s+t-pb (t < k) of an output o
// lie in [0, n), or in [-pb, n+pe) with incl.
func winCount(o, k, s, n, pb, pe int, incl bool) int {
	lo, hi := 0, n
	if incl {
		lo, hi = -pb, n+pe
	}
	return max(0, min(o*s-pb+k, hi)-max(o*s-pb, lo))
}

// avgPoolGroup is the most floats of padded planes avgPoolJob sums at
// once (64 KiB, in L2).
const avgPoolGroup = 16 << 10

func (j *avgPoolJob) Run(lo, hi int) {
	g, v := j.g, j.vec
	H, W, OH, OW, kh, kw, pt, pl := g.in[0], g.in[1], g.out[0], g.out[1], g.k[0], g.k[1], g.padB[0], g.padB[1]
	s := g.stride[1] // the row stride too, or one output row (avgPoolSOK)
	hp, wp := g.padded()
	// Planes are summed in groups of B, laid out one after the other, hwp
	// floats apart (a multiple of s): output (oy, ox) of plane b is sum
	// element b*hws + oy*wp + ox, and its tap at offset o (ky*wp + kx) is
	// padded element s*(b*hws + oy*wp + ox) + o. So a tap is one pass over
	// all B planes (small planes, 8x8 or 17x17, made a call per tap and
	// plane). Sums past OW in a row, or whose window would reach into the
	// next plane, are never read.
	hwp := (hp*wp + s - 1) / s * s
	hws := hwp / s
	B := max(1, min(hi-lo, avgPoolGroup/hwp))
	L := (B-1)*hws + (OH-1)*wp + OW
	// 16 floats of slack: SumTapsS2 reads one float past a tap.
	pbuf, abuf := getF32(B*hwp+16), getF32(L)
	xp, acc := (*pbuf)[:B*hwp+16], (*abuf)[:L]
	clear(xp)
	ch := func(oy int) int { return winCount(oy, kh, s, H, pt, g.padE[0], j.inclPad) }
	cw := func(ox int) int { return winCount(ox, kw, s, W, pl, g.padE[1], j.inclPad) }
	// Column runs of equal count: [ox0, ox1) with count c.
	type run struct{ ox0, ox1, c int }
	var runBuf [8]run
	runs := runBuf[:0]
	for ox := 0; ox < OW; {
		c := cw(ox)
		e := ox + 1
		for e < OW && cw(e) == c {
			e++
		}
		runs = append(runs, run{ox, e, c})
		ox = e
	}
	// uniform: every window has the same count (count_include_pad with
	// pads inside the window, Inception's pools; DenseNet's 2x2/2): one
	// division over the whole group, then the rows are copied out.
	uniform := len(runs) == 1
	for oy := 1; oy < OH && uniform; oy++ {
		uniform = ch(oy) == ch(0)
	}
	div := float32(ch(0) * runs[0].c)
	// The taps' offsets, in the window's order (more than 64: offs
	// allocates).
	var offBuf [64]int32
	offs := offBuf[:0]
	for ky := 0; ky < kh; ky++ {
		for kx := 0; kx < kw; kx++ {
			offs = append(offs, int32(ky*wp+kx))
		}
	}
	z := j.z && s == 1 && len(offs) <= len(offBuf)
	direct := pt == 0 && pl == 0 && hp == H && wp == W && hwp == H*W
	for c0 := lo; c0 < hi; c0 += B {
		nb := min(B, hi-c0)
		n := (nb-1)*hws + (OH-1)*wp + OW
		// Planes that need no padding are read in place, where 16
		// floats follow the group (the kernels' slack).
		src := xp
		if direct && (c0+nb)*H*W+16 <= len(j.x) {
			src = j.x[c0*H*W:]
		} else {
			for b := 0; b < nb; b++ {
				c := c0 + b
				intoPadded(xp[b*hwp:(b+1)*hwp], j.x[c*H*W:(c+1)*H*W], g, wp)
			}
		}
		a := acc[:n]
		switch {
		case j.fast && s == 2 && OW >= 8:
			// Row by row: only the sums that are read (the flat run
			// computes wp per row, about twice OW).
			for b := 0; b < nb; b++ {
				amd64.SumTapsS2R(OH, OW, len(offs), &offs[0], &src[b*hwp], 2*wp, &a[b*hws], wp)
			}
		case s == 1 && !z && !j.fast:
			clear(a)
			for _, o := range offs {
				v.Add32s(a, a, src[o:int(o)+n])
			}
		default:
			// All taps in one pass, 16 (SumTapsZ) or 8 (SumTaps8,
			// SumTapsS2) outputs at a time, then the tail: the same additions in
			// the same order.
			i := 0
			if z && n >= 16 {
				i = n &^ 15
				amd64.SumTapsZ(i, len(offs), &offs[0], &src[0], &a[0])
			} else if j.fast && s == 1 && n >= 8 {
				i = n &^ 7
				amd64.SumTaps8(i, len(offs), &offs[0], &src[0], &a[0])
			} else if j.fast && s == 2 && n >= 8 {
				i = n &^ 7
				amd64.SumTapsS2(i, len(offs), &offs[0], &src[0], &a[0])
			}
			for ; i < n; i++ {
				var sum float32
				for _, o := range offs {
					sum = vmath.Add32(sum, src[s*i+int(o)])
				}
				a[i] = sum
			}
		}
		if uniform {
			v.DivScalar32s(a, a, div)
		}
		for b := 0; b < nb; b++ {
			c := c0 + b
			ab, yc := a[b*hws:], j.y[c*OH*OW:(c+1)*OH*OW]
			for oy := 0; oy < OH; oy++ {
				if uniform {
					copy(yc[oy*OW:(oy+1)*OW], ab[oy*wp:oy*wp+OW])
					continue
				}
				r := ch(oy)
				for _, ru := range runs {
					v.DivScalar32s(yc[oy*OW+ru.ox0:oy*OW+ru.ox1], ab[oy*wp+ru.ox0:oy*wp+ru.ox1], float32(r*ru.c))
				}
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
