package q8

// The int8 depthwise convolution (one input channel a group, one output
// channel a group; kernels up to dwMaxK, strides 1 or 2, no dilation):
// each channel plane is copied in u8 form (q + 128; a chained input's
// bytes as they are, a float32 input quantized) into a plane padded with
// the byte 128 (the value 0), and each output is init + Σ w·u over the
// taps, init = −128·Σ w, which is the exact Σ w·q of every other path.
// Where the CPU has AVX512_VNNI and AVX512_VBMI, dwBlocks computes 16
// outputs of a row a zmm: for each kernel row and quad of kernel columns,
// VPERMB gathers each lane's four consecutive (stride 1) or every other
// (stride 2, four bytes from 2j) input bytes out of one 64-byte load, and
// VPDPBUSD multiplies them with the quad's four signed weights (zero past
// the kernel's width), four taps a lane and instruction; the portable twin
// sums the taps in Go. The sums are the same integers, and the epilogue is
// epilogueRow's, so the bits do not depend on the path.

// dwMaxK bounds the kernel height and width the depthwise path takes.
const dwMaxK = 8

// DepthwiseOK reports whether the int8 depthwise path takes a depthwise
// convolution of kernel kh×kw, strides sh, sw and dilations dh, dw.
func DepthwiseOK(kh, kw, sh, sw, dh, dw int) bool {
	return kh >= 1 && kw >= 1 && kh <= dwMaxK && kw <= dwMaxK && (sh == 1 || sh == 2) && (sw == 1 || sw == 2) && dh == 1 && dw == 1
}

func (g *geom2) depthwise() bool {
	return g.Cg == 1 && g.Mg == 1 && DepthwiseOK(g.KH, g.KW, g.sh, g.sw, g.dh, g.dw)
}

// dwPack is a depthwise layer's weights: per channel nt = KH·⌈KW/4⌉ tap
// dwords (kernel row ky, columns 4kq..4kq+3 as four signed bytes, zero
// past KW) and the channel's correction.
type dwPack struct {
	w    []int32
	init []int32
	nt   int
}

func (l *layer) dwPacked(g *geom2) *dwPack {
	l.dwOnce.Do(func() {
		wd := l.w.Data.([]int8)
		kq := (g.KW + 3) / 4
		d := &dwPack{nt: g.KH * kq, w: make([]int32, g.M*g.KH*kq), init: make([]int32, g.M)}
		for c := 0; c < g.M; c++ {
			var s int32
			for ky := 0; ky < g.KH; ky++ {
				for kx := 0; kx < g.KW; kx++ {
					v := wd[(c*g.KH+ky)*g.KW+kx]
					s += int32(v)
					t := c*d.nt + ky*kq + kx/4
					d.w[t] |= int32(uint32(uint8(v)) << (8 * (kx % 4)))
				}
			}
			d.init[c] = -128 * s
		}
		l.dwpack = d
	})
	return l.dwpack
}

// dwIdx are dwBlocks' VPERMB indices for strides 1 and 2.
var dwIdx = func() (t [2][64]uint8) {
	for s := 0; s < 2; s++ {
		for j := 0; j < 16; j++ {
			for e := 0; e < 4; e++ {
				t[s][4*j+e] = uint8((s+1)*j + e)
			}
		}
	}
	return t
}()

// dwGrid is the padded plane's geometry and the blocks' offsets.
type dwGrid struct {
	Hp, Wp, nbr, nb   int
	offs, toff, aoffs []int // aoffs: where block i's sums go (oy·OW + 16b)
	plane             int   // bytes of a padded plane, with the 64 a load may read past its end
}

func (g *geom2) dwGrid(offs, toff, aoffs []int) dwGrid {
	d := dwGrid{Hp: (g.OH-1)*g.sh + g.KH, Wp: (g.OW-1)*g.sw + g.KW, nbr: (g.OW + 15) / 16}
	d.nb = g.OH * d.nbr
	d.offs, d.toff, d.aoffs = offs[:(d.nb+3)&^3], toff[:g.KH*((g.KW+3)/4)], aoffs[:(d.nb+3)&^3]
	for oy := 0; oy < g.OH; oy++ {
		for b := 0; b < d.nbr; b++ {
			d.offs[oy*d.nbr+b] = oy*g.sh*d.Wp + 16*b*g.sw
			d.aoffs[oy*d.nbr+b] = oy*g.OW + 16*b
		}
	}
	for i := d.nb; i < len(d.offs); i++ {
		d.offs[i], d.aoffs[i] = d.offs[d.nb-1], d.aoffs[d.nb-1]
	}
	kq := (g.KW + 3) / 4
	for ky := 0; ky < g.KH; ky++ {
		for q := 0; q < kq; q++ {
			d.toff[ky*kq+q] = ky*d.Wp + 4*q
		}
	}
	d.plane = d.offs[d.nb-1] + d.toff[len(d.toff)-1] + 64
	return d
}

// computeDW runs a depthwise convolution, one job unit a channel plane.
func (l *layer) computeDW(pool machine, g *geom2, x src, y []float32, p post, sc *scratch) {
	if g.OH < 1 || g.OW < 1 {
		return
	}
	nbr := (g.OW + 15) / 16
	offs := *growInt(&sc.offs, (g.OH*nbr+3)&^3)
	toff := *growInt(&sc.toff, g.KH*((g.KW+3)/4))
	aoffs := *growInt(&sc.aoffs, len(offs))
	d := g.dwGrid(offs, toff, aoffs)
	j := &sc.dwj
	*j = dwJob{l: l, g: g, d: d, pk: l.dwPacked(g), x: x, y: y, p: p, twins: pool.twins}
	pool.Run(g.N*g.C, g.N*g.C*g.P()*g.KH*g.KW, j)
	*j = dwJob{}
}

// dwJob computes channel planes [lo, hi) (of N·C).
type dwJob struct {
	l     *layer
	g     *geom2
	d     dwGrid
	pk    *dwPack
	x     src
	y     []float32
	p     post
	twins twins
}

func (j *dwJob) Run(lo, hi int) {
	g, d := j.g, &j.d
	sc := j.l.getScratch()
	defer j.l.putScratch(sc)
	plane := *grow8(&sc.plane, d.plane)
	acc := *grow32(&sc.acc, g.P()+16)
	HW, P := g.H*g.W, g.P()
	n := min(g.W, d.Wp-g.pl)
	rows := min(g.H, d.Hp-g.pt)
	// The border's bytes are 128 (the value 0); the rows copied below
	// overwrite the rest, plane after plane.
	plane[0] = 128
	for k := 1; k < len(plane); k *= 2 {
		copy(plane[k:], plane[:k])
	}
	for i := lo; i < hi; i++ {
		c := i % g.C
		// The channel's u8 plane: a chained input's bytes, or the
		// float32 plane quantized at once (runs of 16).
		xs := j.x.u
		if xs != nil {
			xs = xs[i*HW : (i+1)*HW]
		} else {
			xs = *grow8(&sc.gu, HW)
			quantizeU8(j.twins, xs, j.x.f[i*HW:(i+1)*HW], j.l.inv)
		}
		if n > 0 && rows > 0 {
			o := g.pt*d.Wp + g.pl
			if j.twins.vnni && hasDW {
				_, _ = plane[o+(rows-1)*d.Wp+n-1], xs[(rows-1)*g.W+n-1]
				copyRows(&plane[o], d.Wp, &xs[0], g.W, n, rows)
			} else {
				for yy := 0; yy < rows; yy++ {
					copy(plane[o+yy*d.Wp:][:n], xs[yy*g.W:yy*g.W+n])
				}
			}
		}
		pk := j.pk
		w := pk.w[c*pk.nt : (c+1)*pk.nt]
		if j.twins.vnni && hasDW {
			dwBlocks(len(d.offs), &plane[0], &d.offs[0], &d.toff[0], &w[0], pk.nt, &dwIdx[g.sw-1][0], pk.init[c], &acc[0], &d.aoffs[0])
		} else {
			j.portable(plane, w, pk.init[c], acc)
		}
		// The rows' sums lie side by side: one epilogue over the plane.
		sums := acc[:P]
		var bias float32
		if j.l.bias != nil {
			bias = j.l.bias[c]
		}
		var r []float32
		if j.p.res != nil {
			r = j.p.res[i*P : (i+1)*P]
		}
		yc := j.y[i*P : (i+1)*P]
		epilogueRow(j.twins, yc, sums, j.l.mult[c], bias, r, j.p.relu)
		j.p.act.apply(j.twins, yc)
	}
}

// portable is dwBlocks' twin: the sums into acc[oy·OW + ox].
func (j *dwJob) portable(plane []uint8, w []int32, init int32, acc []int32) {
	g, d := j.g, &j.d
	kq := (g.KW + 3) / 4
	for oy := 0; oy < g.OH; oy++ {
		for ox := 0; ox < g.OW; ox++ {
			s := init
			for ky := 0; ky < g.KH; ky++ {
				row := plane[(oy*g.sh+ky)*d.Wp+ox*g.sw:]
				for kx := 0; kx < g.KW; kx++ {
					s += int32(int8(w[ky*kq+kx/4]>>(8*(kx%4)))) * int32(row[kx])
				}
			}
			acc[oy*g.OW+ox] = s
		}
	}
}
