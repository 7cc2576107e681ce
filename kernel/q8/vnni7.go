package q8

import "unsafe"

// The u8 × s7 path: on a CPU with AVX2 but without VNNI, a layer whose
// plan declares 7-bit weights (AttrWeightBits 7: every weight in [−63,
// 63], checked when the layer is parsed) runs the linear layers' rows
// tiles and the pointwise convolutions' cols tiles of vnni.go, with
// their packings, shifts and corrections, through the AVX2 tiles of
// vnni7_amd64.s (gen_vnni7.py): VPMADDUBSW's int16 pair sums of
// u8 × s7 products cannot saturate (2·255·63 < 2¹⁵), VPMADDWD against
// ones adds a quad's two pairs exactly into int32, VPADDD wraps as Go's
// int32 does. The sums are the exact integers of every other path, so
// the output bits are those of the portable twins, of the int16 GEMM and
// of the VPDPBUSD tiles. twins.s7 is set per call, only for such a layer
// (layer.compute): these tiles never see 8-bit weights, on which a pair
// of products (up to 2·255·127) would saturate.

// tile7 computes rr (1..4) rows by 64 lanes of sums over kq k-quads
// with the AVX2 tiles: cols false is rowsTile (b: rr activation rows,
// pan: the weights' panel, init one value per lane), cols true is
// colsTile (b: rr weight rows, pan: the activations' panel, init one
// value per row).
func tile7(cols bool, rr, kq int, b unsafe.Pointer, ldb int, pan unsafe.Pointer, init []int32, acc []int32) {
	if kq == 0 {
		for r := 0; r < rr; r++ {
			a := acc[r*vnniCols : (r+1)*vnniCols]
			for j := range a {
				if cols {
					a[j] = init[r]
				} else {
					a[j] = init[j]
				}
			}
		}
		return
	}
	k := 0
	if cols {
		k = 1
	}
	for r0 := 0; r0 < rr; r0 += 2 {
		f := q7Tiles[k][min(2, rr-r0)-1]
		for h := 0; h < 2; h++ {
			var in *int32
			if cols {
				in = &init[r0]
			} else {
				in = &init[h*vnniCols/2]
			}
			f(kq, (*uint8)(unsafe.Add(b, r0*ldb)), ldb, (*int8)(unsafe.Add(pan, h*vnniCols/2*4)), in, &acc[r0*vnniCols+h*vnniCols/2])
		}
	}
}

// The other convolutions of a 7-bit layer (k×k kernels, strides,
// padding, groups) run through the same cols tiles on im2col: the
// quantized group (int16 q, as the GEMM path) is unfolded into chunks of
// positions of the K×P matrix (rows (c, ky, kx), padding q = 0), shifted
// to u8 (q + 128, the padding 128 against the correction −128·Σ w over
// all K), and packed into 64-position panels of k-quads as packPanel does
// for a pointwise convolution's channels; the weights are vnniCols's rows
// of K. The sums are the exact integers of every other path.

// im7Chunk is the number of positions unfolded at a time.
const im7Chunk = 16 * vnniCols

// useIm2col7 reports whether a convolution of a 7-bit layer runs through
// the cols tiles on im2col.
func (g *geom2) useIm2col7(pool machine) bool {
	return pool.s7 && !pool.f().noColsQ8 && g.Mg >= 4
}

// computeIm2col7 runs the convolution through the cols tiles on im2col.
func (l *layer) computeIm2col7(pool machine, g *geom2, x src, y []float32, p post, sc *scratch) {
	v := l.vnniCols(g)
	P := g.P()
	xq := grow16(&sc.xq, x.n())
	quantizeSrc(pool.twins, *xq, x, l.inv)
	j := &sc.im7
	for ni := 0; ni < g.N; ni++ {
		for gi := 0; gi < g.G; gi++ {
			xg := (*xq)[(ni*g.C+gi*g.Cg)*g.H*g.W : (ni*g.C+(gi+1)*g.Cg)*g.H*g.W]
			src, W := g.phases(xg, &sc.ph)
			o := (ni*g.M + gi*g.Mg) * P
			mult, bias, res := l.groupEpi(p, gi, g.Mg, o, P)
			*j = im7Job{l: l, g: g, v: v, src: src, W: W, w: v.rows[gi], init: v.init[gi],
				y: y[o : o+g.Mg*P], mult: mult, bias: bias, res: res, relu: p.relu, act: p.act, twins: pool.twins}
			pool.Run((P+im7Chunk-1)/im7Chunk, g.Mg*g.K()*P, j)
			*j = im7Job{}
		}
	}
}

// im7Job computes chunks [lo, hi) of im7Chunk positions of one group.
type im7Job struct {
	l          *layer
	g          *geom2
	v          *vnniConv
	src        []int16 // from phases
	W          int
	w          []int8
	init       []int32
	y          []float32
	mult, bias []float32
	res        []float32
	relu       bool
	act        actor
	twins      twins
}

func (j *im7Job) Run(lo, hi int) {
	g := j.g
	K, P, kq := g.K(), g.P(), j.v.kq
	sc := j.l.getScratch()
	defer j.l.putScratch(sc)
	col := *grow16(&sc.col, K*im7Chunk)
	colU := *grow8(&sc.gu, K*im7Chunk)
	blk := kq * vnniCols * 4
	pan := *grow8(&sc.plane, blk)
	acc := *grow32(&sc.acc2, 4*vnniCols)
	for c := lo; c < hi; c++ {
		p0 := c * im7Chunk
		p1 := min(P, p0+im7Chunk)
		n := p1 - p0
		g.im2col(j.src, j.W, col, p0, p1)
		for i, q := range col[:K*n] {
			colU[i] = uint8(q + 128)
		}
		cu := src{u: colU[:K*n]}
		for pb := 0; pb*vnniCols < n; pb++ {
			packPanel(j.twins, pan, cu, K, n, pb, kq, 0)
			q0 := p0 + pb*vnniCols
			m := min(vnniCols, p1-q0)
			for m0 := 0; m0 < g.Mg; m0 += 4 {
				rr := min(4, g.Mg-m0)
				colsTile(j.twins, rr, kq, j.w[m0*4*kq:], 4*kq, pan, j.init[m0:m0+rr], acc)
				for r := 0; r < rr; r++ {
					ch := m0 + r
					o := ch*P + q0
					var b float32
					if j.bias != nil {
						b = j.bias[ch]
					}
					var res []float32
					if j.res != nil {
						res = j.res[o : o+m]
					}
					epilogueRow(j.twins, j.y[o:o+m], acc[r*vnniCols:r*vnniCols+m], j.mult[ch], b, res, j.relu)
					j.act.apply(j.twins, j.y[o:o+m])
				}
			}
		}
	}
}
