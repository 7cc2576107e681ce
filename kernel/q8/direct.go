package q8

// The AVX-512 direct convolution (the orientation of the float32
// conv.direct tactic): 16 output channels are the int32 lanes of one zmm
// accumulator, one accumulator per output pixel of a tile of R rows by T
// pixels (R·T ≤ 16), and the pixels' inputs are broadcast as int16 pairs.
// The quantized channel group is copied once into a zero-padded buffer
// whose channels are interleaved in pairs ([Cg/2][Hp][Wp][2] int16, an odd
// channel count padded with a zero channel), so that a k-pair is two
// channels at one tap (c, ky, kx) and its int16 pair one aligned 32-bit
// word; weights are packed once per layer as int8 [Mg/16][k-pairs][16][2]
// (channels past Mg and the padding channel zero), widened to int16 pairs
// by the kernel (VPMOVSXBW). The k-pairs' byte
// offsets into the buffer (c/2, ky, kx) are a table, so strides, pads and
// dilations are only addresses. Every sum is the same exact int32 as the
// GEMM path's (integer addition in any order), and the epilogue (epi16,
// after an in-register transpose back to channel rows) is epilogueRow's
// sequence of float32 operations, so the output bits are those of the
// portable path.

// dtileMax is the number of pixels (accumulators) of a tile.
const dtileMax = 16

// useDirect reports whether a convolution runs through the direct kernels:
// the AVX-512 path is on (and no test turns it off: forced.noDirectQ8),
// the column stride is 1 or 2, the groups' output
// channels fill 16-lane blocks to at least 7/8, and rows are wide enough
// to fill the tiles.
func (g *geom2) useDirect(pool machine) bool {
	return !pool.f().noDirectQ8 && pool.fast && pool.vnni && hasDirect && (g.sw == 1 || g.sw == 2) &&
		g.Mg >= 16 && 7*16*((g.Mg+15)/16) <= 8*g.Mg && g.OW >= 5 && g.OH >= 1
}

// dgrid is the geometry of the padded, pair-interleaved input and the
// tiling of the output.
type dgrid struct {
	cp, Hp, Wp int // channel pairs, padded rows and row length
	kp         int // k-pairs
	// Tiles: R2 (OW ≤ 8) pairs rows of OW pixels; otherwise each row is
	// split into nseg segments of at most tseg pixels.
	r2         bool
	nseg, tseg int
	ntiles     int
}

func (g *geom2) dgrid() dgrid {
	d := dgrid{cp: (g.Cg + 1) / 2}
	d.Hp = (g.OH-1)*g.sh + (g.KH-1)*g.dh + 1
	d.Wp = (g.OW-1)*g.sw + (g.KW-1)*g.dw + 1
	d.kp = d.cp * g.KH * g.KW
	if g.OW <= dtileMax/2 {
		d.r2 = true
		d.ntiles = (g.OH + 1) / 2
		return d
	}
	d.nseg = (g.OW + dtileMax - 1) / dtileMax
	d.tseg = (g.OW + d.nseg - 1) / d.nseg
	d.ntiles = g.OH * d.nseg
	return d
}

// tile returns tile u's first output row and column, rows and pixels.
func (d *dgrid) tile(g *geom2, u int) (oy, ox, R, T int) {
	if d.r2 {
		oy = 2 * u
		return oy, 0, min(2, g.OH-oy), g.OW
	}
	oy, s := u/d.nseg, u%d.nseg
	ox = s * d.tseg
	return oy, ox, 1, min(d.tseg, g.OW-ox)
}

// dpacked returns the weights packed for the direct kernels, per group
// (packed at first use).
func (l *layer) dpacked(g *geom2) [][]int8 {
	l.dOnce.Do(func() {
		wd := l.w.Data.([]int8)
		K, cp := g.K(), (g.Cg+1)/2
		kp := cp * g.KH * g.KW
		nb := (g.Mg + 15) / 16
		for gi := 0; gi < g.G; gi++ {
			p := make([]int8, nb*kp*32)
			for m := 0; m < g.Mg; m++ {
				wm := wd[(gi*g.Mg+m)*K : (gi*g.Mg+m+1)*K]
				b, j := m/16, m%16
				for c := 0; c < g.Cg; c++ {
					for t := 0; t < g.KH*g.KW; t++ {
						kk := (c/2)*g.KH*g.KW + t
						p[(b*kp+kk)*32+2*j+c&1] = wm[c*g.KH*g.KW+t]
					}
				}
			}
			l.dpack = append(l.dpack, p)
		}
	})
	return l.dpack
}

// padPairs quantizes channel group xg ([Cg,H,W] float32) into xp,
// pair-interleaved and zero-padded (as quantize would, then copied), and
// writes the k-pairs' byte offsets into offs; zero holds at least H·W
// zeros (the odd channel's partner).
func (g *geom2) padPairs(d *dgrid, xg src, inv float32, xp []int16, zero []float32, offs []int) {
	HW := g.H * g.W
	n := min(g.W, d.Wp-g.pl)
	rows := min(g.H, d.Hp-g.pt)
	plane := g.pt == 0 && g.pl == 0 && d.Wp == g.W && d.Hp <= g.H
	if !plane {
		clear(xp)
	}
	for cp := 0; cp < d.cp && n > 0 && rows > 0; cp++ {
		if xg.u != nil {
			g.padPairsU8(d, xg.u, xp, cp, n, rows, plane)
			continue
		}
		a := xg.f[2*cp*HW : (2*cp+1)*HW]
		var b []float32
		if 2*cp+1 < g.Cg {
			b = xg.f[(2*cp+1)*HW : (2*cp+2)*HW]
		} else {
			b = zero[:HW]
		}
		if plane {
			// Every value of the plane is written: one run.
			m := d.Hp * d.Wp
			dst := xp[cp*m*2 : (cp+1)*m*2]
			_, _ = a[m-1], b[m-1]
			qzip(&dst[0], &a[0], &b[0], inv, m)
			continue
		}
		for y := 0; y < rows; y++ {
			dst := xp[((cp*d.Hp+y+g.pt)*d.Wp+g.pl)*2:]
			ar, br := a[y*g.W:y*g.W+n], b[y*g.W:y*g.W+n]
			_ = dst[2*n-1]
			qzip(&dst[0], &ar[0], &br[0], inv, n)
		}
	}
	kk := 0
	for cp := 0; cp < d.cp; cp++ {
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				offs[kk] = ((cp*d.Hp+ky*g.dh)*d.Wp + kx*g.dw) * 4
				kk++
			}
		}
	}
}

// computeDirect runs the convolution through the direct kernels (x: the
// float32 input, quantized while it is padded).
func (l *layer) computeDirect(pool machine, g *geom2, x src, y []float32, p post, sc *scratch) {
	d := g.dgrid()
	w := l.dpacked(g)
	P := g.P()
	xp := *grow16(&sc.ph, d.cp*d.Hp*d.Wp*2)
	var zero []float32
	if g.Cg%2 == 1 {
		zero = *grow32f(&sc.zero, g.H*g.W)
		clear(zero)
	}
	offs := *growInt(&sc.offs, d.kp)
	j := &sc.dconv
	for ni := 0; ni < g.N; ni++ {
		for gi := 0; gi < g.G; gi++ {
			xg := x.sub((ni*g.C+gi*g.Cg)*g.H*g.W, (ni*g.C+(gi+1)*g.Cg)*g.H*g.W)
			g.padPairs(&d, xg, l.inv, xp, zero, offs)
			o := (ni*g.M + gi*g.Mg) * P
			mult, bias, res := l.groupEpi(p, gi, g.Mg, o, P)
			*j = dconvJob{l: l, g: g, d: d, w: w[gi], xp: xp, offs: offs,
				y: y[o : o+g.Mg*P], mult: mult, bias: bias, res: res, relu: p.relu, act: p.act, twins: pool.twins}
			nb := (g.Mg + 15) / 16
			pool.Run(nb*d.ntiles, g.Mg*g.K()*P, j)
			*j = dconvJob{}
		}
	}
}

// groupEpi returns group gi's per-channel multipliers and biases (nil
// without a bias) and its residual (nil without one): Mg output channels
// of P positions from output offset o.
func (l *layer) groupEpi(p post, gi, Mg, o, P int) (mult, bias, res []float32) {
	mult = l.mult[gi*Mg : (gi+1)*Mg]
	if l.bias != nil {
		bias = l.bias[gi*Mg : (gi+1)*Mg]
	}
	if p.res != nil {
		res = p.res[o : o+Mg*P]
	}
	return mult, bias, res
}

func grow32f(b *[]float32, n int) *[]float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	*b = (*b)[:n]
	return b
}

// dconvJob computes units [lo, hi) of (16-channel block, tile), block
// major.
type dconvJob struct {
	l          *layer
	g          *geom2
	d          dgrid
	w          []int8
	xp         []int16
	offs       []int
	y          []float32
	mult, bias []float32
	res        []float32
	relu       bool
	act        actor
	twins      twins
	// The quad tiles (vnni_direct.go): xq and qinit set, xp and w's
	// layout theirs.
	xq    []uint8
	qinit []int32
}

var zeros16 [16]float32

// activate applies the activation to pixels [p0, p1) of 16-channel block
// b's rows (nothing for b < 0).
func (j *dconvJob) activate(b, p0, p1 int) {
	if b < 0 || p1 <= p0 {
		return
	}
	P := j.g.P()
	for m := 16 * b; m < min(16*b+16, j.g.Mg); m++ {
		j.act.apply(j.twins, j.y[m*P+p0:m*P+p1])
	}
}

func (j *dconvJob) Run(lo, hi int) {
	g, d := j.g, &j.d
	sc := j.l.getScratch()
	defer j.l.putScratch(sc)
	acc := *grow32(&sc.acc, dtileMax*16)
	P := g.P()
	s := g.sw - 1
	relu := 0
	if j.relu {
		relu = 1
	}
	last := j.offs[d.kp-1] / 2
	actB, actStart, actEnd := -1, 0, 0
	defer func() { j.activate(actB, actStart, actEnd) }()
	for u := lo; u < hi; u++ {
		b := u / d.ntiles
		oy, ox, R, T := d.tile(g, u%d.ntiles)
		if j.xq != nil {
			j.quadTile(b, oy, ox, R, T, acc)
		} else {
			i0 := (oy*g.sh*d.Wp + ox*g.sw) * 2
			i1 := i0
			if R == 2 {
				i1 = i0 + g.sh*d.Wp*2
			}
			// Bounds: the farthest pair the tile reads.
			_ = j.xp[i1+last+(T-1)*g.sw*2+1]
			w := j.w[b*d.kp*32 : (b+1)*d.kp*32]
			dq8Tiles[s][R-1][T](d.kp, &w[0], &j.xp[i0], &j.xp[i1], &j.offs[0], &acc[0])
		}
		rows := min(16, g.Mg-16*b)
		p0 := oy*g.OW + ox
		n := R * T
		o := 16*b*P + p0
		_ = j.y[o+(rows-1)*P+n-1]
		_ = j.mult[16*b+rows-1]
		bias := &zeros16[0]
		if j.bias != nil {
			bias = &j.bias[16*b]
		}
		var res *float32
		if j.res != nil {
			_ = j.res[o+(rows-1)*P+n-1]
			res = &j.res[o]
		}
		epi16(&acc[0], &j.y[o], P, n, rows, &j.mult[16*b], bias, res, relu)
		if j.act.on() {
			// The activation runs over runs of consecutive tiles' pixels
			// (one call per tile would cost more than the activation).
			if b != actB || p0 != actEnd {
				j.activate(actB, actStart, actEnd)
				actB, actStart = b, p0
			}
			actEnd = p0 + n
			if actEnd-actStart >= 256 {
				j.activate(actB, actStart, actEnd)
				actStart = actEnd
			}
		}
	}
}
