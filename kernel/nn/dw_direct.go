package nn

import (
	"math"
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/kernel/amd64"
)

// dwRun runs depthwise3x3: dwDirectJob for one column of left padding
// (the input read in place), else dw9Job (the planes padded first).
func dwRun(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	work := s.N * s.C * prod(s.g.out) * 9
	if dwFlatS2OK(pool, s.g) {
		j := dwFlatS2Jobs.Get().(*dwFlatS2Job)
		*j = dwFlatS2Job{s: s, x: x, w: w, bias: bias, y: y, ep: ep}
		pool.Run(s.N*s.C, work, j)
		*j = dwFlatS2Job{}
		dwFlatS2Jobs.Put(j)
		return
	}
	if dwFlatOK(pool, s.g) {
		j := dwFlatJobs.Get().(*dwFlatJob)
		*j = dwFlatJob{s: s, x: x, w: w, bias: bias, y: y, ep: ep}
		pool.Run(s.N*s.C, work, j)
		*j = dwFlatJob{}
		dwFlatJobs.Put(j)
		return
	}
	if _, _, ok := dwDirectSetup(s.g); ok || dwZOK(pool, s.g) {
		j := dwDirectJobs.Get().(*dwDirectJob)
		*j = dwDirectJob{s: s, x: x, w: w, bias: bias, y: y, ep: ep, m: pool}
		pool.Run(s.N*s.C, work, j)
		*j = dwDirectJob{}
		dwDirectJobs.Put(j)
		return
	}
	j := dw9Jobs.Get().(*dw9Job)
	*j = dw9Job{s: s, x: x, w: w, bias: bias, y: y, ep: ep, fast: pool.fast}
	pool.Run(s.N*s.C, work, j)
	*j = dw9Job{}
	dw9Jobs.Put(j)
}

// dwDirectJob runs depthwise3x3 over (image, channel) planes with one
// column of left padding through amd64.DwS1P1Planes / DwS2P1Planes (the
// rows of DwS1P1 / DwS2P1, every plane of a run of channels in one call,
// each plane's rows in the runs dwSegs finds), which read the input rows
// in place: a padding column is a masked-off lane (+0), a
// padding row a row of zeros, so each output is the chain over the nine
// taps in row-major order from +0, padding taps included as FMA(0, w,
// acc): depthwiseInto's chain. The bias (-0 when there is none, which
// leaves every value as it is) and the epilogue's clamp are applied by
// the kernels as they store; with a residual the whole epilogue runs over
// the finished plane. Output rows are computed in order (rows of fewer
// than 8 outputs store 8 lanes, the next row overwriting the spill).
type dwDirectJob struct {
	s             *convSetup
	x, w, bias, y []float32
	ep            epi
	m             machine
}

var dwDirectJobs = sync.Pool{New: func() any { return new(dwDirectJob) }}

// dwDirectSetup returns the last output column at which an unmasked
// vector of DwS1P1 / DwS2P1 may start (its taps inside the row), their
// masks, and whether the direct kernels apply: one column of left
// padding, the unmasked vectors and the last one covering every output,
// and, for rows of 8 outputs or more, only the loads that the kernels
// mask (stride 1: the first vector's kx = 0 taps and the last one's kx =
// 2 taps; stride 2: the first vector's load A, the last one's B and B')
// reaching outside the row.
func dwDirectSetup(g *geom) (mid int, m amd64.DwMasks, ok bool) {
	W, OW, sw := g.in[1], g.out[1], g.stride[1]
	if g.padB[1] != 1 {
		return 0, m, false
	}
	// An unmasked vector at j reads columns j-1 .. j+8 (stride 1), 2j-1
	// .. 2j+15 (stride 2).
	mid = min(OW-8, W-9)
	if sw == 2 {
		mid = min(OW-8, (W-16)/2)
		if W < 16 {
			mid = -1
		}
	}
	valid := func(col int) int32 {
		if col >= 0 && col < W {
			return -1
		}
		return 0
	}
	for l := 0; l < 8; l++ {
		jl := OW - 8 + l
		if sw == 1 {
			for kx := 0; kx < 3; kx++ {
				m.First[kx][l], m.Last[kx][l] = valid(l-1+kx), valid(jl-1+kx)
			}
		} else {
			for i, o := range [4]int{-1, 7, 0, 8} {
				m.First[i][l], m.Last[i][l] = valid(o+l), valid(2*(OW-8)+o+l)
			}
		}
		if l < OW {
			m.Store[l] = -1
		}
	}
	full := func(v [8]int32) bool { return v == [8]int32{-1, -1, -1, -1, -1, -1, -1, -1} }
	ok = OW <= 16 || mid >= OW-16
	if OW >= 8 && sw == 1 {
		ok = ok && full(m.First[1]) && full(m.First[2]) && full(m.Last[0]) && full(m.Last[1])
	}
	if OW >= 8 && sw == 2 {
		ok = ok && full(m.First[1]) && full(m.First[2]) && full(m.First[3]) && full(m.Last[0]) && full(m.Last[2])
	}
	_, _, fits := dwSegs(g)
	return mid, m, ok && fits
}

// dwSegs returns the runs of output rows of a plane for DwS1P1Planes /
// DwS2P1Planes: rows with a padding tap row one at a time, the rows [a,
// b) whose three tap rows all lie inside the input in one run; ok is
// false when there would be more runs than DwPlanes holds.
func dwSegs(g *geom) (segs [6]amd64.DwSeg, n int, ok bool) {
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	sh, pt := g.stride[0], g.padB[0]
	a := min(OH, (pt+sh-1)/sh)
	b := a
	if H-3+pt >= 0 {
		b = max(a, min(OH, (H-3+pt)/sh+1))
	}
	// Rows of fewer than 8 outputs store 8 lanes, the lanes past the row
	// falling on the rows after it; a row whose lanes would pass the end
	// of its plane (into another worker's plane, or past the tensor) must
	// store under the mask, which the kernels apply to a run's last row
	// only: such rows [spill, OH) run one at a time, masked.
	spill := OH
	if OW < 8 {
		spill = 0
		if OH*OW >= 8 {
			spill = (OH*OW-8)/OW + 1
		}
	}
	for oy := 0; oy < OH; {
		rows := 1
		if oy == a && b > a {
			rows = b - a
		}
		if oy >= spill {
			rows = 1
		} else if oy+rows > spill {
			rows = spill - oy
		}
		if n == len(segs) {
			return segs, 0, false
		}
		sg := &segs[n]
		sg.OY, sg.Rows = oy, rows
		for ky := range sg.Off {
			sg.Off[ky] = -1
			if iy := oy*sh - pt + ky; iy >= 0 && iy < H {
				sg.Off[ky] = iy * W
			}
		}
		if oy+rows > spill {
			sg.MaskLast = 1
		}
		n++
		oy += rows
	}
	return segs, n, true
}

func (j *dwDirectJob) Run(lo0, hi0 int) {
	g := j.s.g
	mid, m, _ := dwDirectSetup(g)
	segs, nseg, _ := dwSegs(g)
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	zbuf := getF32(2*W + 64)
	clear(*zbuf)
	if dwZOK(j.m, g) {
		j.runZ(lo0, hi0, &(*zbuf)[16])
		putF32(zbuf)
		return
	}
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		lo, hi = j.ep.lo, j.ep.hi
	}
	C := j.s.C
	for nc := lo0; nc < hi0; {
		// planes [nc, e): consecutive channels of one image
		c := nc % C
		e := min(hi0, nc-c+C)
		e = j.ep.actRun(nc, e, OH*OW)
		_ = j.x[e*H*W-1]
		_ = j.y[e*OH*OW-1]
		_ = j.w[(c+e-nc)*9-1]
		p := amd64.DwPlanes{X: addr(&j.x[nc*H*W]), XStep: H * W, Y: addr(&j.y[nc*OH*OW]), YStep: OH * OW,
			W: addr(&j.w[c*9]), Bias: addr(&negZero), Planes: e - nc, Zero: &(*zbuf)[16],
			LDX: g.stride[0] * W, LDY: OW, N: OW, Mid: mid, M: &m, Lo: lo, Hi: hi, NSeg: nseg, Segs: segs}
		if j.bias != nil {
			_ = j.bias[c+e-nc-1]
			p.Bias, p.BStep = addr(&j.bias[c]), 1
		}
		if g.stride[1] == 1 {
			amd64.DwS1P1Planes(&p)
		} else {
			amd64.DwS2P1Planes(&p)
		}
		j.ep.planesDone(j.y, nc, e, OH*OW, late)
		nc = e
	}
	putF32(zbuf)
}

// dw9Job runs depthwise3x3 over (image, channel) planes through
// amd64.DwRows9. Each plane is first written zero-padded into a scratch
// plane: at column stride 1 as it is (rows wp floats apart), at column
// stride 2 split into its even and odd padded columns (two planes of wq
// columns), so that every tap of a row of outputs is a contiguous run:
// tap (ky, kx) of output (oy, ox) is padded (oy*sh+ky, ox*sw+kx), at
// stride 2 column ox + kx/2 of phase plane kx%2. Each output is the chain
// over the nine taps in row-major order from +0, padding taps included as
// FMA(0, w, acc): depthwiseInto's chain. The kernel then adds the bias
// (y = acc + B[c], convF32's addition; -0 when there is none, which
// leaves every value as it is) and the epilogue's clamp as it stores;
// with a residual the whole epilogue runs over the finished plane. Rows
// of fewer than 8 outputs are computed 8 wide into a scratch plane and
// copied out.
type dw9Job struct {
	s             *convSetup
	x, w, bias, y []float32
	ep            epi
	fast          bool // splitCols' vector path
}

var dw9Jobs = sync.Pool{New: func() any { return new(dw9Job) }}

// negZero is the bias of a convolution without one.
var negZero = float32(math.Copysign(0, -1))

func (j *dw9Job) Run(lo0, hi0 int) {
	g := j.s.g
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	sh, sw, pt, pl := g.stride[0], g.stride[1], g.padB[0], g.padB[1]
	n := max(OW, 8) // outputs computed per row
	hp := max(pt+H, (OH-1)*sh+3)
	var wp, planes int
	var off [9]int
	if sw == 1 {
		wp, planes = max(pl+W, n+2), 1
		for t := range off {
			off[t] = (t/3)*wp + t%3
		}
	} else {
		wp, planes = max((pl+W+1)/2, n+1), 2
		for t := range off {
			kx := t % 3
			off[t] = (kx%2)*hp*wp + (t/3)*wp + kx/2
		}
	}
	pbuf := getF32(planes * hp * wp)
	xp := *pbuf
	clear(xp)
	var tbuf *[]float32
	var tmp []float32
	if OW < 8 {
		tbuf = getF32(OH * 8)
		tmp = *tbuf
	}
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		lo, hi = j.ep.lo, j.ep.hi
	}
	// the last float the taps read: output (OH-1, n-1)'s
	_ = xp[max(off[7], off[8])+(OH-1)*sh*wp+n-1]
	for nc := lo0; nc < hi0; nc++ {
		c := nc % j.s.C
		xc := j.x[nc*H*W : (nc+1)*H*W]
		if sw == 1 {
			for iy := 0; iy < H; iy++ {
				copy(xp[(pt+iy)*wp+pl:(pt+iy)*wp+pl+W], xc[iy*W:(iy+1)*W])
			}
		} else {
			for iy := 0; iy < H; iy++ {
				r := (pt + iy) * wp
				splitCols(j.fast, xp[r:r+wp], xp[hp*wp+r:hp*wp+r+wp], xc[iy*W:(iy+1)*W], pl)
			}
		}
		_ = j.w[c*9+8]
		bp := &negZero
		if j.bias != nil {
			bp = &j.bias[c]
		}
		yc := j.y[nc*OH*OW : (nc+1)*OH*OW]
		if OW >= 8 {
			_ = yc[(OH-1)*OW+n-1]
			amd64.DwRows9(&xp[0], &off, sh*wp, &j.w[c*9], &yc[0], OW, OH, n, bp, lo, hi)
		} else {
			amd64.DwRows9(&xp[0], &off, sh*wp, &j.w[c*9], &tmp[0], 8, OH, n, bp, lo, hi)
			for oy := 0; oy < OH; oy++ {
				copy(yc[oy*OW:(oy+1)*OW], tmp[oy*8:oy*8+OW])
			}
		}
		if late {
			ep := j.ep.at(nc * OH * OW)
			ep.block(yc, OH*OW, 1, OH*OW)
		}
		j.ep.activate(yc, OH*OW, 1, OH*OW)
	}
	putF32(pbuf)
	if tbuf != nil {
		putF32(tbuf)
	}
}

// splitCols writes the row x, after pl columns of padding, into its even
// padded columns (ev[c/2] for padded column c even) and odd ones (od),
// through amd64.Even when fast.
func splitCols(fast bool, ev, od, x []float32, pl int) {
	// x[i] is padded column pl+i: even for i of pl's parity.
	a, b := ev[pl/2:], od[(pl+1)/2:] // a[k]: the k-th even column from pl
	if pl%2 == 1 {
		a, b = od[pl/2:], ev[(pl+1)/2:]
	}
	// a[k] = x[2k], b[k] = x[2k+1]
	ne, no := (len(x)+1)/2, len(x)/2
	ka, kb := 0, 0
	if fast {
		// Even reads 2n floats from its source
		if n := (len(x) / 2) &^ 7; n > 0 {
			amd64.Even(&a[0], &x[0], n)
			ka = n
		}
		if n := ((len(x) - 1) / 2) &^ 7; n > 0 {
			amd64.Even(&b[0], &x[1], n)
			kb = n
		}
	}
	for i := ka; i < ne; i++ {
		a[i] = x[2*i]
	}
	for i := kb; i < no; i++ {
		b[i] = x[2*i+1]
	}
}

// dwFlatMax is the largest plane (outputs) that dwFlatJob takes, and
// dwFlatW the narrowest row it leaves to the row kernels (from 8 outputs
// a row fills their vectors; at 14x14 the flat kernel measured no
// faster).
const (
	dwFlatMax = 256
	dwFlatW   = 8
)

// dwFlatOK reports whether dwFlatJob applies: AVX-512 (and not
// forced.noDwFlat, tests of the AVX2 kernels), stride 1 and one
// row and column of padding on each side (the output plane the input
// plane's shape), rows narrower than dwFlatW, a plane of at most
// dwFlatMax outputs.
func dwFlatOK(pool machine, g *geom) bool {
	return pool.z && !pool.f().noDwFlat && g.stride[0] == 1 && g.stride[1] == 1 &&
		g.padB[0] == 1 && g.padB[1] == 1 && g.padE[0] == 1 && g.padE[1] == 1 &&
		g.out[0] == g.in[0] && g.out[1] == g.in[1] && g.in[1] < dwFlatW && g.in[0]*g.in[1] <= dwFlatMax
}

// dwFlatJob runs depthwise3x3 over (image, channel) planes for dwFlatOK
// through amd64.DwS1P1FlatZ: each plane a flat run of outputs, 16 at a
// time, output o's tap (ky, kx) the input at o + (ky-1)*W + kx-1 where
// that lies inside the plane's row and column range, else +0 (masked).
// Each output is depthwiseInto's chain over the nine taps in row-major
// order from +0, padding taps included as FMA(0, w, acc); the bias (-0
// when there is none) and the clamp are applied as the kernel stores, a
// residual epilogue over the finished planes.
type dwFlatJob struct {
	s             *convSetup
	x, w, bias, y []float32
	ep            epi
}

var dwFlatJobs = sync.Pool{New: func() any { return new(dwFlatJob) }}

// dwFlatMasks fills p's masks, vector counts and row length for an H x W
// plane.
func dwFlatMasks(p *amd64.DwFlat, H, W int) {
	HW := H * W
	p.LD, p.NV = W, (HW+15)/16
	for v := 0; v < p.NV; v++ {
		for t := 0; t < 10; t++ {
			var m uint16
			for l := 0; l < 16; l++ {
				o := 16*v + l
				if o >= HW {
					continue
				}
				iy, ix := o/W+t/3-1, o%W+t%3-1
				if t == 9 || (iy >= 0 && iy < H && ix >= 0 && ix < W) {
					m |= 1 << l
				}
			}
			p.Masks[v][t] = m
		}
	}
}

func (j *dwFlatJob) Run(lo0, hi0 int) {
	g := j.s.g
	H, W := g.in[0], g.in[1]
	HW := H * W
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		lo, hi = j.ep.lo, j.ep.hi
	}
	var p amd64.DwFlat
	dwFlatMasks(&p, H, W)
	C := j.s.C
	for nc := lo0; nc < hi0; {
		// planes [nc, e): consecutive channels of one image
		c := nc % C
		e := min(hi0, nc-c+C)
		e = j.ep.actRun(nc, e, HW)
		_ = j.x[e*HW-1]
		_ = j.y[e*HW-1]
		_ = j.w[(c+e-nc)*9-1]
		p.X, p.Y, p.W, p.Bias, p.BStep = addr(&j.x[nc*HW]), addr(&j.y[nc*HW]), addr(&j.w[c*9]), addr(&negZero), 0
		p.Planes, p.Step, p.Lo, p.Hi = e-nc, HW, lo, hi
		if j.bias != nil {
			_ = j.bias[c+e-nc-1]
			p.Bias, p.BStep = addr(&j.bias[c]), 1
		}
		amd64.DwS1P1FlatZ(&p)
		j.ep.planesDone(j.y, nc, e, HW, late)
		nc = e
	}
}

// dwFlatS2OK reports whether dwFlatS2Job applies: AVX-512, stride 2 and
// one row and column of leading padding, input rows of at most 15 floats
// and output rows of at most 7 (two output rows' taps fit the lanes of two
// vectors), at most 16 output rows.
func dwFlatS2OK(pool machine, g *geom) bool {
	return pool.z && !pool.f().noDwFlat && g.stride[0] == 2 && g.stride[1] == 2 &&
		g.padB[0] == 1 && g.padB[1] == 1 && g.in[1] <= 15 && g.out[1] <= 7 && g.out[0] <= 16
}

// dwFlatS2Job runs depthwise3x3 over (image, channel) planes for
// dwFlatS2OK through amd64.DwS2P1FlatZ: two output rows per vector, output
// (oy, ox)'s tap (ky, kx) the input at (2oy-1+ky, 2ox-1+kx) where that
// lies inside the input, else +0 (masked). Each output is depthwiseInto's
// chain over the nine taps in row-major order from +0, padding taps
// included as FMA(0, w, acc); the bias (-0 when there is none) and the
// clamp are applied as the kernel stores, a residual epilogue over the
// finished planes.
type dwFlatS2Job struct {
	s             *convSetup
	x, w, bias, y []float32
	ep            epi
}

var dwFlatS2Jobs = sync.Pool{New: func() any { return new(dwFlatS2Job) }}

// dwFlatS2Masks fills p's indices, masks, vector count and row lengths for
// an H x W input plane and an OH x OW output plane.
func dwFlatS2Masks(p *amd64.DwFlatS2, H, W, OH, OW int) {
	p.LD, p.NV, p.OW2 = W, (OH+1)/2, 2*OW
	for kx := 0; kx < 3; kx++ {
		for l := 0; l < 16; l++ {
			switch {
			case l < OW:
				p.Idx[kx][l] = int32(2*l + kx)
			case l < 2*OW:
				p.Idx[kx][l] = int32(16 + 2*(l-OW) + kx)
			default:
				p.Idx[kx][l] = 0
			}
		}
	}
	cols := uint16(1<<(W+1) - 2) // lanes 1 .. W: columns 0 .. W-1
	for v := 0; v < p.NV; v++ {
		for k := 0; k < 5; k++ {
			p.Masks[v][k] = 0
			if iy := 4*v - 1 + k; iy >= 0 && iy < H {
				p.Masks[v][k] = cols
			}
		}
		rows := min(2, OH-2*v)
		p.Masks[v][5] = uint16(1<<(rows*OW) - 1)
	}
}

func (j *dwFlatS2Job) Run(lo0, hi0 int) {
	g := j.s.g
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	HW, OHW := H*W, OH*OW
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		lo, hi = j.ep.lo, j.ep.hi
	}
	var p amd64.DwFlatS2
	dwFlatS2Masks(&p, H, W, OH, OW)
	C := j.s.C
	for nc := lo0; nc < hi0; {
		// planes [nc, e): consecutive channels of one image
		c := nc % C
		e := min(hi0, nc-c+C)
		e = j.ep.actRun(nc, e, OHW)
		_ = j.x[e*HW-1]
		_ = j.y[e*OHW-1]
		_ = j.w[(c+e-nc)*9-1]
		p.X, p.Y, p.W, p.Bias, p.BStep = addr(&j.x[nc*HW]), addr(&j.y[nc*OHW]), addr(&j.w[c*9]), addr(&negZero), 0
		p.Planes, p.XStep, p.YStep, p.Lo, p.Hi = e-nc, HW, OHW, lo, hi
		if j.bias != nil {
			_ = j.bias[c+e-nc-1]
			p.Bias, p.BStep = addr(&j.bias[c]), 1
		}
		amd64.DwS2P1FlatZ(&p)
		j.ep.planesDone(j.y, nc, e, OHW, late)
		nc = e
	}
}

// dwZOK reports whether dwDirectJob runs its rows through
// amd64.DwS2P1PlanesZ: AVX-512 (and not forced.noDwZ, tests of the AVX2
// kernels), stride 2 and one column of left padding,
// rows of more than 8 outputs (narrower ones would leave half of a vector
// idle) and at most 256, the rows' runs fitting amd64.DwPlanes.Segs
// (dwSegs).
func dwZOK(pool machine, g *geom) bool {
	_, _, fits := dwSegs(g)
	return pool.z && !pool.f().noDwZ && g.stride[1] == 2 && g.padB[1] == 1 && g.out[1] > 8 && g.out[1] <= 16*16 && fits
}

// dwMasksZ returns amd64.DwS2P1Z's masks for rows of W inputs and OW
// outputs (OW <= 256).
func dwMasksZ(W, OW int) (m amd64.DwMasksZ) {
	m.NV = (OW + 15) / 16
	for v := 0; v < m.NV; v++ {
		for i, o := range [4]int{-1, 15, 0, 16} {
			for l := 0; l < 16; l++ {
				if col := 32*v + o + l; col >= 0 && col < W {
					m.Masks[v][i] |= 1 << l
				}
			}
		}
		for l := 0; l < 16 && 16*v+l < OW; l++ {
			m.Masks[v][4] |= 1 << l
		}
	}
	return m
}

// runZ is Run through amd64.DwS2P1PlanesZ (dwZOK): the rows of every
// plane of a run of channels in one call, in the runs dwSegs finds, a
// padding tap row read from zero (a row of zeros, readable W floats on):
// the same chains, epilogue and stores.
//
// forced.dwZRows makes it call amd64.DwS2P1Z per plane and run of rows
// instead (tests of the one-call kernel, which ExpandDepthwise may call).
func (j *dwDirectJob) runZ(lo0, hi0 int, zero *float32) {
	if j.m.f().dwZRows {
		j.runZRows(lo0, hi0, zero)
		return
	}
	g := j.s.g
	segs, nseg, _ := dwSegs(g)
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	m := dwMasksZ(W, OW)
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		lo, hi = j.ep.lo, j.ep.hi
	}
	C := j.s.C
	for nc := lo0; nc < hi0; {
		// planes [nc, e): consecutive channels of one image
		c := nc % C
		e := min(hi0, nc-c+C)
		e = j.ep.actRun(nc, e, OH*OW)
		_ = j.x[e*H*W-1]
		_ = j.y[e*OH*OW-1]
		_ = j.w[(c+e-nc)*9-1]
		p := amd64.DwPlanes{X: addr(&j.x[nc*H*W]), XStep: H * W, Y: addr(&j.y[nc*OH*OW]), YStep: OH * OW,
			W: addr(&j.w[c*9]), Bias: addr(&negZero), Planes: e - nc, Zero: zero,
			LDX: g.stride[0] * W, LDY: OW, N: OW, Lo: lo, Hi: hi, NSeg: nseg, Segs: segs}
		if j.bias != nil {
			_ = j.bias[c+e-nc-1]
			p.Bias, p.BStep = addr(&j.bias[c]), 1
		}
		amd64.DwS2P1PlanesZ(&p, &m)
		j.ep.planesDone(j.y, nc, e, OH*OW, late)
		nc = e
	}
}

// runZRows is runZ through amd64.DwS2P1Z, one call per plane and run of
// rows.
func (j *dwDirectJob) runZRows(lo0, hi0 int, zero *float32) {
	g := j.s.g
	segs, nseg, _ := dwSegs(g)
	H, W, OH, OW := g.in[0], g.in[1], g.out[0], g.out[1]
	m := dwMasksZ(W, OW)
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	late := j.ep.on && j.ep.r != nil
	if j.ep.on && !late {
		lo, hi = j.ep.lo, j.ep.hi
	}
	ldx := g.stride[0] * W
	for nc := lo0; nc < hi0; nc++ {
		c := nc % j.s.C
		xc := j.x[nc*H*W : (nc+1)*H*W]
		yc := j.y[nc*OH*OW : (nc+1)*OH*OW]
		_ = j.w[c*9+8]
		bp := &negZero
		if j.bias != nil {
			bp = &j.bias[c]
		}
		for _, sg := range segs[:nseg] {
			var r [3]*float32
			for ky, off := range sg.Off {
				r[ky] = zero
				if off >= 0 {
					_ = xc[off+(sg.Rows-1)*ldx+W-1]
					r[ky] = &xc[off]
				}
			}
			_ = yc[(sg.OY+sg.Rows)*OW-1]
			amd64.DwS2P1Z(r[0], r[1], r[2], ldx, sg.Rows, &j.w[c*9], &yc[sg.OY*OW], OW, &m, bp, lo, hi)
		}
		if late {
			ep := j.ep.at(nc * OH * OW)
			ep.block(yc, OH*OW, 1, OH*OW)
		}
		j.ep.activate(yc, OH*OW, 1, OH*OW)
	}
}

// addr is v's address for the kernels' plane descriptors (amd64.DwPlanes,
// DwFlat, DwFlatS2), whose assembly advances it past the arrays' ends: an
// address, not a Go pointer. The jobs keep the arrays alive.
func addr(v *float32) uintptr { return uintptr(unsafe.Pointer(v)) }
