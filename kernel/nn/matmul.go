package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// mmShape is the geometry of a (batched, broadcast) matrix product.
type mmShape struct {
	m, k, n int
	batch   []int // broadcast batch shape
	out     []int // output shape (with 1-D operands' dims removed)
	aBatch  []int // A's batch dims, B's batch dims (unbroadcast)
	bBatch  []int
	ai, bi  []int // batchOffsets, when precomputed
}

// matmulShape applies numpy matmul rules to shapes a and b.
func matmulShape(a, b []int) (*mmShape, error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("nn: MatMul: operands must have rank >= 1, got %v and %v", a, b)
	}
	aa, bb := a, b
	if len(a) == 1 {
		aa = []int{1, a[0]}
	}
	if len(b) == 1 {
		bb = []int{b[0], 1}
	}
	s := &mmShape{m: aa[len(aa)-2], k: aa[len(aa)-1], n: bb[len(bb)-1]}
	if bb[len(bb)-2] != s.k {
		return nil, fmt.Errorf("nn: MatMul: inner dimensions differ: %v x %v", a, b)
	}
	s.aBatch, s.bBatch = aa[:len(aa)-2], bb[:len(bb)-2]
	batch, err := kernel.BroadcastShapes(s.aBatch, s.bBatch)
	if err != nil {
		return nil, fmt.Errorf("nn: MatMul: batch dimensions: %w", err)
	}
	s.batch = batch
	s.out = append([]int{}, batch...)
	if len(a) > 1 {
		s.out = append(s.out, s.m)
	}
	if len(b) > 1 {
		s.out = append(s.out, s.n)
	}
	return s, nil
}

// batchOffsets returns, per output batch element, the matrix index into A
// and B.
func (s *mmShape) batchOffsets() (ai, bi []int) {
	nb := prod(s.batch)
	ai, bi = make([]int, nb), make([]int, nb)
	it := kernel.NewIndexer(s.batch, s.aBatch, s.bBatch)
	for i := 0; i < nb; i++ {
		ai[i], bi[i] = it.Offs[0], it.Offs[1]
		it.Next()
	}
	return ai, bi
}

// bUnbatched reports whether B has no batch elements beyond one, so that A's
// batches can be folded into M (rows are independent chains, so this is
// exactly the per-batch result).
func (s *mmShape) bUnbatched() bool { return prod(s.bBatch) == 1 && len(s.aBatch) >= len(s.bBatch) }

func runMatMul(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "MatMul"); err != nil {
		return nil, err
	}
	a, b := in[0], in[1]
	if err := sameDT("MatMul", a, b); err != nil {
		return nil, err
	}
	s, err := matmulShape(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	m, k, nn := s.m, s.k, s.n
	ai, bi := s.batchOffsets()
	switch ad := a.Data.(type) {
	case []float64:
		bd := b.Data.([]float64)
		out := make([]float64, prod(s.out))
		for t := range ai {
			dgemm(machineOf(c), m, nn, k, ad[ai[t]*m*k:], k, 1, bd[bi[t]*k*nn:], nn, 1, out[t*m*nn:], nn)
		}
		return []*tensor.Tensor{tensor.From(out, s.out...)}, nil
	case []int32:
		return []*tensor.Tensor{tensor.From(imatmul(s, ad, b.Data.([]int32)), s.out...)}, nil
	case []int64:
		return []*tensor.Tensor{tensor.From(imatmul(s, ad, b.Data.([]int64)), s.out...)}, nil
	case []uint32:
		return []*tensor.Tensor{tensor.From(imatmul(s, ad, b.Data.([]uint32)), s.out...)}, nil
	case []uint64:
		return []*tensor.Tensor{tensor.From(imatmul(s, ad, b.Data.([]uint64)), s.out...)}, nil
	}
	af, _, err := floatIn(a, "MatMul A")
	if err != nil {
		return nil, err
	}
	bf, _, _ := floatIn(b, "MatMul B")
	out := make([]float32, prod(s.out))
	s.ai, s.bi = ai, bi
	matmulF32(machineOf(c), s, af, bf, nil, out, epi{})
	return []*tensor.Tensor{f32As(a.DType, s.out, out)}, nil
}

// imatmul is an integer matrix product with wrapping arithmetic.
func imatmul[T kernel.Integer](s *mmShape, a, b []T) []T {
	m, k, n := s.m, s.k, s.n
	ai, bi := s.batchOffsets()
	out := make([]T, len(ai)*m*n)
	for t := range ai {
		A, B, C := a[ai[t]*m*k:], b[bi[t]*k*n:], out[t*m*n:]
		for i := 0; i < m; i++ {
			for kk := 0; kk < k; kk++ {
				av := A[i*k+kk]
				row := B[kk*n : kk*n+n]
				c := C[i*n : i*n+n]
				for j := range row {
					c[j] += av * row[j]
				}
			}
		}
	}
	return out
}

// inferMatMulDims applies matmul's shape rule to symbolic shapes.
func inferMatMulDims(a, b []ir.Dim) ([]ir.Dim, error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("nn: MatMul: operands must have rank >= 1")
	}
	aa, bb := a, b
	if len(a) == 1 {
		aa = []ir.Dim{ir.Fixed(1), a[0]}
	}
	if len(b) == 1 {
		bb = []ir.Dim{b[0], ir.Fixed(1)}
	}
	ka, kb := aa[len(aa)-1], bb[len(bb)-2]
	if ka.Known() && kb.Known() && ka.Value != kb.Value {
		return nil, fmt.Errorf("nn: MatMul: inner dimensions differ: %v vs %v", ka, kb)
	}
	bt, err := kernel.InferBroadcast(tensor.Float32, []ir.InferInput{
		{Present: true, Type: ir.Type{RankKnown: true, Shape: aa[:len(aa)-2]}},
		{Present: true, Type: ir.Type{RankKnown: true, Shape: bb[:len(bb)-2]}},
	})
	if err != nil {
		return nil, err
	}
	out := append([]ir.Dim{}, bt.Shape...)
	if len(a) > 1 {
		out = append(out, aa[len(aa)-2])
	}
	if len(b) > 1 {
		out = append(out, bb[len(bb)-1])
	}
	return out, nil
}

func inferMatMulAs(dt func(a ir.Type) tensor.DType) kernel.InferFunc {
	return func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
		ia, ib := 0, 1
		if n.OpType == "QLinearMatMul" {
			ia, ib = 0, 3
		}
		if err := needT(in, ib+1, n.OpType); err != nil {
			return nil, err
		}
		t := dt(in[ia].Type)
		a, ok1 := dimsOf(in[ia].Type)
		b, ok2 := dimsOf(in[ib].Type)
		if !ok1 || !ok2 {
			return []ir.Type{kernel.UnknownRank(t)}, nil
		}
		d, err := inferMatMulDims(a, b)
		if err != nil {
			return nil, err
		}
		return []ir.Type{{DType: t, Shape: d, RankKnown: true}}, nil
	}
}

func runGemm(ctx *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need(in, 2, "Gemm"); err != nil {
		return nil, err
	}
	a, b, c := in[0], in[1], kernel.Input(in, 2)
	if err := sameDT("Gemm", a, b, c); err != nil {
		return nil, err
	}
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, fmt.Errorf("nn: Gemm: A and B must be 2-D, got %v and %v", a.Shape, b.Shape)
	}
	ta, tb := n.Int("transA", 0) != 0, n.Int("transB", 0) != 0
	m, k := a.Shape[0], a.Shape[1]
	ars, acs := k, 1
	if ta {
		m, k = k, m
		ars, acs = 1, m
	}
	k2, nn := b.Shape[0], b.Shape[1]
	brs, bcs := nn, 1
	if tb {
		k2, nn = nn, k2
		brs, bcs = 1, k2
	}
	if k != k2 {
		return nil, fmt.Errorf("nn: Gemm: inner dimensions differ: A %v (transA %v), B %v (transB %v)", a.Shape, ta, b.Shape, tb)
	}
	out := []int{m, nn}
	var cIdx []int
	if c != nil {
		if len(c.Shape) > 2 {
			return nil, fmt.Errorf("nn: Gemm: C must have rank <= 2, got %v", c.Shape)
		}
		if _, err := kernel.BroadcastShapes(c.Shape, out); err != nil {
			return nil, fmt.Errorf("nn: Gemm: C %v does not broadcast to %v", c.Shape, out)
		}
		cIdx = make([]int, m*nn)
		kernel.Broadcast2(out, out, c.Shape, func(i, _, ic int) { cIdx[i] = ic })
	}
	alpha, beta := n.Float("alpha", 1), n.Float("beta", 1)
	switch ad := a.Data.(type) {
	case []float64:
		y := make([]float64, m*nn)
		dgemm(machineOf(ctx), m, nn, k, ad, ars, acs, b.Data.([]float64), brs, bcs, y, nn)
		al, be := float64(alpha), float64(beta)
		for i := range y {
			y[i] = float64(al * y[i])
			if c != nil {
				y[i] += float64(be * c.Data.([]float64)[cIdx[i]])
			}
		}
		return []*tensor.Tensor{tensor.From(y, out...)}, nil
	case []int32:
		return []*tensor.Tensor{tensor.From(igemm(m, nn, k, ad, ars, acs, b.Data.([]int32), brs, bcs, c, cIdx, int32(alpha), int32(beta)), out...)}, nil
	case []int64:
		return []*tensor.Tensor{tensor.From(igemm(m, nn, k, ad, ars, acs, b.Data.([]int64), brs, bcs, c, cIdx, int64(alpha), int64(beta)), out...)}, nil
	case []uint32:
		return []*tensor.Tensor{tensor.From(igemm(m, nn, k, ad, ars, acs, b.Data.([]uint32), brs, bcs, c, cIdx, uint32(alpha), uint32(beta)), out...)}, nil
	case []uint64:
		return []*tensor.Tensor{tensor.From(igemm(m, nn, k, ad, ars, acs, b.Data.([]uint64), brs, bcs, c, cIdx, uint64(alpha), uint64(beta)), out...)}, nil
	}
	af, _, err := floatIn(a, "Gemm A")
	if err != nil {
		return nil, err
	}
	bf, _, _ := floatIn(b, "Gemm B")
	var cf []float32
	if c != nil {
		cf, _, _ = floatIn(c, "Gemm C")
	}
	g, err := gemmGeom(n, a.Shape, b.Shape, c)
	if err != nil {
		return nil, err
	}
	y := make([]float32, m*nn)
	gemmF32(machineOf(ctx), n, g, af, bf, cf, y)
	return []*tensor.Tensor{f32As(a.DType, out, y)}, nil
}

func igemm[T kernel.Integer](m, n, k int, a []T, ars, acs int, b []T, brs, bcs int, c *tensor.Tensor, cIdx []int, alpha, beta T) []T {
	y := make([]T, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var acc T
			for kk := 0; kk < k; kk++ {
				acc += a[i*ars+kk*acs] * b[kk*brs+j*bcs]
			}
			y[i*n+j] = alpha * acc
			if c != nil {
				y[i*n+j] += beta * c.Data.([]T)[cIdx[i*n+j]]
			}
		}
	}
	return y
}

func inferGemm(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 2, "Gemm"); err != nil {
		return nil, err
	}
	dt := in[0].Type.DType
	a, ok1 := dimsOf(in[0].Type)
	b, ok2 := dimsOf(in[1].Type)
	if !ok1 || !ok2 {
		return []ir.Type{{DType: dt, Shape: unknownDims(2), RankKnown: true}}, nil
	}
	if len(a) != 2 || len(b) != 2 {
		return nil, fmt.Errorf("nn: Gemm: A and B must be 2-D, got rank %d and %d", len(a), len(b))
	}
	m, nn := a[0], b[1]
	if n.Int("transA", 0) != 0 {
		m = a[1]
	}
	if n.Int("transB", 0) != 0 {
		nn = b[0]
	}
	return []ir.Type{{DType: dt, Shape: []ir.Dim{m, nn}, RankKnown: true}}, nil
}
