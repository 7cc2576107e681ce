package q8

import (
	"fmt"

	"github.com/vouchml/vouch/tensor"
)

// post is the part of a layer that the epilogue applies after the bias:
// a residual operand of the output's shape (the fused Add) and a Relu.
// Each is the same float32 operation, in the same order, as the Add and
// Relu kernels it replaces, so fusing them changes no bit.
type post struct {
	res  []float32
	relu bool
	act  actor // SiLU, HardSwish or Clip, after the Relu (none with it)
}

// compute runs the base op into y (float32, the base output's shape) and
// applies p.
func (l *layer) compute(pool machine, x *tensor.Tensor, y []float32, p post) error {
	xd, err := l.input(x)
	if err != nil {
		return err
	}
	_, g, err := l.baseShape(x.Shape)
	if err != nil {
		return err
	}
	if p.res != nil && len(p.res) != len(y) {
		return fmt.Errorf("q8: residual has %d values, output %d", len(p.res), len(y))
	}
	sc := l.getScratch()
	defer l.putScratch(sc)
	pool.s7 = l.w7 && pool.fast && !pool.vnni
	if g != nil && (pool.vnni || pool.s7) && !pool.f().noRowsQ8 && g.G == 1 && g.KH == 1 && g.KW == 1 && g.H == 1 && g.W == 1 && g.pt == 0 && g.pl == 0 && g.P() == 1 {
		// A 1×1 convolution of a 1×1 map (squeeze-excitation) is a
		// linear layer over the batch: X [N, C] → Y [N, M].
		l.computeRows(pool, xd, y, p, sc, g.N, g.M, g.C)
		return nil
	}
	if g != nil && g.depthwise() && !pool.f().noDWQ8 {
		l.computeDW(pool, g, xd, y, p, sc)
		return nil
	}
	// The quad tiles before the cols tiles, also for 1×1 convolutions:
	// measured on the zoo's pointwise shapes (K 16..512, 7×7..112×112)
	// they are as fast or faster (16→96 at 112×112: 236 vs 306 µs); the
	// cols tiles take the 1×1 convolutions they cannot (fewer than 16
	// channels a group, narrow maps, strides above 2).
	if g != nil && g.useQuad(pool) {
		l.computeQuad(pool, g, xd, y, p, sc)
		return nil
	}
	if g != nil && g.usePointwise(pool) {
		l.computePointwise(pool, g, xd, y, p, sc)
		return nil
	}
	if g != nil && g.useIm2col7(pool) {
		l.computeIm2col7(pool, g, xd, y, p, sc)
		return nil
	}
	if g != nil && g.useDirect(pool) {
		l.computeDirect(pool, g, xd, y, p, sc)
		return nil
	}
	if g == nil && (pool.vnni || pool.s7) && !pool.f().noRowsQ8 && l.wShape[1] > 0 {
		N, K := l.wShape[0], l.wShape[1]
		l.computeRows(pool, xd, y, p, sc, xd.n()/K, N, K)
		return nil
	}
	xq := grow16(&sc.xq, xd.n())
	quantizeSrc(pool.twins, *xq, xd, l.inv)
	e := &sc.epi
	if g == nil {
		N, K := l.wShape[0], l.wShape[1]
		R := xd.n() / max(K, 1)
		if K == 0 {
			R = len(y) / max(N, 1)
		}
		al, _ := packedLen(R, 0, K)
		ap := grow16(&sc.ap, al)
		packA(*ap, *xq, R, K, K)
		acc := grow32(&sc.acc, R*N)
		igemm(pool, R, N, K, *ap, l.packed[0], *acc, N)
		*e = epiJob{acc: *acc, y: y, cols: N, mult: l.mult, bias: l.bias, post: p, twins: pool.twins}
		pool.Run(R, R*N, e)
		*e = epiJob{}
		return nil
	}
	K, P := g.K(), g.P()
	packed := l.convPacked()
	swap := l.swapped(g)
	cw := chunkWidth(g)
	var col, ap *[]int16
	var acc, acc2 *[]int32
	switch {
	case swap:
		al, _ := packedLen(P, 0, K)
		ap = grow16(&sc.ap, al)
		acc = grow32(&sc.acc, g.Mg*P)
		acc2 = grow32(&sc.acc2, P*g.Mg)
		if !g.pointwise() {
			col = grow16(&sc.col, K*P)
		}
	case cw == 0:
		acc = grow32(&sc.acc, g.Mg*P)
		if !g.pointwise() {
			col = grow16(&sc.col, K*P)
		}
	}
	pk := &sc.pack
	for ni := 0; ni < g.N; ni++ {
		for gi := 0; gi < g.G; gi++ {
			xg := (*xq)[(ni*g.C+gi*g.Cg)*g.H*g.W : (ni*g.C+(gi+1)*g.Cg)*g.H*g.W]
			o := (ni*g.M + gi*g.Mg) * P
			*e = epiJob{y: y[o : o+g.Mg*P], cols: P, mult: l.mult[gi*g.Mg : (gi+1)*g.Mg], byRow: true, post: p, twins: pool.twins}
			if l.bias != nil {
				e.bias = l.bias[gi*g.Mg : (gi+1)*g.Mg]
			}
			if p.res != nil {
				e.post.res = p.res[o : o+g.Mg*P]
			}
			if Hp, Wp, ok := g.directPads(); ok && cw > 0 && !swap && !pool.f().noDirect {
				// Chunks of virtual positions packed straight from
				// the padded input (no im2col).
				pad := *grow16(&sc.ph, g.paddedLen(Hp, Wp))
				offs := growInt(&sc.offs, K)
				g.padded(xg, pad, *offs, Hp, Wp)
				cj := &sc.conv
				*cj = convJob{l: l, g: g, src: pad, a: packed[gi], epi: e, cw: cw, offs: *offs, Wp: Wp}
				nc := (g.OH*Wp + cw - 1) / cw
				pool.Run(nc, g.Mg*K*P, cj)
				*cj = convJob{}
				*e = epiJob{}
				continue
			}
			src, W := g.phases(xg, &sc.ph)
			if cw > 0 && !swap {
				// Chunks of positions: im2col, packing, GEMM and
				// epilogue of one chunk stay in the cache.
				cj := &sc.conv
				*cj = convJob{l: l, g: g, src: src, W: W, a: packed[gi], epi: e, cw: cw}
				nc := (P + cw - 1) / cw
				pool.Run(nc, g.Mg*K*P, cj)
				*cj = convJob{}
				*e = epiJob{}
				continue
			}
			b := xg
			if col != nil {
				g.im2col(src, W, *col, 0, P)
				b = *col
			}
			if swap {
				// C^T [P×Mg] = col^T · W^T: small P fills 6-row panels
				// better than 16-column ones; the sums are the same
				// exact integers, transposed back before the epilogue.
				packAT(*ap, b, P, K)
				igemm(pool, P, g.Mg, K, *ap, l.packedT[gi], *acc2, g.Mg)
				transpose32(*acc, *acc2, P, g.Mg)
			} else {
				_, bl := packedLen(0, P, K)
				bp := grow16(&sc.bp, bl)
				*pk = packJob{dst: *bp, b: b, n: P, k: K, twins: pool.twins}
				pool.Run((P+tileN-1)/tileN, K*P, pk)
				*pk = packJob{}
				igemm(pool, g.Mg, P, K, packed[gi], *bp, *acc, P)
			}
			e.acc = *acc
			pool.Run(g.Mg, g.Mg*P, e)
			*e = epiJob{}
		}
	}
	return nil
}

// chunkWidth is the number of output positions a convolution computes at
// a time when its packed weights are small enough to stay in the cache
// beside a chunk (0: the whole K×P matrix at once).
func chunkWidth(g *geom2) int {
	K := g.K()
	if g.Mg*K > 160<<10 || g.P() < 2*tileN {
		return 0
	}
	cw := (160 << 10) / max(K, 1) / tileN * tileN
	return min(max(cw, 2*tileN), 16*tileN)
}

// convJob computes chunks [lo, hi) of cw positions of one channel group.
type convJob struct {
	l   *layer
	g   *geom2
	src []int16 // from phases
	W   int
	a   []int16 // packed weights
	epi *epiJob // y, mult, bias and post for the group
	cw  int
	// Direct path (offs set): src is the padded input, Wp its row length.
	offs []int
	Wp   int
}

func (j *convJob) Run(lo, hi int) {
	g := j.g
	K, P := g.K(), g.P()
	sc := j.l.getScratch()
	defer j.l.putScratch(sc)
	_, bl := packedLen(0, j.cw, K)
	bp := *grow16(&sc.bp, bl)
	acc := *grow32(&sc.acc, g.Mg*j.cw)
	col := *grow16(&sc.col, K*j.cw)
	e := j.epi
	if j.offs != nil {
		j.runDirect(lo, hi, bp, acc)
		return
	}
	for c := lo; c < hi; c++ {
		p0 := c * j.cw
		p1 := min(P, p0+j.cw)
		n := p1 - p0
		b, ldb := j.src[p0:], P
		if !g.pointwise() {
			g.im2col(j.src, j.W, col, p0, p1)
			b, ldb = col, n
		}
		packB(e.twins, bp, b, n, K, ldb, 0, (n+tileN-1)/tileN)
		igemm(machine{twins: e.twins}, g.Mg, n, K, j.a, bp, acc, n)
		for i := 0; i < g.Mg; i++ {
			var bias float32
			if e.bias != nil {
				bias = e.bias[i]
			}
			var r []float32
			if e.post.res != nil {
				r = e.post.res[i*P+p0 : i*P+p1]
			}
			epilogueRow(e.twins, e.y[i*P+p0:i*P+p1], acc[i*n:(i+1)*n], e.mult[i], bias, r, e.post.relu)
			e.post.act.apply(e.twins, e.y[i*P+p0:i*P+p1])
		}
	}
}

// runDirect computes chunks [lo, hi) of virtual positions (see
// directPads) and writes the kept columns through the epilogue.
func (j *convJob) runDirect(lo, hi int, bp []int16, acc []int32) {
	g, e, Wp := j.g, j.epi, j.Wp
	K, P, Pv := g.K(), g.P(), g.OH*j.Wp
	for c := lo; c < hi; c++ {
		v0 := c * j.cw
		np := (min(Pv, v0+j.cw) - v0 + tileN - 1) / tileN
		n := np * tileN
		packDirect(e.twins, bp, j.src, j.offs, v0, np, K)
		igemm(machine{twins: e.twins}, g.Mg, n, K, j.a, bp, acc, n)
		for oy := v0 / Wp; oy < g.OH && oy*Wp < v0+n; oy++ {
			a, b := max(v0, oy*Wp), min(v0+n, oy*Wp+g.OW)
			if a >= b {
				continue
			}
			yo := oy*g.OW + a - oy*Wp
			for i := 0; i < g.Mg; i++ {
				var bias float32
				if e.bias != nil {
					bias = e.bias[i]
				}
				var r []float32
				if e.post.res != nil {
					r = e.post.res[i*P+yo : i*P+yo+b-a]
				}
				epilogueRow(e.twins, e.y[i*P+yo:i*P+yo+b-a], acc[i*n+a-v0:i*n+b-v0], e.mult[i], bias, r, e.post.relu)
				e.post.act.apply(e.twins, e.y[i*P+yo:i*P+yo+b-a])
			}
		}
	}
}

// swapped reports whether a convolution runs transposed (output positions
// as GEMM rows): when the positions fill 16-column panels poorly, as in
// the last stages of a ResNet (7×7 = 49 positions pad to 64). It packs the
// transposed weights at first use.
func (l *layer) swapped(g *geom2) bool {
	P, Mg := g.P(), g.Mg
	normal := (Mg + tileM - 1) / tileM * tileM * ((P + tileN - 1) / tileN * tileN)
	swap := (P + tileM - 1) / tileM * tileM * ((Mg + tileN - 1) / tileN * tileN)
	if 100*swap > 85*normal {
		return false
	}
	l.tOnce.Do(func() {
		wd := l.w.Data.([]int8)
		K := g.K()
		for gi := 0; gi < g.G; gi++ {
			_, bl := packedLen(0, Mg, K)
			p := make([]int16, bl)
			packBT(p, wd[gi*Mg*K:(gi+1)*Mg*K], Mg, K, K)
			l.packedT = append(l.packedT, p)
		}
	})
	return true
}

// packAT packs A[i,kk] = col[kk*m+i] (A given transposed: k rows of m).
func packAT(dst []int16, col []int16, m, k int) {
	kp := pairs(k)
	mp := (m + tileM - 1) / tileM
	clear(dst[:mp*kp*2*tileM])
	for kk := 0; kk < k; kk++ {
		row := col[kk*m : (kk+1)*m]
		base := (kk>>1)*2*tileM + kk&1
		for p := 0; p < mp; p++ {
			d := dst[p*kp*2*tileM+base:]
			r := row[p*tileM : min(m, (p+1)*tileM)]
			for i, v := range r {
				d[2*i] = v
			}
		}
	}
}

// transpose32 writes dst[j*rows+i] = src[i*cols+j].
func transpose32(dst, src []int32, rows, cols int) {
	const blk = 16
	for i0 := 0; i0 < rows; i0 += blk {
		for j0 := 0; j0 < cols; j0 += blk {
			for i := i0; i < min(rows, i0+blk); i++ {
				s := src[i*cols:]
				for j := j0; j < min(cols, j0+blk); j++ {
					dst[j*rows+i] = s[j]
				}
			}
		}
	}
}

// packJob packs B's column panels [lo, hi).
type packJob struct {
	dst, b []int16
	n, k   int
	twins  twins
}

func (j *packJob) Run(lo, hi int) { packB(j.twins, j.dst, j.b, j.n, j.k, j.n, lo, hi) }

// epiJob dequantizes acc [rows×cols] into y over rows [lo, hi):
// y = float32(float32(acc)·mult) + bias, then + res, then Relu; mult and
// bias per row (byRow) or per column. Without a bias, 0 is added.
type epiJob struct {
	acc   []int32
	y     []float32
	cols  int
	mult  []float32
	bias  []float32
	byRow bool
	post  post
	twins twins
}

func (j *epiJob) Run(lo, hi int) {
	c := j.cols
	for i := lo; i < hi; i++ {
		a, o := j.acc[i*c:(i+1)*c], j.y[i*c:(i+1)*c]
		var r []float32
		if j.post.res != nil {
			r = j.post.res[i*c : (i+1)*c]
		}
		if j.byRow {
			var b float32
			if j.bias != nil {
				b = j.bias[i]
			}
			epilogueRow(j.twins, o, a, j.mult[i], b, r, j.post.relu)
			j.post.act.apply(j.twins, o)
			continue
		}
		for jj, v := range a {
			var b float32
			if j.bias != nil {
				b = j.bias[jj]
			}
			t := float32(float32(v)*j.mult[jj]) + b
			if r != nil {
				t += r[jj]
			}
			if j.post.relu && t < 0 {
				t = 0
			}
			o[jj] = t
		}
		j.post.act.apply(j.twins, o)
	}
}

// epilogueRow is one row of a per-row epilogue; epiRow is its vector twin
// (the same rounded multiply, then the adds, then the Relu comparison).
func epilogueRow(c twins, y []float32, a []int32, m, b float32, res []float32, relu bool) {
	y = y[:len(a)]
	i := 0
	if c.fast && len(a) >= 8 {
		n8 := len(a) &^ 7
		var rp *float32
		if res != nil {
			_ = res[n8-1]
			rp = &res[0]
		}
		r := 0
		if relu {
			r = 1
		}
		epiRow(&y[0], &a[0], n8, m, b, rp, r)
		i = n8
	}
	for ; i < len(a); i++ {
		t := float32(float32(a[i])*m) + b
		if res != nil {
			t += res[i]
		}
		if relu && t < 0 {
			t = 0
		}
		y[i] = t
	}
}

// scratch holds one computation's buffers; each layer keeps a pool of
// them, so warm runs reuse buffers of the right sizes (and the task
// values, so that no closure is allocated per call).
type scratch struct {
	xq, ap, bp, col []int16
	ph              []int16 // strided im2col's phases, or the padded input
	offs            []int   // the direct paths' row or k-pair offsets, the depthwise blocks'
	toff, aoffs     []int   // the depthwise taps' and sums' offsets
	dwj             dwJob
	zero            []float32
	acc, acc2       []int32
	pack            packJob
	conv            convJob
	epi             epiJob
	dconv           dconvJob
	xu              []uint8 // the u8 x s8 path's shifted activations
	gu              []uint8 // a u8 input's gathered positions, or a partial quad's rows
	plane           []uint8 // padQuads' plane of narrow rows
	rows            rowsJob
	ppack           panelJob
	cols            colsJob
	im7             im7Job
}

// getScratch takes free buffers (a plain free list, not a sync.Pool, so
// that a garbage collection does not drop them and a warm call never
// allocates).
func (l *layer) getScratch() *scratch {
	l.scratchMu.Lock()
	defer l.scratchMu.Unlock()
	if n := len(l.scratches); n > 0 {
		sc := l.scratches[n-1]
		l.scratches = l.scratches[:n-1]
		return sc
	}
	return &scratch{}
}

func (l *layer) putScratch(sc *scratch) {
	l.scratchMu.Lock()
	l.scratches = append(l.scratches, sc)
	l.scratchMu.Unlock()
}

func grow16(b *[]int16, n int) *[]int16 {
	if cap(*b) < n {
		*b = make([]int16, n)
	}
	*b = (*b)[:n]
	return b
}

func grow32(b *[]int32, n int) *[]int32 {
	if cap(*b) < n {
		*b = make([]int32, n)
	}
	*b = (*b)[:n]
	return b
}

func growInt(b *[]int, n int) *[]int {
	if cap(*b) < n {
		*b = make([]int, n)
	}
	*b = (*b)[:n]
	return b
}
