package q8

import "unsafe"

// The u8 x s8 path (AVX512_VNNI's VPDPBUSD: four byte products into each
// int32 lane, twice the pairs of VPDPWSSD) for linear layers: the input
// rows are quantized as everywhere (q = clamp(roundEven(x/scale), ±127))
// and stored shifted, q + 128 in [1, 255], the unsigned operand; the
// weights are the signed one. Each accumulator starts from the column's
// correction −128·Σₖ w[n,k], so that it ends at Σₖ w[n,k]·q[k]: VPDPBUSD
// does not saturate (VPDPBUSDS would), and every partial sum wraps modulo
// 2³² as Go's int32 does, so the result is the exact sum whenever that
// fits in int32, which MaxK guarantees. These are the integers the int16
// GEMM and its portable twin compute, and the epilogue (epiCols, twin
// epiColsGo) is the same float32 sequence, so the output bits do not
// depend on the path.

// vnniPack is a linear layer's weights packed for the rows tiles: panels
// of 64 columns, k in quads, p[((cb·kq + kk)·64 + j)·4 + e] =
// W[64cb + j, 4kk + e] (zero past N and K); init the columns'
// corrections; zb zeros for a layer without bias.
type vnniPack struct {
	p      []int8
	init   []int32
	kq, nb int
	zb     []float32
}

const vnniCols = 64

func newVNNIPack(w []int8, N, K int) *vnniPack {
	kq := (K + 3) / 4
	nb := (N + vnniCols - 1) / vnniCols
	v := &vnniPack{p: make([]int8, nb*kq*vnniCols*4), init: make([]int32, nb*vnniCols), kq: kq, nb: nb}
	for n := 0; n < N; n++ {
		row := w[n*K : (n+1)*K]
		cb, j := n/vnniCols, n%vnniCols
		var s int32
		for k, x := range row {
			v.p[((cb*kq+k/4)*vnniCols+j)*4+k%4] = x
			s += int32(x)
		}
		v.init[n] = -128 * s
	}
	return v
}

// vnniRows returns the layer's rows-tile packing (packed at first use;
// a convolution's weights [M, C, 1, 1] are the rows of a linear layer).
func (l *layer) vnniRows() *vnniPack {
	l.vOnce.Do(func() {
		N, K := l.wShape[0], l.wShape[1]
		l.vpack = newVNNIPack(l.w.Data.([]int8), N, K)
		if l.bias == nil {
			l.vpack.zb = make([]float32, N)
		}
	})
	return l.vpack
}

// quantizeU8 writes uint8(quantize1(x, inv) + 128) for each x.
func quantizeU8(c twins, q []uint8, x []float32, inv float32) {
	i := 0
	if c.vnni && len(x) >= 16 {
		// Whole 16s, then the last 16 again for a ragged end (the
		// overlap gets the same bytes twice).
		n := len(x)
		_ = q[n-1]
		quantU8(&q[0], &x[0], inv, n&^15)
		if n&15 != 0 {
			quantU8(&q[n-16], &x[n-16], inv, 16)
		}
		i = n
	}
	for ; i < len(x); i++ {
		q[i] = uint8(quantize1(x[i], inv) + 128)
	}
}

// computeRows runs a linear layer of R rows (X [R×K], Y [R×N] float32)
// through the rows tiles.
func (l *layer) computeRows(pool machine, x src, y []float32, p post, sc *scratch, R, N, K int) {
	v := l.vnniRows()
	ldx := v.kq * 4
	xu := *grow8(&sc.xu, R*ldx)
	for r := 0; r < R; r++ {
		rowU8(pool.twins, xu[r*ldx:r*ldx+K], x.sub(r*K, (r+1)*K), l.inv)
		clear(xu[r*ldx+K : (r+1)*ldx])
	}
	bias := l.bias
	if bias == nil {
		bias = v.zb
	}
	j := &sc.rows
	*j = rowsJob{l: l, v: v, xu: xu, ldx: ldx, R: R, N: N, y: y, mult: l.mult, bias: bias, res: p.res, relu: p.relu, act: p.act, twins: pool.twins}
	nrq := (R + 3) / 4
	pool.Run(v.nb*nrq, R*N*K, j)
	*j = rowsJob{}
}

// rowsJob computes units [lo, hi) of (64-column block, 4-row group),
// block major (a block's weights stay in the cache across its rows).
type rowsJob struct {
	l          *layer
	v          *vnniPack
	xu         []uint8
	ldx, R, N  int
	y          []float32
	mult, bias []float32
	res        []float32
	relu       bool
	act        actor
	twins      twins
}

func (j *rowsJob) Run(lo, hi int) {
	sc := j.l.getScratch()
	defer j.l.putScratch(sc)
	acc := *grow32(&sc.acc2, 4*vnniCols)
	v := j.v
	nrq := (j.R + 3) / 4
	for u := lo; u < hi; u++ {
		cb, r0 := u/nrq, 4*(u%nrq)
		rr := min(4, j.R-r0)
		_ = j.xu[(r0+rr-1)*j.ldx+j.ldx-1]
		pan := v.p[cb*v.kq*vnniCols*4 : (cb+1)*v.kq*vnniCols*4]
		rowsTile(j.twins, rr, v.kq, j.xu[r0*j.ldx:], j.ldx, pan, v.init[cb*vnniCols:(cb+1)*vnniCols], acc)
		j0 := cb * vnniCols
		n := min(vnniCols, j.N-j0)
		for r := 0; r < rr; r++ {
			o := (r0+r)*j.N + j0
			var res []float32
			if j.res != nil {
				res = j.res[o : o+n]
			}
			epilogueCols(j.twins, j.y[o:o+n], acc[r*vnniCols:r*vnniCols+n], j.mult[j0:j0+n], j.bias[j0:j0+n], res, j.relu)
			j.act.apply(j.twins, j.y[o:o+n])
		}
	}
}

// rowsTile is rowsR (rr rows) or its portable twin: the exact sums
// init[j] + Σ (x+128)·w, wrapping as int32.
func rowsTile(c twins, rr, kq int, xu []uint8, ldx int, pan []int8, init []int32, acc []int32) {
	if c.vnni {
		rowsTiles[rr-1](kq, &xu[0], ldx, &pan[0], &init[0], &acc[0])
		return
	}
	if c.s7 {
		if kq > 0 {
			_, _ = xu[(rr-1)*ldx+4*kq-1], pan[kq*vnniCols*4-1]
		}
		_, _ = init[vnniCols-1], acc[rr*vnniCols-1]
		tile7(false, rr, kq, unsafe.Pointer(unsafe.SliceData(xu)), ldx, unsafe.Pointer(unsafe.SliceData(pan)), init, acc)
		return
	}
	for r := 0; r < rr; r++ {
		x := xu[r*ldx : r*ldx+4*kq]
		a := acc[r*vnniCols : (r+1)*vnniCols]
		copy(a, init)
		for kk := 0; kk < kq; kk++ {
			q := pan[kk*vnniCols*4 : (kk+1)*vnniCols*4]
			x0, x1, x2, x3 := int32(x[4*kk]), int32(x[4*kk+1]), int32(x[4*kk+2]), int32(x[4*kk+3])
			for jj := range a {
				w := q[4*jj : 4*jj+4]
				a[jj] += x0*int32(w[0]) + x1*int32(w[1]) + x2*int32(w[2]) + x3*int32(w[3])
			}
		}
	}
}

// epilogueCols is the per-column epilogue: y = float32(float32(a)·m) + b,
// then + res, then Relu (as epiJob's per-column branch).
func epilogueCols(c twins, y []float32, a []int32, m, b, res []float32, relu bool) {
	i := 0
	if c.vnni && len(a) >= 16 {
		n16 := len(a) &^ 15
		_, _, _, _ = y[n16-1], m[n16-1], b[n16-1], a[n16-1]
		var rp *float32
		if res != nil {
			_ = res[n16-1]
			rp = &res[0]
		}
		r := 0
		if relu {
			r = 1
		}
		epiCols(&y[0], &a[0], &m[0], &b[0], rp, n16, r)
		i = n16
	}
	epiColsGo(y[i:], a[i:], m[i:], b[i:], tail(res, i), relu)
}

func tail(s []float32, i int) []float32 {
	if s == nil {
		return nil
	}
	return s[i:]
}

func epiColsGo(y []float32, a []int32, m, b, res []float32, relu bool) {
	for i, v := range a {
		t := float32(float32(v)*m[i]) + b[i]
		if res != nil {
			t += res[i]
		}
		if relu && t < 0 {
			t = 0
		}
		y[i] = t
	}
}

func grow8(b *[]uint8, n int) *[]uint8 {
	if cap(*b) < n {
		*b = make([]uint8, n)
	}
	*b = (*b)[:n]
	return b
}

// colsTile is colsR (rr output channels) or its portable twin: acc[r][j]
// = init[r] + Σ w[r]·(x+128) over the panel's 64 positions, wrapping as
// int32.
func colsTile(c twins, rr, kq int, wr []int8, ldw int, pan []uint8, init []int32, acc []int32) {
	if c.vnni {
		_ = init[rr-1]
		if kq > 0 {
			_, _ = wr[(rr-1)*ldw+4*kq-1], pan[kq*vnniCols*4-1]
		}
		colsTiles[rr-1](kq, (*uint8)(unsafe.Pointer(&wr[0])), ldw, (*int8)(unsafe.Pointer(&pan[0])), &init[0], &acc[0])
		return
	}
	if c.s7 {
		if kq > 0 {
			_, _ = wr[(rr-1)*ldw+4*kq-1], pan[kq*vnniCols*4-1]
		}
		_, _ = init[rr-1], acc[rr*vnniCols-1]
		tile7(true, rr, kq, unsafe.Pointer(unsafe.SliceData(wr)), ldw, unsafe.Pointer(unsafe.SliceData(pan)), init, acc)
		return
	}
	for r := 0; r < rr; r++ {
		w := wr[r*ldw : r*ldw+4*kq]
		a := acc[r*vnniCols : (r+1)*vnniCols]
		for jj := range a {
			a[jj] = init[r]
		}
		for kk := 0; kk < kq; kk++ {
			q := pan[kk*vnniCols*4 : (kk+1)*vnniCols*4]
			w0, w1, w2, w3 := int32(w[4*kk]), int32(w[4*kk+1]), int32(w[4*kk+2]), int32(w[4*kk+3])
			for jj := range a {
				x := q[4*jj : 4*jj+4]
				a[jj] += w0*int32(x[0]) + w1*int32(x[1]) + w2*int32(x[2]) + w3*int32(x[3])
			}
		}
	}
}

// Pointwise convolutions (1×1, stride 1, no padding) through the cols
// tiles: the output channels are the rows (their signed weights
// broadcast), the positions the columns. The channel group's activations
// are packed once per call into panels of 64 positions, channels in
// quads: pan[((pb·kq + kk)·64 + j)·4 + e] = u8(x[4kk+e, 64pb+j]) (zero
// past Cg and P), the weights once per layer as rows of kq quads with
// their corrections −128·Σ w. The sums are the same exact integers as
// every other path's, and the epilogue is epilogueRow.

// vnniConv is a pointwise convolution's weights for the cols tiles, per
// group: rows[gi] is [Mg][4kq] (zero past K), init[gi] the rows'
// corrections.
type vnniConv struct {
	rows [][]int8
	init [][]int32
	kq   int
}

func (l *layer) vnniCols(g *geom2) *vnniConv {
	l.cOnce.Do(func() {
		wd := l.w.Data.([]int8)
		K := g.K()
		kq := (K + 3) / 4
		v := &vnniConv{kq: kq}
		for gi := 0; gi < g.G; gi++ {
			rows := make([]int8, g.Mg*4*kq)
			init := make([]int32, g.Mg)
			for m := 0; m < g.Mg; m++ {
				src := wd[(gi*g.Mg+m)*K : (gi*g.Mg+m+1)*K]
				copy(rows[m*4*kq:], src)
				var s int32
				for _, x := range src {
					s += int32(x)
				}
				init[m] = -128 * s
			}
			v.rows = append(v.rows, rows)
			v.init = append(v.init, init)
		}
		l.vconv = v
	})
	return l.vconv
}

// usePointwise reports whether a convolution runs through the cols tiles:
// a 1×1 kernel without leading pads (a strided one reads its positions
// through a gathered copy, gather).
func (g *geom2) usePointwise(pool machine) bool {
	return (pool.vnni || pool.s7) && !pool.f().noColsQ8 && g.KH == 1 && g.KW == 1 && g.pt == 0 && g.pl == 0 && g.Mg >= 4
}

// packPanel writes position block pb of channel group xg ([Cg][P]) into
// pan (kq quads of 256 bytes).
func packPanel(c twins, pan []uint8, xg src, Cg, P, pb, kq int, inv float32) {
	p0 := pb * vnniCols
	n := min(vnniCols, P-p0)
	for kk := 0; kk < kq; kk++ {
		d := pan[kk*vnniCols*4 : (kk+1)*vnniCols*4]
		if (c.vnni && n >= 16 || c.s7 && n >= 8) && 4*kk+3 < Cg {
			quadRowSrc(c, d, xg.from(4*kk*P+p0), P, n, inv)
			clear(d[4*n:])
			continue
		}
		for e := 0; e < 4; e++ {
			ch := 4*kk + e
			if ch >= Cg {
				for j := 0; j < vnniCols; j++ {
					d[4*j+e] = 0
				}
				continue
			}
			for j := 0; j < n; j++ {
				d[4*j+e] = xg.at(ch*P+p0+j, inv)
			}
			for j := n; j < vnniCols; j++ {
				d[4*j+e] = 0
			}
		}
	}
}

// computePointwise runs a pointwise convolution through the cols tiles.
func (l *layer) computePointwise(pool machine, g *geom2, x src, y []float32, p post, sc *scratch) {
	v := l.vnniCols(g)
	P := g.P()
	nbp := (P + vnniCols - 1) / vnniCols
	blk := v.kq * vnniCols * 4
	pan := *grow8(&sc.xu, nbp*blk)
	pj := &sc.ppack
	cj := &sc.cols
	nrg := (g.Mg + 3) / 4
	for ni := 0; ni < g.N; ni++ {
		for gi := 0; gi < g.G; gi++ {
			var xg src
			if g.pointwise() {
				xg = x.sub((ni*g.C+gi*g.Cg)*P, (ni*g.C+(gi+1)*g.Cg)*P)
			} else {
				HW := g.H * g.W
				xg = g.gatherSrc(sc, x.sub((ni*g.C+gi*g.Cg)*HW, (ni*g.C+(gi+1)*g.Cg)*HW))
			}
			*pj = panelJob{pan: pan, xg: xg, Cg: g.Cg, P: P, kq: v.kq, inv: l.inv, twins: pool.twins}
			pool.Run(nbp, g.Cg*P, pj)
			*pj = panelJob{}
			o := (ni*g.M + gi*g.Mg) * P
			mult, bias, res := l.groupEpi(p, gi, g.Mg, o, P)
			*cj = colsJob{l: l, v: v, pan: pan, w: v.rows[gi], init: v.init[gi], Mg: g.Mg, P: P,
				y: y[o : o+g.Mg*P], mult: mult, bias: bias, res: res, relu: p.relu, act: p.act, twins: pool.twins}
			pool.Run(nbp*nrg, g.Mg*g.K()*P, cj)
			*cj = colsJob{}
		}
	}
}

// panelJob packs position blocks [lo, hi).
type panelJob struct {
	pan       []uint8
	xg        src
	Cg, P, kq int
	inv       float32
	twins     twins
}

func (j *panelJob) Run(lo, hi int) {
	blk := j.kq * vnniCols * 4
	for pb := lo; pb < hi; pb++ {
		packPanel(j.twins, j.pan[pb*blk:(pb+1)*blk], j.xg, j.Cg, j.P, pb, j.kq, j.inv)
	}
}

// colsJob computes units [lo, hi) of (position block, 4-channel group),
// position block major (a block's panel stays in the cache across the
// channel groups).
type colsJob struct {
	l          *layer
	v          *vnniConv
	pan        []uint8
	w          []int8
	init       []int32
	Mg, P      int
	y          []float32
	mult, bias []float32
	res        []float32
	relu       bool
	act        actor
	twins      twins
}

func (j *colsJob) Run(lo, hi int) {
	sc := j.l.getScratch()
	defer j.l.putScratch(sc)
	acc := *grow32(&sc.acc2, 4*vnniCols)
	kq := j.v.kq
	blk := kq * vnniCols * 4
	nrg := (j.Mg + 3) / 4
	for u := lo; u < hi; u++ {
		pb, m0 := u/nrg, 4*(u%nrg)
		rr := min(4, j.Mg-m0)
		colsTile(j.twins, rr, kq, j.w[m0*4*kq:], 4*kq, j.pan[pb*blk:(pb+1)*blk], j.init[m0:m0+rr], acc)
		p0 := pb * vnniCols
		n := min(vnniCols, j.P-p0)
		for r := 0; r < rr; r++ {
			m := m0 + r
			o := m*j.P + p0
			var b float32
			if j.bias != nil {
				b = j.bias[m]
			}
			var res []float32
			if j.res != nil {
				res = j.res[o : o+n]
			}
			epilogueRow(j.twins, j.y[o:o+n], acc[r*vnniCols:r*vnniCols+n], j.mult[m], b, res, j.relu)
			j.act.apply(j.twins, j.y[o:o+n])
		}
	}
}
