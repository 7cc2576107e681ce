package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// convF32 computes a float32 Conv into y (N*M*P values): the chains
// (through sgemmP, or the depthwise kernels for group == C == M) and then
// the bias, y = acc + B[m], then the fused epilogue ep, if on (see
// epilogue.go). Run and Into both come here, so they give the same bits.
func convF32(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	if conv1DRow(pool, s) {
		s = s.row
	}
	P := prod(s.g.out)
	dw := s.Cg == 1 && s.Mg == 1 && (s.tactic == "" || s.tactic == TacticDepthwise)
	switch {
	case dw && pool.fast && dw3x3Vec(s):
		depthwise3x3(pool, s, x, w, bias, y, ep)
		return
	case dw && dwSmallOK(pool, s) && dwSmallWins(s.g):
		dwSmall(pool, s, x, w, bias, y, ep)
		return
	case dw && dwAnyOK(pool, s):
		dwAny(pool, s, x, w, bias, y, ep)
		return
	case dw:
		depthwiseInto(pool, s, x, w, y)
	case stemOK(pool, s) && (s.tactic == "" || s.tactic == TacticIm2col || s.tactic == TacticDirect):
		convStem(pool, s, x, w, bias, y, ep)
		return
	case s.tactic == TacticDirect && directOK(pool, s, y, ep):
		convDirect(pool, s, x, w, bias, y, ep)
		return
	case groupTapsOK(pool, s):
		groupTaps(pool, s, x, w, y)
	case pool.fast:
		convGEMMFast(pool, s, x, w, bias, y, ep)
		return
	default:
		convGEMMF32(pool, s, x, w, y)
	}
	if bias != nil {
		addBias(y, bias, s.M, P)
	}
	ep.all(y)
}

// convGEMMF32 is convGEMM for float32 on a pool, with the im2col matrix in
// a reused scratch buffer.
func convGEMMF32(pool machine, s *convSetup, x, w, y []float32) {
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

// dw3x3Vec reports whether the depthwise convolution is the 2-D 3x3,
// dilation 1 case with column stride 1 or 2 that has vector kernels.
func dw3x3Vec(s *convSetup) bool {
	g := s.g
	return len(g.in) == 2 && g.k[0] == 3 && g.k[1] == 3 && (g.stride[1] == 1 || g.stride[1] == 2) &&
		g.dil[0] == 1 && g.dil[1] == 1
}

// depthwise3x3 is the vector twin of depthwiseInto for dw3x3Vec (see
// dwDirectJob and dw9Job in dw_direct.go): the bias and then the epilogue ep
// are applied as convF32 applies them.
func depthwise3x3(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	dwRun(pool, s, x, w, bias, y, ep)
}

// im2col2D is im2col for two spatial dimensions: the same matrix, built
// row by row with im2colRow2D.
func im2col2D(x []float32, C int, g *geom, col []float32) {
	P, KH, KW, inSz := g.out[0]*g.out[1], g.k[0], g.k[1], g.in[0]*g.in[1]
	row := 0
	for c := 0; c < C; c++ {
		for ky := 0; ky < KH; ky++ {
			for kx := 0; kx < KW; kx++ {
				im2colRow2D(x[c*inSz:(c+1)*inSz], g, ky, kx, col[row*P:(row+1)*P])
				row++
			}
		}
	}
}

// im2colRow2D writes the im2col row of kernel tap (ky, kx) of one input
// channel xc: dst[oy*ow+ox] = xc[iy, ix] with iy = oy*sh + ky*dh - pt and
// ix = ox*sw + kx*dw - pl, zero where that is padding. Row segments are
// contiguous copies where the stride is 1.
func im2colRow2D(xc []float32, g *geom, ky, kx int, dst []float32) {
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	sh, sw, dh, dw, pt, pl := g.stride[0], g.stride[1], g.dil[0], g.dil[1], g.padB[0], g.padB[1]
	// Output columns ox whose input column ix = ox*sw + kx*dw - pl lies in
	// [0, W): [lo, hi).
	off := kx*dw - pl
	lo, hi := validCols(W, OW, sw, off)
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

// convGEMMFast is convGEMMF32 on the vector GEMM: for two spatial
// dimensions the GEMM packs its B blocks straight from the input
// (im2colB), so the im2col matrix is never materialised; the bias and the
// epilogue are applied as each output tile is finished.
func convGEMMFast(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	g := s.g
	P, inSz, kn := prod(g.out), prod(g.in), prod(g.k)
	K := s.Cg * kn
	direct := s.pointwise() && s.tactic != TacticIm2col
	// Two spatial dimensions: B blocks are packed from the input planes
	// zero-padded once per group (padPlanes), so packing has no bounds to
	// test; an unpadded input is read in place. Where the padded planes
	// would be much larger than the input and output planes (pads and
	// strides far larger than the kernel), and for other ranks, the
	// im2col matrix is built instead.
	var hp, wp int
	planes := !direct && len(g.in) == 2
	if planes {
		hp, wp = g.padded()
		planes = hp*wp <= 4*(inSz+P)+64
	}
	var col *[]float32
	var tabs [][]int
	if !direct && !planes {
		col = getF32(K * P)
		if tabs = s.tabs; tabs == nil {
			tabs = g.taps(false)
		}
	}
	var pad *[]float32
	if planes && (g.padB[0] != 0 || g.padB[1] != 0 || hp != g.in[0] || wp != g.in[1]) {
		pad = getF32(s.Cg*hp*wp + 2*gemmNR)
	}
	mb, ib := matBs.Get().(*matB), im2colBs.Get().(*im2colB)
	for ni := 0; ni < s.N; ni++ {
		for gi := 0; gi < s.G; gi++ {
			xg := x[(ni*s.C+gi*s.Cg)*inSz : (ni*s.C+(gi+1)*s.Cg)*inSz]
			var bg []float32
			if bias != nil {
				bg = bias[gi*s.Mg : (gi+1)*s.Mg]
			}
			wg, yg := w[gi*s.Mg*K:], y[(ni*s.M+gi*s.Mg)*P:]
			var src bSource
			switch {
			case direct:
				*mb = matB{b: xg, brs: P, bcs: 1}
				src = mb
			case col != nil:
				im2col(xg, s.Cg, g, tabs, *col)
				*mb = matB{b: *col, brs: P, bcs: 1}
				src = mb
			default:
				*ib = im2colB{p: xg, g: g, wp: wp, hwp: hp * wp}
				if pad != nil {
					padPlanes(pool, xg, s.Cg, g, hp, wp, *pad)
					ib.p, ib.slack = *pad, true
				}
				src = ib
			}
			sgemmFastB(pool, s.Mg, P, K, wg, K, 1, src, bg, ep.at((ni*s.M+gi*s.Mg)*P), yg, P)
		}
	}
	*mb, *ib = matB{}, im2colB{}
	matBs.Put(mb)
	im2colBs.Put(ib)
	if col != nil {
		putF32(col)
	}
	if pad != nil {
		putF32(pad)
	}
}

// padded returns the height and width of a 2-D convolution's input planes
// zero-padded: the whole input after the leading pads, and at least as far
// as the last tap of the last output reads.
func (g *geom) padded() (hp, wp int) {
	hp = max(g.padB[0]+g.in[0], (g.out[0]-1)*g.stride[0]+(g.k[0]-1)*g.dil[0]+1)
	wp = max(g.padB[1]+g.in[1], (g.out[1]-1)*g.stride[1]+(g.k[1]-1)*g.dil[1]+1)
	return hp, wp
}

// padPlanes writes the C planes of x (g.in) zero-padded to hp x wp
// (g.padB before them) into dst, plane after plane; the floats after the
// last plane are zeroed too (slack for whole-vector reads).
func padPlanes(pool machine, x []float32, C int, g *geom, hp, wp int, dst []float32) {
	j := padJobs.Get().(*padJob)
	*j = padJob{x: x, g: g, hp: hp, wp: wp, dst: dst}
	pool.Run(C, C*hp*wp/4, j)
	*j = padJob{}
	padJobs.Put(j)
	clear(dst[C*hp*wp:])
}

// padJob pads planes [lo, hi) for padPlanes.
type padJob struct {
	x, dst []float32
	g      *geom
	hp, wp int
}

var padJobs = sync.Pool{New: func() any { return new(padJob) }}

func (j *padJob) Run(lo, hi int) {
	x, g, hp, wp, dst := j.x, j.g, j.hp, j.wp, j.dst
	H, W, pt, pl := g.in[0], g.in[1], g.padB[0], g.padB[1]
	for c := lo; c < hi; c++ {
		xc, pc := x[c*H*W:(c+1)*H*W], dst[c*hp*wp:(c+1)*hp*wp]
		clear(pc[:pt*wp])
		for iy := 0; iy < H; iy++ {
			row := pc[(pt+iy)*wp : (pt+iy+1)*wp]
			clear(row[:pl])
			copy(row[pl:pl+W], xc[iy*W:(iy+1)*W])
			clear(row[pl+W:])
		}
		clear(pc[(pt+H)*wp:])
	}
}

// im2colB is the im2col matrix of a 2-D convolution input as a GEMM B
// source: row kk = (channel, ky, kx), column p = oy*ow + ox, the values
// im2colRow2D writes. It reads the input planes zero-padded (padPlanes):
// p holds them, hwp floats apart, rows wp apart; slack says that floats
// past the last plane may be read (and are ignored).
type im2colB struct {
	p       []float32
	g       *geom
	wp, hwp int
	slack   bool
}

var im2colBs = sync.Pool{New: func() any { return new(im2colB) }}

func (m *im2colB) packB(dst []float32, k0, kb, j0, cols int) {
	g := m.g
	OW, KH, KW := g.out[1], g.k[0], g.k[1]
	sh, sw, dh, dw := g.stride[0], g.stride[1], g.dil[0], g.dil[1]
	// The output rows that columns [j0, j0+cols) cross: piece i covers
	// output row oy0+i, columns [ox0[i], ox1[i]) at seg[at[i]:].
	var ox0, ox1, at [gemmNC]int
	np := 0
	oy0 := j0 / OW
	for p := j0; p < j0+cols; np++ {
		o := p % OW
		e := min(OW, o+j0+cols-p)
		ox0[np], ox1[np], at[np] = o, e, p-j0
		p += e - o
	}
	var seg [gemmNC]float32
	nq := (cols + gemmNR - 1) / gemmNR
	clear(seg[cols:])
	wp, hwp := m.wp, m.hwp
	c, t := k0/(KH*KW), k0%(KH*KW)
	ky, kx := t/KW, t%KW
	for kk := 0; kk < kb; kk++ {
		// Tap (c, ky, kx) of output (oy, ox) reads padded row
		// oy*sh + ky*dh, column ox*sw + kx*dw.
		base := c*hwp + ky*dh*wp + kx*dw
		for i := 0; i < np; i++ {
			o0, o1 := ox0[i], ox1[i]
			sg := seg[at[i] : at[i]+o1-o0]
			xr := m.p[base+(oy0+i)*sh*wp+o0*sw:]
			switch sw {
			case 1:
				copy(sg, xr[:len(sg)])
			case 2:
				// Whole vectors (reading one float past the segment,
				// inside the planes or their slack).
				n := len(sg) &^ 7
				if !m.slack {
					n = (len(sg) - 1) &^ 7
				}
				if n > 0 {
					_ = xr[2*n-1]
					amd64.Even(&sg[0], &xr[0], n)
				}
				for j := n; j < len(sg); j++ {
					sg[j] = xr[2*j]
				}
			default:
				for j := range sg {
					sg[j] = xr[j*sw]
				}
			}
		}
		_ = dst[(nq-1)*gemmNR*kb+kk*gemmNR+gemmNR-1]
		amd64.Copy16s(&dst[kk*gemmNR], gemmNR*kb, &seg[0], nq)
		if kx++; kx == KW {
			kx = 0
			if ky++; ky == KH {
				ky = 0
				c++
			}
		}
	}
}

// validCols returns the output columns [lo, hi) whose input column
// ox*sw + off lies in [0, W).
func validCols(W, OW, sw, off int) (lo, hi int) {
	if off < 0 {
		lo = (-off + sw - 1) / sw
	}
	hi = OW
	if last := W - 1 - off; last < 0 {
		hi = 0
	} else {
		hi = min(OW, last/sw+1)
	}
	return min(lo, hi), hi
}
