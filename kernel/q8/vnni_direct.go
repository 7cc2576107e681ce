package q8

// The direct convolution on channel quads (VPDPBUSD): direct.go's tiling
// and epilogue, but the quantized channel group is copied into a
// zero-padded buffer interleaved in quads of channels, shifted to the
// unsigned operand ([Cg/4][Hp][Wp][4] bytes of q + 128; the padding, the
// value 0, is the byte 128, and a partial last quad's missing channels
// too, against zero weights), and the weights are packed once per layer
// as int8 [Mg/16][k-quads][16][4] (channels past Mg zero). A k-quad is
// four channels at one tap (c, ky, kx), its four bytes one aligned 32-bit
// word. Each accumulator starts from its channel's correction
// −128·Σ w (over every tap, the padded ones included: they read 128), so
// it ends at the exact Σ w·q, the sum of every other path; the epilogue is
// epi16, as in direct.go. Four products per lane and instruction instead
// of VPDPWSSD's two: half the multiply-adds and half the broadcasts.

// useQuad reports whether a convolution runs through the quad tiles: where
// the pair tiles would (useDirect), but with the groups' output channels
// filling their 16-lane blocks only to half (24 or 40 channels: the quad
// tiles' idle lanes still cost less than the GEMM), unless a test turns
// them off.
func (g *geom2) useQuad(pool machine) bool {
	return !pool.f().noQuadQ8 && !pool.f().noDirectQ8 && pool.fast && pool.vnni && hasDirect && (g.sw == 1 || g.sw == 2) &&
		g.Mg >= 8 && 16*((g.Mg+15)/16) <= 2*g.Mg && g.OW >= 5 && g.OH >= 1
}

// qgrid is dgrid with cp counting channel quads and kp k-quads.
func (g *geom2) qgrid() dgrid {
	d := g.dgrid()
	d.cp = (g.Cg + 3) / 4
	d.kp = d.cp * g.KH * g.KW
	return d
}

// qpacked returns the weights packed for the quad tiles and the channels'
// corrections, per group (packed at first use).
func (l *layer) qpacked(g *geom2) ([][]int8, [][]int32) {
	l.qOnce.Do(func() {
		wd := l.w.Data.([]int8)
		K, cq := g.K(), (g.Cg+3)/4
		kq := cq * g.KH * g.KW
		nb := (g.Mg + 15) / 16
		for gi := 0; gi < g.G; gi++ {
			p := make([]int8, nb*kq*64)
			init := make([]int32, nb*16)
			for m := 0; m < g.Mg; m++ {
				wm := wd[(gi*g.Mg+m)*K : (gi*g.Mg+m+1)*K]
				b, j := m/16, m%16
				var s int32
				for c := 0; c < g.Cg; c++ {
					for t := 0; t < g.KH*g.KW; t++ {
						kk := (c/4)*g.KH*g.KW + t
						v := wm[c*g.KH*g.KW+t]
						p[(b*kq+kk)*64+4*j+c&3] = v
						s += int32(v)
					}
				}
				init[m] = -128 * s
			}
			l.qpack = append(l.qpack, p)
			l.qinit = append(l.qinit, init)
		}
	})
	return l.qpack, l.qinit
}

// padQuads quantizes channel group xg ([Cg,H,W] float32) into xq, quad
// interleaved, shifted and padded (see above), and writes the k-quads'
// byte offsets into offs; four holds 4·W floats for a partial quad's rows,
// plane 4·H·W bytes for a plane of narrow rows.
func (g *geom2) padQuads(c twins, d *dgrid, xg src, inv float32, xq, plane []uint8, four []float32, four8 []uint8, offs []int) {
	HW := g.H * g.W
	n := min(g.W, d.Wp-g.pl)
	rows := min(g.H, d.Hp-g.pt)
	if len(xq) > 0 {
		xq[0] = 128
		for i := 1; i < len(xq); i *= 2 {
			copy(xq[i:], xq[:i])
		}
	}
	for cq := 0; cq < d.cp && n > 0 && rows > 0; cq++ {
		if c.vnni && n < 16 && n == g.W && HW >= 16 && 4*cq+3 < g.Cg {
			// Narrow rows (7×7 maps): the whole plane's quads at once
			// into plane, then each row into place.
			quadRowSrc(c, plane[:4*HW], xg.from(4*cq*HW), HW, HW, inv)
			for y := 0; y < rows; y++ {
				copy(xq[((cq*d.Hp+y+g.pt)*d.Wp+g.pl)*4:][:4*n], plane[4*y*g.W:])
			}
			continue
		}
		for y := 0; y < rows; y++ {
			dst := xq[((cq*d.Hp+y+g.pt)*d.Wp+g.pl)*4:]
			s, ld := xg.from(4*cq*HW+y*g.W), HW
			if 4*cq+3 >= g.Cg {
				// A partial quad: its rows, then zero rows.
				s, ld = g.fourRows(xg, cq, y, four, four8), g.W
			}
			quadRowSrc(c, dst[:4*n], s, ld, n, inv)
		}
	}
	kk := 0
	for cq := 0; cq < d.cp; cq++ {
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				offs[kk] = ((cq*d.Hp+ky*g.dh)*d.Wp + kx*g.dw) * 4
				kk++
			}
		}
	}
}

// quadRow writes dst[4j+e] = u8(src[e·ld + j]) for j < n, e < 4: packQuad
// over whole 16s and, for a ragged end, once more over the last 16 (the
// overlap is written twice with the same bytes); the portable loop below
// 16.
func quadRow(c twins, dst []uint8, src []float32, ld, n int, inv float32) {
	j := 0
	if c.vnni && n >= 16 {
		n16 := n &^ 15
		_, _ = src[3*ld+n-1], dst[4*n-1]
		packQuad(&dst[0], &src[0], ld, inv, n16)
		if n16 < n {
			packQuad(&dst[4*(n-16)], &src[n-16], ld, inv, 16)
		}
		j = n
	} else if c.s7 && n >= 8 {
		n8 := n &^ 7
		_, _ = src[3*ld+n-1], dst[4*n-1]
		q7packQuad(&dst[0], &src[0], ld, inv, n8)
		if n8 < n {
			q7packQuad(&dst[4*(n-8)], &src[n-8], ld, inv, 8)
		}
		j = n
	}
	for ; j < n; j++ {
		for e := 0; e < 4; e++ {
			dst[4*j+e] = uint8(quantize1(src[e*ld+j], inv) + 128)
		}
	}
}

// computeQuad runs the convolution through the quad tiles.
func (l *layer) computeQuad(pool machine, g *geom2, x src, y []float32, p post, sc *scratch) {
	d := g.qgrid()
	w, init := l.qpacked(g)
	P := g.P()
	xq := *grow8(&sc.xu, d.cp*d.Hp*d.Wp*4)
	four := *grow32f(&sc.zero, 4*g.W)
	four8 := *grow8(&sc.gu, 4*g.W)
	plane := *grow8(&sc.plane, 4*g.H*g.W)
	offs := *growInt(&sc.offs, d.kp)
	j := &sc.dconv
	for ni := 0; ni < g.N; ni++ {
		for gi := 0; gi < g.G; gi++ {
			xg := x.sub((ni*g.C+gi*g.Cg)*g.H*g.W, (ni*g.C+(gi+1)*g.Cg)*g.H*g.W)
			g.padQuads(pool.twins, &d, xg, l.inv, xq, plane, four, four8, offs)
			o := (ni*g.M + gi*g.Mg) * P
			mult, bias, res := l.groupEpi(p, gi, g.Mg, o, P)
			*j = dconvJob{l: l, g: g, d: d, w: w[gi], xq: xq, qinit: init[gi], offs: offs,
				y: y[o : o+g.Mg*P], mult: mult, bias: bias, res: res, relu: p.relu, act: p.act, twins: pool.twins}
			nb := (g.Mg + 15) / 16
			pool.Run(nb*d.ntiles, g.Mg*g.K()*P, j)
			*j = dconvJob{}
		}
	}
}

// quadTile runs the quad tile of unit block b at tile (oy, ox, R, T) into
// acc.
func (j *dconvJob) quadTile(b, oy, ox, R, T int, acc []int32) {
	g, d := j.g, &j.d
	i0 := (oy*g.sh*d.Wp + ox*g.sw) * 4
	i1 := i0
	if R == 2 {
		i1 = i0 + g.sh*d.Wp*4
	}
	// Bounds: the farthest quad the tile reads.
	_ = j.xq[i1+j.offs[d.kp-1]+(T-1)*g.sw*4+3]
	w := j.w[b*d.kp*64 : (b+1)*d.kp*64]
	vq8Tiles[g.sw-1][R-1][T](d.kp, &w[0], &j.xq[i0], &j.xq[i1], &j.offs[0], &j.qinit[16*b], &acc[0])
}
