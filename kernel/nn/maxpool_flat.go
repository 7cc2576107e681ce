package nn

import (
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/amd64"
)

// A float32 MaxPool over small planes (GoogLeNet's 3x3 pools on 7x7 to
// 28x28, its 2x2/2 on 14x14) runs on AVX-512 as whole planes, many at a
// time, instead of maxPool2D's per-plane, per-row calls: each plane's
// outputs are a flat run, 16 to a vector, four planes at a time in one call
// (amd64.MaxFlatZ, amd64.MaxGatherZ), every tap read in place from the
// input under a per-vector mask of the lanes whose tap lies inside the
// input. Each output starts at -inf, takes the first tap inside the input
// as it is (a NaN included) and folds each later one with VMAXPS, v > best
// ? v : best, in the window's row-major order: maxPoolInto's rule exactly,
// so no NaN pass is needed (maxPool2D folds from -inf and mends NaN first
// taps afterwards). The masks, offsets and lane indices depend only on
// the geometry: they are built once per plan, with the node's cached
// geometry (cachedPool).
// The portable twin is maxPoolInto (and maxPool2D's row kernels, which
// give its bits).

// maxFlatMaxOut and maxFlatMaxTaps bound the planes and windows maxFlat
// takes (its tables: 2*taps+1 masks per vector of 16 outputs).
const (
	maxFlatMaxOut  = 4096
	maxFlatMaxTaps = 64
)

// maxFlatTab is maxFlat's layout of one geometry: amd64.MaxFlatZ's
// offsets and masks (unit strides, output rows as long as the input's),
// or amd64.MaxRowsZ's records and indices (rows > 0).
type maxFlatTab struct {
	in, out  int // floats per input and output plane
	nv, taps int
	offs     []int32  // MaxFlatZ: per tap, row-major: its input offset from the output's
	masks    []uint16 // MaxFlatZ: per vector: (inside, first) per tap, then the store
	rows     int      // MaxRowsZ: output rows per vector (1 or 2)
	kh       int
	tab      []uint16 // MaxRowsZ: the vectors' records (int32s as two uint16s)
	idx      []int32  // MaxRowsZ: per kernel column, 16 VPERMI2PS indices
	// MaxTaps8's layout (maxpool_taps8.go), where the CPU has AVX2.
	nv8   int
	offs8 []int32
	tab8  []byte
}

// maxFlatOK reports whether maxFlat runs g (maxPool2D's 2-D view) here:
// AVX-512, planes of at most maxFlatMaxOut outputs, windows of at most
// maxFlatMaxTaps taps, and either unit strides with output rows as long as
// the input's (MaxFlatZ: every tap at a fixed offset of its output) or
// rows whose taps MaxRowsZ's two sources hold (maxRowsPer).
func maxFlatOK(pool machine, g *geom) bool {
	if pool.fast && !pool.z {
		// Gathers lose to the row kernels on the 3-wide stride-2 pools
		// MaxPoolK3S2 runs and on planes past maxTaps8Gathered outputs.
		_, _, k3s2 := maxPoolK3S2OK(true, g)
		return maxTaps8OK(g) && !k3s2 && (maxFlatUnit(g) || prod(g.out) <= maxTaps8Gathered)
	}
	if !pool.z || len(g.in) != 2 || prod(g.out) < 1 || prod(g.out) > maxFlatMaxOut || prod(g.k) > maxFlatMaxTaps || prod(g.in) < 1 {
		return false
	}
	return maxFlatUnit(g) || maxRowsPer(g) > 0
}

// maxFlatUnit reports whether g's taps lie at fixed offsets of the flat
// output index: unit strides, output rows as long as the input's.
func maxFlatUnit(g *geom) bool {
	return g.stride[0] == 1 && g.stride[1] == 1 && g.out[1] == g.in[1]
}

// maxRowsPer returns how many output rows one MaxRowsZ vector holds for
// g: 2 where a row has at most 8 outputs whose taps lie in the input row's
// first 16 columns (each source one input row), 1 where it has at most 16
// within the first 32 (the sources the row's two halves), else 0 (no
// MaxRowsZ).
func maxRowsPer(g *geom) int {
	OW := g.out[1]
	last := (OW-1)*g.stride[1] + (g.k[1]-1)*g.dil[1] - g.padB[1] // the last column a tap reads
	switch {
	case g.k[1] > 16:
		return 0
	case OW <= 8 && last < 16:
		return 2
	case OW <= 16 && last < 32:
		return 1
	}
	return 0
}

func newMaxFlatTab(g *geom) *maxFlatTab {
	t := newMaxFlatTabZ(g)
	if amd64.Enabled && maxFlatOK(machine{fast: true}, g) {
		t.offs8, t.tab8, t.nv8 = newMaxTaps8Tab(g)
	}
	return t
}

// newMaxFlatTabZ builds MaxFlatZ's or MaxRowsZ's layout of g, where one
// of them runs it (else an empty one: MaxTaps8's alone).
func newMaxFlatTabZ(g *geom) *maxFlatTab {
	if !maxFlatOK(machine{fast: true, z: true}, g) {
		return &maxFlatTab{taps: prod(g.k), in: prod(g.in), out: prod(g.out)}
	}
	if !maxFlatUnit(g) {
		return newMaxRowsTab(g)
	}
	W, OH, OW := g.in[1], g.out[0], g.out[1]
	kh, kw := g.k[0], g.k[1]
	t := &maxFlatTab{taps: kh * kw, in: prod(g.in), out: prod(g.out)}
	P := OH * OW
	t.nv = (P + 15) / 16
	for ky := 0; ky < kh; ky++ {
		for kx := 0; kx < kw; kx++ {
			t.offs = append(t.offs, int32((ky*g.dil[0]-g.padB[0])*W+kx*g.dil[1]-g.padB[1]))
		}
	}
	t.masks = make([]uint16, t.nv*(2*t.taps+1))
	for v := 0; v < t.nv; v++ {
		m := t.masks[v*(2*t.taps+1):]
		for l := 0; l < 16; l++ {
			if o := 16*v + l; o < P {
				m[2*t.taps] |= 1 << l
				maxTapMasks(g, o/OW, o%OW, l, m)
			}
		}
	}
	return t
}

// maxTapMasks sets bit l of the masks of output (oy, ox)'s taps inside
// the input: m[2t] for each such tap t (row-major), m[2t+1] for the first
// of them.
func maxTapMasks(g *geom, oy, ox, l int, m []uint16) {
	H, W, kh, kw := g.in[0], g.in[1], g.k[0], g.k[1]
	seen := false
	for ky := 0; ky < kh; ky++ {
		iy := oy*g.stride[0] + ky*g.dil[0] - g.padB[0]
		for kx := 0; kx < kw; kx++ {
			ix := ox*g.stride[1] + kx*g.dil[1] - g.padB[1]
			if iy < 0 || iy >= H || ix < 0 || ix >= W {
				continue
			}
			tp := ky*kw + kx
			m[2*tp] |= 1 << l
			if !seen {
				m[2*tp+1] |= 1 << l
				seen = true
			}
		}
	}
}

// newMaxRowsTab is newMaxFlatTab for MaxRowsZ (maxRowsPer(g) > 0).
func newMaxRowsTab(g *geom) *maxFlatTab {
	t := &maxFlatTab{taps: g.k[0] * g.k[1], kh: g.k[0], in: prod(g.in), out: prod(g.out)}
	t.tab, t.idx, t.nv, t.rows = rowsTab(g, true)
	return t
}

// rowsTab builds amd64.MaxRowsZ's records (first: with the first-tap
// masks) or DwRowsKZ's (without) and the VPERMI2PS indices for g
// (maxRowsPer(g) = R > 0 rows per vector), and returns the vector count.
func rowsTab(g *geom, first bool) (tab []uint16, idx []int32, nv, R int) {
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	kh, kw := g.k[0], g.k[1]
	R = maxRowsPer(g)
	nv = (OH + R - 1) / R
	col := func(ox, kx int) int { return ox*g.stride[1] + kx*g.dil[1] - g.padB[1] }
	idx = make([]int32, 16*kw)
	for kx := 0; kx < kw; kx++ {
		for l := 0; l < R*OW; l++ {
			r, ox := l/OW, l%OW
			if c := col(ox, kx); c >= 0 && c < 32/R {
				idx[16*kx+l] = int32(16*r + c)
			}
		}
	}
	colMask := func(a int) uint16 { // the columns [a, a+16) inside the row
		var m uint16
		for c := a; c < min(a+16, W); c++ {
			m |= 1 << (c - a)
		}
		return m
	}
	tab = make([]uint16, 0, nv*(kh*(6+2*kw)+4))
	tm := make([]uint16, 2*kh*kw)
	for v := 0; v < nv; v++ {
		clear(tm)
		var store uint16
		for l := 0; l < R*OW; l++ {
			if oy := v*R + l/OW; oy < OH {
				store |= 1 << l
				maxTapMasks(g, oy, l%OW, l, tm)
			}
		}
		if !first {
			for i := 1; i < len(tm); i += 2 {
				tm[i] = 0
			}
		}
		for ky := 0; ky < kh; ky++ {
			var off [2]int32
			var m [2]uint16
			for s := 0; s < 2; s++ {
				oy, c0 := v*R+s, 0 // two rows: source s is row v*R+s's
				if R == 1 {
					oy, c0 = v, 16*s // one row: source s its columns from 16s
				}
				if iy := oy*g.stride[0] + ky*g.dil[0] - g.padB[0]; oy < OH && iy >= 0 && iy < H {
					off[s], m[s] = int32(iy*W+c0), colMask(c0)
				}
			}
			tab = append(tab, uint16(off[0]), uint16(uint32(off[0])>>16), uint16(off[1]), uint16(uint32(off[1])>>16), m[0], m[1])
			tab = append(tab, tm[2*ky*kw:2*(ky+1)*kw]...)
		}
		o := v * R * OW
		tab = append(tab, store, 0, uint16(o), uint16(uint32(o)>>16))
	}
	return tab, idx, nv, R
}

// maxFlatTabFor returns the maxFlat layout of node n's geometry g where
// maxFlat could run it (on AVX-512), else nil: the Into's cached pool
// geometry keeps it (cachedPool), so a bound plan builds it once.
func maxFlatTabFor(n *ir.Node, g *geom) *maxFlatTab {
	if n.OpType != "MaxPool" || !maxPool2DOK(g) {
		return nil
	}
	if len(g.in) == 1 {
		g = g.row
	}
	if !maxFlatOK(machine{fast: true, z: true}, g) && !(amd64.Enabled && maxFlatOK(machine{fast: true}, g)) {
		return nil
	}
	return newMaxFlatTab(g)
}

// maxFlat computes the float32 MaxPool of NC planes of x into y with g's
// layout t (maxFlatOK(pool, g)).
func maxFlat(pool machine, t *maxFlatTab, NC int, x, y []float32) {
	j := maxFlatJobs.Get().(*maxFlatJob)
	*j = maxFlatJob{t: t, x: x, y: y, in: t.in, out: t.out, z: pool.z}
	pool.Run(NC, NC*j.out*t.taps, j)
	*j = maxFlatJob{}
	maxFlatJobs.Put(j)
}

type maxFlatJob struct {
	t       *maxFlatTab
	x, y    []float32
	in, out int  // floats per input and output plane
	z       bool // MaxFlatZ or MaxRowsZ; else MaxTaps8
}

var maxFlatJobs = sync.Pool{New: func() any { return new(maxFlatJob) }}

func (j *maxFlatJob) Run(lo, hi int) {
	if hi <= lo {
		return
	}
	t := j.t
	_ = j.x[hi*j.in-1]
	_ = j.y[hi*j.out-1]
	if !j.z {
		j.runTaps8(lo, hi)
		return
	}
	if t.rows > 0 {
		p := amd64.MaxRows{X: addr(&j.x[lo*j.in]), Y: addr(&j.y[lo*j.out]), Planes: hi - lo, XStep: j.in, YStep: j.out,
			KH: t.kh, Tab: addr16(t.tab, 0), TabEnd: addr16(t.tab, len(t.tab)), Idx: addr32(t.idx, 0), IdxEnd: addr32(t.idx, len(t.idx))}
		amd64.MaxRowsZ(&p)
		return
	}
	p := amd64.MaxFlat{X: addr(&j.x[lo*j.in]), Y: addr(&j.y[lo*j.out]), Planes: hi - lo, XStep: j.in, YStep: j.out,
		NV: t.nv, Taps: t.taps, Offs: addr32(t.offs, 0), Masks: addr16(t.masks, 0)}
	amd64.MaxFlatZ(&p)
}

// addr16 and addr32 are the address of s[i] (i <= len(s)) for the kernels'
// descriptors, as addr.
func addr16(s []uint16, i int) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(s))) + uintptr(i)*2
}

func addr32(s []int32, i int) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(s))) + uintptr(i)*4
}
