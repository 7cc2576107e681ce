package q8

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Int8 activations between consecutive int8 layers (compile's int8-chains
// pass). A Q8 layer with the attribute y_scale (> 0, finite) writes its
// output 0 as uint8: u = quantize1(y, 1/y_scale) + 128 of each float32
// value y it computes (after the bias, the residual and the activation),
// stored by the epilogue's last step (actor.apply) run by run while the
// run is in cache, so the float32 output is only a scratch buffer shared
// by the layers, never the activation in the arena. A Q8 layer with the
// attribute x_u8 = 1 reads such a uint8 input 0, x_scale its scale (the
// producer's y_scale), and every input path takes the bytes where it
// would have quantized float32 values: the rows and quad tiles copy or
// interleave them, the int16 GEMM and pair paths widen q = u - 128. The
// integers are those quantize1 gives on the same float32 values with the
// same 1/x_scale, so the chained layers' outputs have the bits of the
// unchained ones at every level (the zips' portable twins are byte
// copies).

// src is a layer's input 0: float32 values (quantized on the way in) or,
// for an x_u8 layer, their u8 form q + 128.
type src struct {
	f []float32
	u []uint8
}

// input reads X as l takes it.
func (l *layer) input(x *tensor.Tensor) (src, error) {
	if l.xU8 {
		u, ok := x.Data.([]uint8)
		if !ok {
			return src{}, fmt.Errorf("q8: X is %v, want uint8 (x_u8: a chained int8 layer's output)", x.DType)
		}
		return src{u: u}, nil
	}
	f, ok := x.Data.([]float32)
	if !ok {
		return src{}, fmt.Errorf("q8: X is %v, want float32", x.DType)
	}
	return src{f: f}, nil
}

func (s src) n() int {
	if s.u != nil {
		return len(s.u)
	}
	return len(s.f)
}

func (s src) sub(a, b int) src {
	if s.u != nil {
		return src{u: s.u[a:b]}
	}
	return src{f: s.f[a:b]}
}

func (s src) from(a int) src {
	if s.u != nil {
		return src{u: s.u[a:]}
	}
	return src{f: s.f[a:]}
}

// at is element i's u8 form.
func (s src) at(i int, inv float32) uint8 {
	if s.u != nil {
		return s.u[i]
	}
	return uint8(quantize1(s.f[i], inv) + 128)
}

// quantizeSrc writes the int16 q of x (quantize, or u - 128).
func quantizeSrc(c twins, q []int16, x src, inv float32) {
	if x.u == nil {
		quantize(c, q, x.f, inv)
		return
	}
	q = q[:len(x.u)]
	for i, v := range x.u {
		q[i] = int16(v) - 128
	}
}

// rowU8 writes the u8 form of x into dst (quantizeU8, or a copy).
func rowU8(c twins, dst []uint8, x src, inv float32) {
	if x.u == nil {
		quantizeU8(c, dst, x.f, inv)
		return
	}
	copy(dst[:len(x.u)], x.u)
}

// quadRowSrc is quadRow for either input form.
func quadRowSrc(c twins, dst []uint8, s src, ld, n int, inv float32) {
	if s.u == nil {
		quadRow(c, dst, s.f, ld, n, inv)
		return
	}
	zipRow(c, dst, s.u, ld, n)
}

// zipRow writes dst[4j+e] = s[e·ld + j] for j < n, e < 4: zipQuad over
// whole 16s and, for a ragged end, once more over the last 16 (as
// quadRow); the portable loop below 16.
func zipRow(c twins, dst, s []uint8, ld, n int) {
	j := 0
	if c.vnni && n >= 16 {
		n16 := n &^ 15
		_, _ = s[3*ld+n-1], dst[4*n-1]
		zipQuad(&dst[0], &s[0], ld, n16)
		if n16 < n {
			zipQuad(&dst[4*(n-16)], &s[n-16], ld, 16)
		}
		j = n
	} else if c.s7 && n >= 8 {
		n8 := n &^ 7
		_, _ = s[3*ld+n-1], dst[4*n-1]
		q7zipQuad(&dst[0], &s[0], ld, n8)
		if n8 < n {
			q7zipQuad(&dst[4*(n-8)], &s[n-8], ld, 8)
		}
		j = n
	}
	for ; j < n; j++ {
		for e := 0; e < 4; e++ {
			dst[4*j+e] = s[e*ld+j]
		}
	}
}

// zipPairsU8 is qzip for u8 inputs: dst[2j] = a[j] - 128, dst[2j+1] =
// b[j] - 128 (0 where b is nil: the odd channel's zero partner), j < n.
func zipPairsU8(dst []int16, a, b []uint8, n int) {
	dst, a = dst[:2*n], a[:n]
	for j, v := range a {
		dst[2*j] = int16(v) - 128
		dst[2*j+1] = 0
	}
	if b != nil {
		b = b[:n]
		for j, v := range b {
			dst[2*j+1] = int16(v) - 128
		}
	}
}

// gather copies the input positions a strided 1×1 convolution reads, for
// channel group xg ([Cg][H][W]), into dst ([Cg][OH·OW]); positions in the
// trailing padding read zero (the value 0: 0 as float32, 128 as u8).
func gather[T float32 | uint8](g *geom2, dst, xg []T, zero T) {
	for c := 0; c < g.Cg; c++ {
		s := xg[c*g.H*g.W : (c+1)*g.H*g.W]
		d := dst[c*g.P() : (c+1)*g.P()]
		for oy := 0; oy < g.OH; oy++ {
			row := d[oy*g.OW : (oy+1)*g.OW]
			iy := oy * g.sh
			if iy >= g.H {
				for i := range row {
					row[i] = zero
				}
				continue
			}
			sr := s[iy*g.W : (iy+1)*g.W]
			for ox := range row {
				if ix := ox * g.sw; ix < g.W {
					row[ox] = sr[ix]
				} else {
					row[ox] = zero
				}
			}
		}
	}
}

// gatherSrc gathers xg (either form) into the scratch buffer of its form.
func (g *geom2) gatherSrc(sc *scratch, xg src) src {
	if xg.u != nil {
		d := *grow8(&sc.gu, g.Cg*g.P())
		gather(g, d, xg.u, 128)
		return src{u: d}
	}
	d := *grow32f(&sc.zero, g.Cg*g.P())
	gather(g, d, xg.f, 0)
	return src{f: d}
}

// fourRows returns row y of a partial channel quad starting at channel
// 4cq of xg (the present channels' rows, then zero rows: 0.0, or the u8
// form of 0, 128) in the scratch rows four (float32) or four8 (u8), each
// W values, as a src of row length W.
func (g *geom2) fourRows(xg src, cq, y int, four []float32, four8 []uint8) src {
	HW := g.H * g.W
	if xg.u != nil {
		f := four8[:4*g.W]
		for i := range f {
			f[i] = 128
		}
		for e := 0; 4*cq+e < g.Cg; e++ {
			copy(f[e*g.W:(e+1)*g.W], xg.u[(4*cq+e)*HW+y*g.W:(4*cq+e)*HW+(y+1)*g.W])
		}
		return src{u: f}
	}
	f := four[:4*g.W]
	clear(f)
	for e := 0; 4*cq+e < g.Cg; e++ {
		copy(f[e*g.W:(e+1)*g.W], xg.f[(4*cq+e)*HW+y*g.W:(4*cq+e)*HW+(y+1)*g.W])
	}
	return src{f: f}
}

// qsink stores a chained layer's output in u8 form: y is the float32
// buffer the layer computes into, u its uint8 output (of y's length), inv
// 1/y_scale.
type qsink struct {
	y   []float32
	u   []uint8
	inv float32
}

// store quantizes run r, a subslice of q.y, into the same positions of
// q.u.
func (q *qsink) store(c twins, r []float32) {
	if len(r) == 0 {
		return
	}
	off := int((uintptr(unsafe.Pointer(&r[0])) - uintptr(unsafe.Pointer(&q.y[0]))) / 4)
	quantizeU8(c, q.u[off:off+len(r)], r, q.inv)
}

// sinks is the qsinks (and their float32 buffers) chained layers compute
// into, shared by every layer (layers run one after another, so one buffer
// serves them all, warm in the cache): a free list, not a sync.Pool, so
// that a warm call never allocates.
var sinks struct {
	sync.Mutex
	free []*qsink
}

// maxFreeSinks bounds the free list (as many as layers run at once).
const maxFreeSinks = 8

// getSink returns a qsink with a float32 buffer of n values (the smallest
// free one that holds n, else a new one) storing into u.
func getSink(n int, u []uint8, inv float32) *qsink {
	sinks.Lock()
	best := -1
	for i, b := range sinks.free {
		if cap(b.y) >= n && (best < 0 || cap(b.y) < cap(sinks.free[best].y)) {
			best = i
		}
	}
	var q *qsink
	if best >= 0 {
		q = sinks.free[best]
		last := len(sinks.free) - 1
		sinks.free[best] = sinks.free[last]
		sinks.free = sinks.free[:last]
	}
	sinks.Unlock()
	if q == nil {
		q = &qsink{y: make([]float32, n)}
	}
	q.y, q.u, q.inv = q.y[:n], u, inv
	return q
}

// putSink returns q to the free list (dropping the smallest buffer when
// the list is full).
func putSink(q *qsink) {
	q.u = nil
	sinks.Lock()
	defer sinks.Unlock()
	if len(sinks.free) < maxFreeSinks {
		sinks.free = append(sinks.free, q)
		return
	}
	small := 0
	for i, x := range sinks.free {
		if cap(x.y) < cap(sinks.free[small].y) {
			small = i
		}
	}
	if cap(q.y) > cap(sinks.free[small].y) {
		sinks.free[small] = q
	}
}

// padPairsU8 is padPairs' copy of channel pair cp for a u8 input
// (zipPairsU8 for qzip; xp was cleared where it is not one plane).
func (g *geom2) padPairsU8(d *dgrid, xg []uint8, xp []int16, cp, n, rows int, plane bool) {
	HW := g.H * g.W
	a := xg[2*cp*HW : (2*cp+1)*HW]
	var b []uint8
	if 2*cp+1 < g.Cg {
		b = xg[(2*cp+1)*HW : (2*cp+2)*HW]
	}
	row := func(o int) []uint8 {
		if b == nil {
			return nil
		}
		return b[o:]
	}
	if plane {
		m := d.Hp * d.Wp
		zipPairsU8(xp[cp*m*2:(cp+1)*m*2], a, row(0), m)
		return
	}
	for y := 0; y < rows; y++ {
		zipPairsU8(xp[((cp*d.Hp+y+g.pt)*d.Wp+g.pl)*2:], a[y*g.W:], row(y*g.W), n)
	}
}

// intoU8 runs a chained producer (y_scale) into its uint8 output out.
func (l *layer) intoU8(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor, out *tensor.Tensor, shape []int) error {
	if out == nil || out.DType != tensor.Uint8 || !equalInts(out.Shape, shape) {
		return fmt.Errorf("q8: y_scale layer %s: output slot is %v, want uint8%v", n.Name, out, shape)
	}
	u := out.Data.([]uint8)
	m := machineOf(c)
	p, _, rest := l.fusedPost(c, in, shape)
	if rest {
		// Parts the epilogue does not apply: the float32 result, then
		// its u8 form (the same values, so the same bytes).
		res, err := l.runF32(c, in, shape)
		if err != nil {
			return err
		}
		y, ok := res[0].Data.([]float32)
		if !ok || len(y) != len(u) {
			return fmt.Errorf("q8: y_scale layer %s: result is %v%v", n.Name, res[0].DType, res[0].Shape)
		}
		quantizeU8(m.twins, u, y, l.yInv)
		return nil
	}
	s := getSink(len(u), u, l.yInv)
	defer putSink(s)
	p.act.q = s
	return l.compute(m, in[0], s.y, p)
}
