package image

import (
	"math"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
)

// A float32 linear or cubic Resize of the last two axes (the usual
// segmentation upsample) is separable: the nested sum of interpInto
// computes, for every output (oy, ox), the same horizontal sums
// h(iy, ox) = Σ_jx fma(wx, x[iy, ix_jx], ·) for each input row iy of oy's
// stencil, many times over. separable32 computes each h(iy, ox) once and
// then every output as the chain over oy's taps of fma(wy, h(iy, ox), ·),
// with the weights rounded to float32 as interpInto rounds them: the same
// operations on the same values, so the same bits, except that a NaN is
// stored as the canonical 0x7fc00000 (interpolate canonicalises NaNs on
// this path at every level, so that the twins agree).
//
// The outer axes must be the identity (one tap of weight 1 at the output's
// own index, none outside): each output is then fma(w, v, +0) per outer
// axis, innermost first, as interpInto nests them.

// separableOK reports whether the geometry takes the separable path.
func separableOK(w *walker) bool {
	r := len(w.out)
	if r < 2 {
		return false
	}
	for d := 0; d < r; d++ {
		t := &w.tp[d]
		for o := 0; o < w.out[d]; o++ {
			n := t.off[o+1] - t.off[o]
			if t.outside[o] || n < 1 {
				return false
			}
			if d < r-2 && (n != 1 || t.idx[t.off[o]] != o || w.in[d] != w.out[d]) {
				return false
			}
		}
	}
	return true
}

// tapsLv is the kernel taps32 runs: the portable loop, amd64.DwTapsA
// (AVX2+FMA) or amd64.DwTapsZ (AVX-512), all with the same bits.
type tapsLv int

const (
	tapsGo tapsLv = iota
	tapsA
	tapsZ
)

// tapsLevel is the best taps32 kernel kc allows on this CPU.
func tapsLevel(kc *kernel.Ctx) tapsLv {
	switch {
	case kc.AVX512() && amd64.EnabledZ:
		return tapsZ
	case kc.AVX2() && amd64.Enabled:
		return tapsA
	}
	return tapsGo
}

// sepPlan is the separable path's geometry, built once per input shape
// (the Into form keeps it in the node's State): per output column the
// horizontal taps as offsets into the transposed input plane, per output
// row the vertical taps as offsets into the plane of horizontal sums, and
// the outer axes' weights. It is immutable once built.
type sepPlan struct {
	w              *walker
	H, W, OH, OW   int
	hs, ows, outer int
	xo, yo         []int     // tap ranges of output column ox (xo[ox]:xo[ox+1]) and row oy
	xoffs, yoffs   []int32   // the taps' offsets
	xw, yw         []float32 // and weights
	planes         [][]float32
	ones           bool // r > 2 and every outer weight is 1
	scratch        int  // floats of scratch one plane needs
	xtN, htN, hrN  int
}

// newSepPlan builds the plan of a geometry that separableOK accepts.
//
// Where every outer weight is 1, each output is fma(1, v, +0) per outer
// axis, that is v + 0 (exact, however many times: it only turns -0 into
// +0). The vertical chain then ends with one more tap of weight 0 on a row
// of ones (fma(0, 1, acc) = acc + 0 exactly, a NaN staying NaN), so that
// the chain stores the output directly, with no pass over it.
func newSepPlan(w *walker) *sepPlan {
	r := len(w.out)
	s := &sepPlan{w: w, H: w.in[r-2], W: w.in[r-1], OH: w.out[r-2], OW: w.out[r-1], outer: 1}
	for d := 0; d < r-2; d++ {
		s.outer *= w.out[d]
	}
	for d := r - 3; d >= 0; d-- {
		s.planes = append(s.planes, f32s(w.tp[d].w))
	}
	s.ones = r > 2
	for _, ws := range s.planes {
		for _, v := range ws {
			s.ones = s.ones && v == 1
		}
	}
	s.hs = (s.H + 15) &^ 15 // row stride of the transposed planes
	s.ows = (s.OW + 15) &^ 15
	ty, tx := &w.tp[r-2], &w.tp[r-1]
	wx, wy := f32s(tx.w), f32s(ty.w)
	s.xo = make([]int, s.OW+1)
	for ox := 0; ox < s.OW; ox++ {
		for t := tx.off[ox]; t < tx.off[ox+1]; t++ {
			s.xoffs = append(s.xoffs, int32(tx.idx[t]*s.hs))
			s.xw = append(s.xw, wx[t])
		}
		s.xo[ox+1] = len(s.xoffs)
	}
	s.yo = make([]int, s.OH+1)
	for oy := 0; oy < s.OH; oy++ {
		for t := ty.off[oy]; t < ty.off[oy+1]; t++ {
			s.yoffs = append(s.yoffs, int32(ty.idx[t]*s.ows))
			s.yw = append(s.yw, wy[t])
		}
		if s.ones {
			s.yoffs = append(s.yoffs, int32(s.H*s.ows)) // the row of ones
			s.yw = append(s.yw, 0)
		}
		s.yo[oy+1] = len(s.yoffs)
	}
	s.xtN = s.W*s.hs + 16
	s.htN = s.OW*s.hs + 16
	s.hrN = (s.H+1)*s.ows + 16
	s.scratch = s.xtN + s.htN + s.hrN + s.ows
	return s
}

// separable32 is the separable path; lv selects the kernel for the
// vertical and horizontal sums (taps32).
func separable32(w *walker, src, dst []float32, lv tapsLv) {
	s := newSepPlan(w)
	s.run(src, dst, 0, s.outer, lv, make([]float32, s.scratch))
}

// run computes planes [lo, hi) of dst from src, with buf (s.scratch
// floats, any contents) as scratch. Disjoint ranges may run concurrently:
// a plane's stores stay inside it.
func (s *sepPlan) run(src, dst []float32, lo, hi int, lv tapsLv, buf []float32) {
	H, W, OH, OW, hs, ows := s.H, s.W, s.OH, s.OW, s.hs, s.ows
	xt := buf[:s.xtN]
	ht := buf[s.xtN : s.xtN+s.htN]
	hr := buf[s.xtN+s.htN : s.xtN+s.htN+s.hrN]
	row := buf[s.xtN+s.htN+s.hrN:]
	ones := hr[H*ows : (H+1)*ows]
	for i := range ones {
		ones[i] = 1
	}
	r := len(s.w.out)
	for p := lo; p < hi; p++ {
		xp := src[p*H*W : (p+1)*H*W]
		yp := dst[p*OH*OW : (p+1)*OH*OW]
		// Horizontal sums, as columns of the transposed plane.
		for iy := 0; iy < H; iy++ {
			xr := xp[iy*W : (iy+1)*W]
			for ix, v := range xr {
				xt[ix*hs+iy] = v
			}
		}
		for ox := 0; ox < OW; ox++ {
			a, b := s.xo[ox], s.xo[ox+1]
			taps32(lv, hs, s.xoffs[a:b], s.xw[a:b], xt, ht[ox*hs:])
		}
		for ox := 0; ox < OW; ox++ {
			hc := ht[ox*hs : ox*hs+H]
			for iy, v := range hc {
				hr[iy*ows+ox] = v
			}
		}
		// Vertical sums, stored in place where the chain's ows columns fit
		// in the plane (those past OW land in rows stored later).
		for oy := 0; oy < OH; oy++ {
			a, b := s.yo[oy], s.yo[oy+1]
			out := yp[oy*OW : (oy+1)*OW]
			if oy*OW+ows <= len(yp) {
				taps32(lv, ows, s.yoffs[a:b], s.yw[a:b], hr, yp[oy*OW:])
			} else {
				taps32(lv, ows, s.yoffs[a:b], s.yw[a:b], hr, row)
				copy(out, row)
			}
			if s.ones || r == 2 {
				continue
			}
			// The outer axes, innermost first: fma(w, v, +0) each.
			q := p
			for i, d := 0, r-3; d >= 0; i, d = i+1, d-1 {
				o := q % s.w.out[d]
				q /= s.w.out[d]
				wo := s.planes[i][s.w.tp[d].off[o]:]
				for j, v := range out {
					out[j] = vmath.FMA32(wo[0], v, 0)
				}
			}
		}
	}
}

// taps32 sets y[i], i < n (a multiple of 16), to the chain acc =
// FMA(x[offs[t]+i], w[t], acc) over the taps from +0, canon: DwTapsZ,
// DwTapsA, or their portable twin.
func taps32(lv tapsLv, n int, offs []int32, w, x, y []float32) {
	if lv != tapsGo {
		_ = x[int(offs[len(offs)-1])+n-1]
		_ = y[n-1]
		if lv == tapsZ {
			amd64.DwTapsZ(n, len(offs), &offs[0], &w[0], &x[0], &y[0])
		} else {
			amd64.DwTapsA(n, len(offs), &offs[0], &w[0], &x[0], &y[0])
		}
		return
	}
	for i := 0; i < n; i++ {
		var acc float32
		for t, o := range offs {
			acc = vmath.FMA32(w[t], x[int(o)+i], acc)
		}
		y[i] = canon32(acc)
	}
}

func canon32(v float32) float32 {
	if v != v {
		return math.Float32frombits(0x7fc00000)
	}
	return v
}

func f32s(w []float64) []float32 {
	out := make([]float32, len(w))
	for i, v := range w {
		out[i] = float32(v)
	}
	return out
}
