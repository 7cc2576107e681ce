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

// separable32 is the separable path; lv selects the kernel for the
// vertical and horizontal sums (taps32).
func separable32(w *walker, src, dst []float32, lv tapsLv) {
	r := len(w.out)
	H, W := w.in[r-2], w.in[r-1]
	OH, OW := w.out[r-2], w.out[r-1]
	ty, tx := &w.tp[r-2], &w.tp[r-1]
	wy, wx := f32s(ty.w), f32s(tx.w)
	outer := 1
	var wo []float32 // the outer axes' weights, innermost first, per plane
	for d := 0; d < r-2; d++ {
		outer *= w.out[d]
	}
	planes := make([][]float32, 0, r-2)
	for d := r - 3; d >= 0; d-- {
		planes = append(planes, f32s(w.tp[d].w))
	}
	ones := r > 2 // every outer weight is 1 (the usual case)
	for _, ws := range planes {
		for _, v := range ws {
			ones = ones && v == 1
		}
	}
	hs := (H + 15) &^ 15 // row stride of the transposed planes
	ows := (OW + 15) &^ 15
	xt := make([]float32, W*hs+16)
	ht := make([]float32, OW*hs+16)
	hr := make([]float32, H*ows+16)
	row := make([]float32, ows)
	var offs []int32
	for p := 0; p < outer; p++ {
		xp := src[p*H*W : (p+1)*H*W]
		yp := dst[p*OH*OW : (p+1)*OH*OW]
		// Horizontal sums, as columns of the transposed plane.
		for iy := 0; iy < H; iy++ {
			for ix := 0; ix < W; ix++ {
				xt[ix*hs+iy] = xp[iy*W+ix]
			}
		}
		for ox := 0; ox < OW; ox++ {
			lo, hi := tx.off[ox], tx.off[ox+1]
			offs = offs[:0]
			for _, ix := range tx.idx[lo:hi] {
				offs = append(offs, int32(ix*hs))
			}
			taps32(lv, hs, offs, wx[lo:hi], xt, ht[ox*hs:])
		}
		for ox := 0; ox < OW; ox++ {
			for iy := 0; iy < H; iy++ {
				hr[iy*ows+ox] = ht[ox*hs+iy]
			}
		}
		// Vertical sums.
		for oy := 0; oy < OH; oy++ {
			lo, hi := ty.off[oy], ty.off[oy+1]
			offs = offs[:0]
			for _, iy := range ty.idx[lo:hi] {
				offs = append(offs, int32(iy*ows))
			}
			taps32(lv, ows, offs, wy[lo:hi], hr, row)
			out := yp[oy*OW : (oy+1)*OW]
			if ones {
				// fma(1, v, +0) is v + 0, exactly, however many times.
				for j, v := range row[:OW] {
					out[j] = v + 0
				}
				continue
			}
			copy(out, row)
			// The outer axes, innermost first: fma(w, v, +0) each.
			q := p
			for i, d := 0, r-3; d >= 0; i, d = i+1, d-1 {
				o := q % w.out[d]
				q /= w.out[d]
				wo = planes[i][w.tp[d].off[o]:]
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
