package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// convF32 computes a float32 Conv into y (N*M*P values): the chains
// (through sgemmP, or the depthwise kernels for group == C == M) and then
// the bias, y = acc + B[m]. Run and Into both come here, so they give the
// same bits.
func convF32(pool *parallel.Pool, s *convSetup, x, w, bias, y []float32) {
	P := prod(s.g.out)
	dw := s.Cg == 1 && s.Mg == 1 && (s.tactic == "" || s.tactic == TacticDepthwise)
	switch {
	case dw && fastKernels && dw3x3S1(s):
		depthwise3x3(pool, s, x, w, y)
	case dw:
		depthwiseInto(s, x, w, y)
	default:
		convGEMMF32(pool, s, x, w, y)
	}
	if bias != nil {
		addBias(y, bias, s.M, P)
	}
}

// convGEMMF32 is convGEMM for float32 on a pool, with the im2col matrix in
// a reused scratch buffer.
func convGEMMF32(pool *parallel.Pool, s *convSetup, x, w, y []float32) {
	g := s.g
	P, inSz, kn := prod(g.out), prod(g.in), prod(g.k)
	K := s.Cg * kn
	direct := s.pointwise() && s.tactic != TacticIm2col
	var col *[]float32
	var tabs [][]int
	if !direct {
		col = getF32(K * P)
		if tabs = s.tabs; tabs == nil {
			tabs = g.taps(false)
		}
	}
	for ni := 0; ni < s.N; ni++ {
		for gi := 0; gi < s.G; gi++ {
			xg := x[(ni*s.C+gi*s.Cg)*inSz : (ni*s.C+(gi+1)*s.Cg)*inSz]
			b := xg
			if !direct {
				if len(g.in) == 2 {
					im2col2D(xg, s.Cg, g, *col)
				} else {
					im2col(xg, s.Cg, g, tabs, *col)
				}
				b = *col
			}
			sgemmP(pool, s.Mg, P, K, w[gi*s.Mg*K:], K, 1, b, P, 1, y[(ni*s.M+gi*s.Mg)*P:], P)
		}
	}
	if col != nil {
		putF32(col)
	}
}

// dw3x3S1 reports whether the depthwise convolution is the 2-D 3x3,
// stride 1, dilation 1 case that has a vector kernel.
func dw3x3S1(s *convSetup) bool {
	g := s.g
	return len(g.in) == 2 && g.k[0] == 3 && g.k[1] == 3 && g.stride[0] == 1 && g.stride[1] == 1 &&
		g.dil[0] == 1 && g.dil[1] == 1
}

// dwJob runs depthwise3x3 over (image, channel) planes.
type dwJob struct {
	s       *convSetup
	x, w, y []float32
}

var dwJobs = sync.Pool{New: func() any { return new(dwJob) }}

// depthwise3x3 is the vector twin of depthwise for dw3x3S1: outputs whose
// nine taps all lie inside the input go through amd64.Dw3x3S1 eight at a
// time; the border goes through dwPoint. Both are the chain over the taps
// in row-major order from +0, padding taps included as FMA(0, w, acc).
func depthwise3x3(pool *parallel.Pool, s *convSetup, x, w, y []float32) {
	j := dwJobs.Get().(*dwJob)
	*j = dwJob{s: s, x: x, w: w, y: y}
	pool.Run(s.N*s.C, s.N*s.C*prod(s.g.out)*9, j)
	*j = dwJob{}
	dwJobs.Put(j)
}

func (j *dwJob) Run(lo, hi int) {
	g := j.s.g
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	pt, pl := g.padB[0], g.padB[1]
	for nc := lo; nc < hi; nc++ {
		c := nc % j.s.C
		xc := j.x[nc*H*W : (nc+1)*H*W]
		wc := (*[9]float32)(j.w[c*9:])
		yc := j.y[nc*OH*OW : (nc+1)*OH*OW]
		for oy := 0; oy < OH; oy++ {
			iy := oy - pt
			yr := yc[oy*OW : (oy+1)*OW]
			vlo, vhi := 0, 0 // columns done by the vector kernel
			if iy >= 0 && iy+2 < H {
				// Columns whose taps ix..ix+2 all lie inside the row.
				lo := min(pl, OW)
				hi := max(lo, min(OW, W-2+pl))
				if n8 := (hi - lo) &^ 7; n8 > 0 {
					x0 := xc[iy*W+lo-pl:]
					amd64.Dw3x3S1(&x0[0], &x0[W], &x0[2*W], &wc[0], &yr[lo], n8)
					vlo, vhi = lo, lo+n8
				}
			}
			for ox := 0; ox < vlo; ox++ {
				yr[ox] = dwPoint(xc, H, W, iy, ox-pl, wc)
			}
			for ox := vhi; ox < OW; ox++ {
				yr[ox] = dwPoint(xc, H, W, iy, ox-pl, wc)
			}
		}
	}
}

// dwPoint is one 3x3 depthwise output: the chain over the nine taps of the
// window whose top-left tap is (iy, ix), padding read as zero.
func dwPoint(xc []float32, H, W, iy, ix int, w *[9]float32) float32 {
	var acc float32
	for r := 0; r < 3; r++ {
		for t := 0; t < 3; t++ {
			var xv float32
			if y, x := iy+r, ix+t; uint(y) < uint(H) && uint(x) < uint(W) {
				xv = xc[y*W+x]
			}
			acc = fma32(xv, w[3*r+t], acc)
		}
	}
	return canonNaN(acc)
}

// fma32 is vmath.FMA32 with its fast path inlined (see gemm.go's micro).
func fma32(a, b, c float32) float32 {
	s := float64(a)*float64(b) + float64(c)
	if fmaFast(math.Float64bits(s)) || s == 0 {
		return float32(s)
	}
	return vmath.FMA32(a, b, c)
}

// im2col2D is im2col for two spatial dimensions: the same matrix, built
// row segment by row segment (a contiguous copy where the stride is 1).
func im2col2D(x []float32, C int, g *geom, col []float32) {
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	KH, KW := g.k[0], g.k[1]
	sh, sw, dh, dw, pt, pl := g.stride[0], g.stride[1], g.dil[0], g.dil[1], g.padB[0], g.padB[1]
	P := OH * OW
	row := 0
	for c := 0; c < C; c++ {
		xc := x[c*H*W : (c+1)*H*W]
		for ky := 0; ky < KH; ky++ {
			for kx := 0; kx < KW; kx++ {
				dst := col[row*P : (row+1)*P]
				row++
				// Output columns ox whose input column ix = ox*sw + kx*dw - pl
				// lies in [0, W): [lo, hi).
				off := kx*dw - pl
				lo := 0
				if off < 0 {
					lo = (-off + sw - 1) / sw
				}
				hi := OW
				if last := W - 1 - off; last < 0 {
					hi = 0
				} else {
					hi = min(OW, last/sw+1)
				}
				lo = min(lo, hi)
				for oy := 0; oy < OH; oy++ {
					seg := dst[oy*OW : (oy+1)*OW]
					iy := oy*sh + ky*dh - pt
					if iy < 0 || iy >= H {
						clear(seg)
						continue
					}
					xr := xc[iy*W : (iy+1)*W]
					clear(seg[:lo])
					if sw == 1 {
						copy(seg[lo:hi], xr[lo+off:hi+off])
					} else {
						for ox := lo; ox < hi; ox++ {
							seg[ox] = xr[ox*sw+off]
						}
					}
					clear(seg[hi:])
				}
			}
		}
	}
}
