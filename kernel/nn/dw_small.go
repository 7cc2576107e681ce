package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// A float32 depthwise convolution over small planes (EfficientNet's,
// MnasNet's and the MobileNets' 3x3 and 5x5 layers on 7x7 to 28x28, at
// strides 1 and 2) runs on AVX-512 as whole planes, four channels at a
// time, instead of dwAny's per-plane calls (a zero-padded copy, the taps,
// the store): each plane's outputs a flat run of 16-lane vectors, every
// tap read in place under a per-vector mask of the lanes whose tap lies
// inside the input, the others +0 (amd64.DwFlatKZ for unit strides with
// output rows as long as the input's, every tap at a fixed offset;
// amd64.DwRowsKZ for the others whose rows fit two 16-float sources,
// MaxRowsZ's layout). Each output is depthwiseInto's chain, acc =
// FMA(tap, w, acc) over the taps in row-major order from +0, padding taps
// included as FMA(+0, w, acc), then canon(acc) + bias (-0 for none, which
// changes nothing) and the clamp, as dwAny's DwTapsZ and DwStoreZ compute
// them: the same bits. A residual epilogue runs over the finished planes,
// the activation over runs of them (ep.actRun), as dwFlatJob does. The
// masks and indices depend only on the geometry and are built once per
// setup (convSetup.dwk); the weights are laid out tap-major for four
// channels at a time per call, in pooled scratch. Without AVX-512 the
// unit-stride ones run amd64.DwFlatKA, the same chains on 8-lane vectors
// (VMASKMOVPS loads; whole stores except a plane's last vector where no
// later plane of the call takes its extra lanes: dwkTabA).

// dwSmallOK reports whether dwSmall runs the depthwise convolution s here:
// AVX-512 (or AVX2+FMA for unit strides: amd64.DwFlatKA, DwFlatKZ's twin
// on 8-lane vectors), two spatial dimensions, planes of at most maxFlatMaxOut outputs
// and kernels of at most maxFlatMaxTaps taps, and either unit strides with
// output rows as long as the input's or rows whose taps DwRowsKZ's two
// sources hold (maxRowsPer).
func dwSmallOK(pool machine, s *convSetup) bool {
	g := s.g
	if len(g.in) != 2 || !(pool.z || pool.fast && maxFlatUnit(g)) || s.Cg != 1 || s.Mg != 1 || prod(g.out) < 1 || prod(g.out) > maxFlatMaxOut ||
		prod(g.k) < 1 || prod(g.k) > maxFlatMaxTaps || prod(g.in) < 1 {
		return false
	}
	return maxFlatUnit(g) || maxRowsPer(g) > 0
}

// dwSmallWins reports whether convF32 runs a depthwise convolution that
// dwSmall takes there rather than in dwAny (3x3 ones run dwRun first):
// strided ones (DwRowsKZ: 2.1x on 672x14x14 5x5/2, 1.3x on 120x28x28
// 5x5/2), and unit-stride planes of at most dwSmallFlatMax outputs
// (DwFlatKZ: 1.3x on 1152x7x7 5x5; on 14x14 and 28x28 planes dwAny's
// kernel, which broadcasts each weight once for eight vectors, is as fast
// or faster: 0.95x and 0.76x). Thread CPU times on the loaded VM
// (BenchmarkDwSmall, medians of 3).
func dwSmallWins(g *geom) bool {
	return !maxFlatUnit(g) || prod(g.out) <= dwSmallFlatMax
}

// dwSmallFlatMax is the largest unit-stride plane (outputs) dwSmallWins
// gives DwFlatKZ.
const dwSmallFlatMax = 64

// dwkTab is dwSmall's layout of one geometry.
type dwkTab struct {
	unit     bool
	nv, taps int
	n        int      // DwK.N: taps (unit) or kernel rows
	tab      []uint16 // the vectors' records
	idx      []int32  // DwRowsKZ's indices
	tabA     []int32  // DwFlatKA's records (unit strides)
	midA     int      // the end of tabA's steps of two vectors
}

// dwkTabOf returns s's dwkTab, built once per setup.
func dwkTabOf(s *convSetup) *dwkTab {
	if t := s.dwk.Load(); t != nil {
		return t
	}
	g := s.g
	t := &dwkTab{unit: maxFlatUnit(g), taps: prod(g.k)}
	if !t.unit {
		t.tab, t.idx, t.nv, _ = rowsTab(g, false)
		t.n = g.k[0]
		s.dwk.CompareAndSwap(nil, t)
		return s.dwk.Load()
	}
	W, P, kh, kw := g.in[1], prod(g.out), g.k[0], g.k[1]
	t.n, t.nv = t.taps, (P+15)/16
	tm := make([]uint16, 2*t.taps)
	t.tab = make([]uint16, 0, t.nv*4*(t.taps+1))
	for v := 0; v < t.nv; v++ {
		clear(tm)
		var store uint16
		for l := 0; l < 16; l++ {
			if o := 16*v + l; o < P {
				store |= 1 << l
				maxTapMasks(g, o/W, o%W, l, tm)
			}
		}
		for ky := 0; ky < kh; ky++ {
			for kx := 0; kx < kw; kx++ {
				tp := ky*kw + kx
				off := int32((ky*g.dil[0]-g.padB[0])*W + kx*g.dil[1] - g.padB[1])
				t.tab = append(t.tab, tm[2*tp], 0, uint16(off), uint16(uint32(off)>>16))
			}
		}
		t.tab = append(t.tab, store, 0, 0, 0)
	}
	t.tabA, t.midA = dwkTabA(g)
	s.dwk.CompareAndSwap(nil, t)
	return s.dwk.Load()
}

// dwkTabA lays out amd64.DwFlatKA's table for the unit-stride geometry g
// and returns it with the end of its steps of two vectors: the vectors of
// 8 outputs from the last (the one the plane may not fill) to the first,
// in pairs and the first alone where their count is odd, so that a whole
// store of a last vector (store kind 2, where the plane has at least 8
// outputs) writes lanes of the next plane before that plane's own stores
// do.
func dwkTabA(g *geom) ([]int32, int) {
	W, P, kh, kw := g.in[1], prod(g.out), g.k[0], g.k[1]
	T, nv := kh*kw, (P+7)/8
	tm := make([][]uint16, 2)
	for i := range tm {
		tm[i] = make([]uint16, 2*T)
	}
	tab := make([]int32, 0, nv*4*(T+1))
	lanes := func(m uint16) (int32, int32) {
		var b [8]byte
		for l := range b {
			if m&(1<<l) != 0 {
				b[l] = 0xff
			}
		}
		lo := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		hi := uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24
		return int32(lo), int32(hi)
	}
	mid := 0
	for v := nv - 1; v >= 0; {
		vs := []int{v}
		if v >= 1 {
			vs = append(vs, v-1)
		} else if mid == 0 {
			mid = len(tab)
		}
		for i, u := range vs {
			clear(tm[i])
			var store uint16
			for l := 0; l < 8; l++ {
				if o := 8*u + l; o < P {
					store |= 1 << l
					maxTapMasks(g, o/W, o%W, l, tm[i])
				}
			}
			kind := int32(0)
			switch {
			case 8*u+8 <= P:
				kind = 1
			case P >= 8:
				kind = 2
			}
			lo, hi := lanes(store)
			tab = append(tab, lo, hi, int32(32*u), kind)
		}
		for ky := 0; ky < kh; ky++ {
			for kx := 0; kx < kw; kx++ {
				tp := ky*kw + kx
				for i, u := range vs {
					lo, hi := lanes(tm[i][2*tp])
					tab = append(tab, lo, hi, int32(8*(u-v)+(ky*g.dil[0]-g.padB[0])*W+kx*g.dil[1]-g.padB[1]), 0)
				}
			}
		}
		v -= len(vs)
	}
	if nv%2 == 0 {
		mid = len(tab)
	}
	return tab, mid
}

// dwSmall computes the depthwise convolution s (dwSmallOK) of x into y,
// with the bias (or none) and the epilogue ep.
func dwSmall(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	t := dwkTabOf(s)
	j := dwSmallJobs.Get().(*dwSmallJob)
	*j = dwSmallJob{s: s, t: t, x: x, w: w, bias: bias, y: y, ep: ep, z: pool.z}
	pool.Run(s.N*s.C, s.N*s.C*prod(s.g.out)*t.taps, j)
	*j = dwSmallJob{}
	dwSmallJobs.Put(j)
}

type dwSmallJob struct {
	s             *convSetup
	t             *dwkTab
	x, w, bias, y []float32
	ep            epi
	z             bool // AVX-512 (else DwFlatKA)
}

var dwSmallJobs = sync.Pool{New: func() any { return new(dwSmallJob) }}

func (j *dwSmallJob) Run(lo0, hi0 int) {
	s, t := j.s, j.t
	HW, OHW, T, C := prod(s.g.in), prod(s.g.out), t.taps, s.C
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		lo, hi = j.ep.lo, j.ep.hi
	}
	// Scratch for a run's weights (tap-major per four channels) and
	// biases: at most one image's channels.
	n := min(hi0-lo0, C)
	wbuf, bbuf := getF32(n*T), getF32(n)
	p := amd64.DwK{Tab: addr16(t.tab, 0), TabEnd: addr16(t.tab, len(t.tab)), N: t.n, XStep: HW, YStep: OHW, WPlane: 4 * T}
	if !t.unit {
		p.Idx, p.IdxEnd = addr32(t.idx, 0), addr32(t.idx, len(t.idx))
	}
	for nc := lo0; nc < hi0; {
		// planes [nc, e): consecutive channels of one image
		c := nc % C
		e := min(hi0, nc-c+C)
		e = j.ep.actRun(nc, e, OHW)
		np := e - nc
		_ = j.x[e*HW-1]
		_ = j.y[e*OHW-1]
		dwPackWeights((*wbuf)[:np*T], j.w[c*T:(c+np)*T], T)
		bt := (*bbuf)[:np]
		if j.bias != nil {
			copy(bt, j.bias[c:c+np])
		} else {
			for i := range bt {
				bt[i] = negZero
			}
		}
		p.X, p.Y, p.W, p.B = addr(&j.x[nc*HW]), addr(&j.y[nc*OHW]), addr(&(*wbuf)[0]), addr(&bt[0])
		p.Planes, p.Lo, p.Hi = np, lo, hi
		if !j.z {
			a := amd64.DwKA{X: p.X, Y: p.Y, W: p.W, B: p.B, Planes: np, XStep: HW, YStep: OHW, N: T,
				Tab: addr32(t.tabA, 0), TabEnd: addr32(t.tabA, len(t.tabA)), Mid: addr32(t.tabA, t.midA), Lo: lo, Hi: hi}
			amd64.DwFlatKA(&a)
		} else if t.unit {
			amd64.DwFlatKZ(&p)
		} else {
			amd64.DwRowsKZ(&p)
		}
		j.ep.planesDone(j.y, nc, e, OHW, late)
		nc = e
	}
	putF32(wbuf)
	putF32(bbuf)
}

// dwPackWeights lays out the T-tap kernels w of len(w)/T channels for
// amd64.DwK: per group of four channels [tap][4], then the channels left,
// each its T taps as they are.
func dwPackWeights(dst, w []float32, T int) {
	n := len(w) / T
	G := n / 4
	for g := 0; g < G; g++ {
		d, src := dst[g*4*T:(g+1)*4*T], w[g*4*T:(g+1)*4*T]
		for b := 0; b < 4; b++ {
			for tp := 0; tp < T; tp++ {
				d[tp*4+b] = src[b*T+tp]
			}
		}
	}
	copy(dst[G*4*T:], w[G*4*T:])
}

// planesDone finishes the planes [nc, e) of P outputs each of y that a
// depthwise kernel has stored (bias and, unless late, clamp applied): with
// a residual (late) the whole epilogue plane by plane, then the activation
// over the run.
func (ep *epi) planesDone(y []float32, nc, e, P int, late bool) {
	if late {
		for k := nc; k < e; k++ {
			pe := ep.at(k * P)
			pe.block(y[k*P:(k+1)*P], P, 1, P)
		}
	}
	ep.activate(y[nc*P:e*P], (e-nc)*P, 1, (e-nc)*P)
}
