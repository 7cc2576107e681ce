package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Into forms. Each computes exactly Run's bits (Run and Into share the
// float32 code below) and, for float32 data, allocates nothing once warm:
// shape-derived geometry is prepared once per node and input shapes and
// kept in the node's kernel.State (the bound plan's), scratch comes from
// sync.Pools. Other dtypes go through Run and a copy.

// setupKey keys a node's geometry in its kernel.State.
type setupKey struct{ n *ir.Node }

// cachedSetup is a geometry with the input shapes it was computed for.
type cachedSetup[T any] struct {
	shapes [][]int
	v      T
}

func sameShapes(a [][]int, in []*tensor.Tensor) bool {
	if len(a) != len(in) {
		return false
	}
	for i, s := range a {
		if in[i] == nil {
			if s != nil {
				return false
			}
			continue
		}
		if !equalInts(s, in[i].Shape) || s == nil {
			return false
		}
	}
	return true
}

// cached returns build()'s value for n and in's shapes, kept in c's
// kernel.State (computed again for other shapes, and on every call where
// c keeps no State). Values are immutable once built, so concurrent runs
// may share them.
func cached[T any](c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor, build func() (T, error)) (T, error) {
	e, err := kernel.Prepared(c, setupKey{n}, func(e *cachedSetup[T]) bool { return sameShapes(e.shapes, in) },
		func() (*cachedSetup[T], error) {
			v, err := build()
			if err != nil {
				return nil, err
			}
			e := &cachedSetup[T]{shapes: make([][]int, len(in)), v: v}
			for i, t := range in {
				if t != nil {
					e.shapes[i] = append([]int{}, t.Shape...)
				}
			}
			return e, nil
		})
	if err != nil {
		var zero T
		return zero, err
	}
	return e.v, nil
}

// viaRun is the Into of dtypes without an allocation-free path: Run, then
// a copy into out (kernel.ViaRun).
func viaRun(run kernel.RunFunc) kernel.IntoFunc {
	return func(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		if err := kernel.ViaRun(run, c, n, in, out); err != nil {
			return fmt.Errorf("nn: %w", err)
		}
		return nil
	}
}

// f32Out returns the float32 buffers of in[:k] and out[0] when all are
// float32, else ok is false.
func allF32(ts ...*tensor.Tensor) bool {
	for _, t := range ts {
		if t != nil && t.DType != tensor.Float32 {
			return false
		}
	}
	return true
}

func checkOut(op string, out []*tensor.Tensor, shape []int) error {
	if len(out) < 1 || out[0] == nil || out[0].Len() != prod(shape) {
		return fmt.Errorf("nn: %s: preallocated output does not hold shape %v", op, shape)
	}
	return nil
}

// MatMul.

// matmulSetup returns the float32 MatMul's geometry for in's shapes, kept
// in c's State.
func matmulSetup(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) (*mmShape, error) {
	a, b := in[0], in[1]
	return cached(c, n, in, func() (*mmShape, error) {
		s, err := matmulShape(a.Shape, b.Shape)
		if err != nil {
			return nil, err
		}
		if !s.bUnbatched() && !equalInts(s.aBatch, s.bBatch) {
			s.ai, s.bi = s.batchOffsets()
		}
		return s, nil
	})
}

// prepareMatMul is MatMul's Op.Prepare: the geometry, at bind time.
func prepareMatMul(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
	if len(in) < 2 || in[0] == nil || in[1] == nil || !allF32(in[0], in[1]) {
		return nil
	}
	s, err := matmulSetup(c, n, in)
	if err != nil {
		return err
	}
	// A constant B (a weight matrix) is packed for the vector tiles.
	if b, ok := in[1].Data.([]float32); ok && s.bUnbatched() {
		preparePackedB(c, n, prod(s.batch)*s.m, b, s.n, 1, s.k, s.n)
	}
	return nil
}

func intoMatMul(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 2, "MatMul"); err != nil {
		return err
	}
	a, b := in[0], in[1]
	if !allF32(a, b, out[0]) {
		return viaRun(runMatMul)(c, n, in, out)
	}
	s, err := matmulSetup(c, n, in)
	if err != nil {
		return err
	}
	if err := checkOut("MatMul", out, s.out); err != nil {
		return err
	}
	y := out[0].Data.([]float32)
	// A fused layer's epilogue (kernel.Ctx.Epilogue): a column bias (the
	// MatMul's bias Add) and a clamp, applied as each tile is stored.
	pool := machineOf(c)
	ep, ok := epiCols(pool, &c.Epilogue, s.n)
	if ok && ep.on && (s.n == 0 || overlaps(ep.r, y) || !ep.fitsOut(s, y)) {
		ep, ok = epi{}, false
	}
	bf := b.Data.([]float32)
	var pb *packedB
	if s.bUnbatched() {
		pb = packedBOf(c, n, bf, s.n, 1, s.k, s.n)
	}
	matmulF32(pool, s, a.Data.([]float32), bf, pb, y, ep)
	if ep.on && ok {
		c.Epilogue.Applied = true
	}
	return nil
}

// matmulF32 is the float32 MatMul into y, followed by the epilogue ep
// (off, or a column bias and clamp: epiCols) on every output. pb, when not
// nil, is the unbatched B packed (the same values).
func matmulF32(p machine, s *mmShape, af, bf []float32, pb *packedB, y []float32, ep epi) {
	m, k, nn := s.m, s.k, s.n
	switch {
	case s.bUnbatched():
		sgemmPacked(p, prod(s.batch)*m, nn, k, af, k, 1, bf, nn, 1, pb, y, nn, ep)
	case s.ai == nil && equalInts(s.aBatch, s.bBatch):
		for t := 0; t < prod(s.batch); t++ {
			sgemmEp(p, m, nn, k, af[t*m*k:], k, 1, bf[t*k*nn:], nn, 1, y[t*m*nn:], nn, ep)
		}
	default:
		ai, bi := s.ai, s.bi
		if ai == nil {
			ai, bi = s.batchOffsets()
		}
		for t := range ai {
			sgemmEp(p, m, nn, k, af[ai[t]*m*k:], k, 1, bf[bi[t]*k*nn:], nn, 1, y[t*m*nn:], nn, ep)
		}
	}
}

// Gemm.

// prepareGemm is Gemm's Op.Prepare: under TacticGemvPanels with a
// constant B, B's panels are packed at bind time.
func prepareGemm(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
	if len(in) < 2 || in[0] == nil || in[1] == nil || !allF32(in[0], in[1], kernel.Input(in, 2)) ||
		len(in[0].Shape) != 2 || len(in[1].Shape) != 2 {
		return nil
	}
	g, err := gemmGeom(n, in[0].Shape, in[1].Shape, kernel.Input(in, 2))
	if err != nil {
		return err
	}
	if b, ok := in[1].Data.([]float32); ok && len(b) > 0 && gemvPanelsOK(machineOf(c), n, g) {
		gemvPackOf(c, n, g, b)
	} else if ok {
		preparePackedB(c, n, g.m, b, g.brs, g.bcs, g.k, g.n)
	}
	return nil
}

func intoGemm(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 2, "Gemm"); err != nil {
		return err
	}
	if !allF32(in[0], in[1], kernel.Input(in, 2), out[0]) || len(in[0].Shape) != 2 || len(in[1].Shape) != 2 {
		return viaRun(runGemm)(c, n, in, out)
	}
	g, err := gemmGeom(n, in[0].Shape, in[1].Shape, kernel.Input(in, 2))
	if err != nil {
		return err
	}
	if out[0].Len() != g.m*g.n {
		return fmt.Errorf("nn: Gemm: preallocated output has %d elements, want %d x %d", out[0].Len(), g.m, g.n)
	}
	var cf []float32
	if ct := kernel.Input(in, 2); ct != nil {
		cf = ct.Data.([]float32)
	}
	gemmF32(machineOf(c), n, g, in[0].Data.([]float32), in[1].Data.([]float32), cf, out[0].Data.([]float32))
	return nil
}

// gemmShape is Gemm's geometry: A and B views and how C broadcasts.
type gemmShape struct {
	m, n, k                int
	ars, acs, brs, bcs     int
	cRowStride, cColStride int // index of C[i,j] = i*cRowStride + j*cColStride
}

func gemmGeom(n *ir.Node, as, bs []int, c *tensor.Tensor) (gemmShape, error) {
	ta, tb := n.Int("transA", 0) != 0, n.Int("transB", 0) != 0
	g := gemmShape{m: as[0], k: as[1], ars: as[1], acs: 1}
	if ta {
		g.m, g.k = g.k, g.m
		g.ars, g.acs = 1, g.m
	}
	k2 := bs[0]
	g.n, g.brs, g.bcs = bs[1], bs[1], 1
	if tb {
		k2, g.n = g.n, k2
		g.brs, g.bcs = 1, k2
	}
	if g.k != k2 {
		return g, fmt.Errorf("nn: Gemm: inner dimensions differ: A %v (transA %v), B %v (transB %v)", as, ta, bs, tb)
	}
	if c != nil {
		cs := c.Shape
		switch len(cs) {
		case 0:
		case 1:
			if cs[0] != 1 && cs[0] != g.n {
				return g, fmt.Errorf("nn: Gemm: C %v does not broadcast to [%d %d]", cs, g.m, g.n)
			}
			if cs[0] == g.n {
				g.cColStride = 1
			}
		case 2:
			if (cs[0] != 1 && cs[0] != g.m) || (cs[1] != 1 && cs[1] != g.n) {
				return g, fmt.Errorf("nn: Gemm: C %v does not broadcast to [%d %d]", cs, g.m, g.n)
			}
			if cs[0] == g.m {
				g.cRowStride = cs[1]
			}
			if cs[1] == g.n {
				g.cColStride = 1
			}
		default:
			return g, fmt.Errorf("nn: Gemm: C must have rank <= 2, got %v", cs)
		}
	}
	return g, nil
}

// gemmF32 is the float32 Gemm into y: the chains, then
// y = float32(alpha*acc) + float32(beta*C), each product rounded on its own
// (the conversions forbid fusion); alpha == 1 skips its product.
func gemmF32(pool machine, n *ir.Node, g gemmShape, af, bf, cf, y []float32) {
	if gemvPanelsOK(pool, n, g) {
		gemvPanels(pool, g, af, gemvPackOf(pool.k, n, g, bf), y)
	} else {
		pb := packedBOf(pool.k, n, bf, g.brs, g.bcs, g.k, g.n)
		sgemmPacked(pool, g.m, g.n, g.k, af, g.ars, g.acs, bf, g.brs, g.bcs, pb, y, g.n, epi{})
	}
	alpha, beta := n.Float("alpha", 1), n.Float("beta", 1)
	if alpha == 1 && cf == nil {
		return
	}
	for i := 0; i < g.m; i++ {
		row := y[i*g.n : (i+1)*g.n]
		for j, v := range row {
			if alpha != 1 {
				v = float32(alpha * v)
			}
			if cf != nil {
				v += float32(beta * cf[i*g.cRowStride+j*g.cColStride])
			}
			row[j] = v
		}
	}
}

// Conv.

// convSetupOf returns the float32 Conv's geometry for in's shapes, kept in
// c's State.
func convSetupOf(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) (*convSetup, error) {
	x, w, b := in[0], in[1], kernel.Input(in, 2)
	return cached(c, n, in, func() (*convSetup, error) {
		s, err := setupConv(n, x.Shape, w.Shape)
		if err != nil {
			return nil, err
		}
		if b != nil && (len(b.Shape) != 1 || b.Shape[0] != s.M) {
			return nil, fmt.Errorf("nn: Conv: bias shape %v, want [%d]", b.Shape, s.M)
		}
		if !s.pointwise() {
			s.tabs = s.g.taps(false)
		}
		return s, nil
	})
}

// prepareConv is Conv's Op.Prepare: the geometry and im2col taps, at bind
// time (conv.direct packs its weights on the first call, into the same
// kept setup).
func prepareConv(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
	if len(in) < 2 || in[0] == nil || in[1] == nil || !allF32(in[0], in[1], kernel.Input(in, 2)) {
		return nil
	}
	_, err := convSetupOf(c, n, in)
	return err
}

func intoConv(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 2, "Conv"); err != nil {
		return err
	}
	x, w, b := in[0], in[1], kernel.Input(in, 2)
	if !allF32(x, w, b, out[0]) {
		return viaRun(runConv)(c, n, in, out)
	}
	s, err := convSetupOf(c, n, in)
	if err != nil {
		return err
	}
	if out[0].Len() != s.N*s.M*prod(s.g.out) {
		return fmt.Errorf("nn: Conv: preallocated output has %d elements, want %v", out[0].Len(), s.outShape())
	}
	var bf []float32
	if b != nil {
		bf = b.Data.([]float32)
	}
	// A fused layer's epilogue (kernel.Ctx.Epilogue) is applied here when
	// it fits the output; otherwise the fused layer runs its passes.
	pool := machineOf(c)
	ep, ok := epiOf(pool, &c.Epilogue, out[0].Len())
	convF32(pool, s, x.Data.([]float32), w.Data.([]float32), bf, out[0].Data.([]float32), ep)
	if ep.on && ok {
		c.Epilogue.Applied = true
	}
	return nil
}

// Pooling.

// poolWindows is a pooling geometry with every window's tap offsets
// precomputed (g.windows' order): window p reads offs[start[p]:start[p+1]]
// and has nPad[p] taps inside the padded extent.
type poolWindows struct {
	g           *geom
	offs, start []int
	nPad        []int
	flat        *maxFlatTab // a MaxPool's maxFlat layout, where it fits (maxpool_flat.go)
}

func cachedPool(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) (*poolWindows, error) {
	return cached(c, n, in[:1], func() (*poolWindows, error) {
		g, err := poolSetup(n, in[0].Shape)
		if err != nil {
			return nil, err
		}
		pw := windowTable(g)
		pw.flat = maxFlatTabFor(n, g)
		return pw, nil
	})
}

// preparePool is the pools' Op.Prepare: the window table, at bind time.
func preparePool(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) error {
	if len(in) < 1 || in[0] == nil || !allF32(in[0]) {
		return nil
	}
	_, err := cachedPool(c, n, in)
	return err
}

// windowTable precomputes g's windows.
func windowTable(g *geom) *poolWindows {
	w := &poolWindows{g: g, start: []int{0}}
	g.windows(func(_ int, offs []int, nPad int) {
		w.offs = append(w.offs, offs...)
		w.start = append(w.start, len(w.offs))
		w.nPad = append(w.nPad, nPad)
	})
	return w
}

func intoMaxPool(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 1, "MaxPool"); err != nil {
		return err
	}
	x := in[0]
	wantIdx := len(n.Outputs) > 1 && n.Outputs[1] != "" && len(out) > 1 && out[1] != nil
	if !allF32(x, out[0]) || (wantIdx && n.Int("storage_order", 0) != 0) {
		return viaRun(runMaxPool)(c, n, in, out)
	}
	pw, err := cachedPool(c, n, in)
	if err != nil {
		return err
	}
	g := pw.g
	NC := x.Shape[0] * x.Shape[1]
	if out[0].Len() != NC*prod(g.out) {
		return fmt.Errorf("nn: MaxPool: preallocated output has %d elements, want %d", out[0].Len(), NC*prod(g.out))
	}
	if !wantIdx && maxPool2DOK(g) {
		maxPool2DTab(machineOf(c), g, pw.flat, NC, x.Data.([]float32), out[0].Data.([]float32))
		return nil
	}
	var idx []int64
	if wantIdx {
		if idx, _ = out[1].Data.([]int64); len(idx) != out[0].Len() {
			return fmt.Errorf("nn: MaxPool: preallocated indices do not match the output")
		}
	}
	maxPoolInto(x.Data.([]float32), pw, NC, out[0].Data.([]float32), idx)
	return nil
}

func intoAveragePool(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 1, "AveragePool"); err != nil {
		return err
	}
	x := in[0]
	if !allF32(x, out[0]) {
		return viaRun(runAveragePool)(c, n, in, out)
	}
	pw, err := cachedPool(c, n, in)
	if err != nil {
		return err
	}
	g := pw.g
	NC := x.Shape[0] * x.Shape[1]
	if out[0].Len() != NC*prod(g.out) {
		return fmt.Errorf("nn: AveragePool: preallocated output has %d elements, want %d", out[0].Len(), NC*prod(g.out))
	}
	if avgPoolS1OK(g) || avgPoolSOK(g) {
		avgPoolPlanes(machineOf(c), g, NC, x.Data.([]float32), out[0].Data.([]float32), n.Int("count_include_pad", 0) != 0)
		return nil
	}
	sumPoolF32(x.Data.([]float32), pw, NC, out[0].Data.([]float32), n.Int("count_include_pad", 0) != 0, false, 0)
	return nil
}

func intoGlobalPool(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if err := need(in, 1, n.OpType); err != nil {
		return err
	}
	x := in[0]
	if !allF32(x, out[0]) || len(x.Shape) < 2 {
		return viaRun(runGlobalPool)(c, n, in, out)
	}
	NC := x.Shape[0] * x.Shape[1]
	if out[0].Len() != NC {
		return fmt.Errorf("nn: %s: preallocated output has %d elements, want %d", n.OpType, out[0].Len(), NC)
	}
	globalPool32(c, x.Data.([]float32), prod(x.Shape[2:]), n.OpType == "GlobalMaxPool", out[0].Data.([]float32))
	return nil
}
