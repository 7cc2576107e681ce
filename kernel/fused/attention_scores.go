package fused

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Attention's scores: the three steps
//
//	t = x / scale        (Div by a one-element divisor)
//	u = t + mask         (Add of a mask whose rows are the scores' rows)
//	y = Softmax(u)       (over the last axis)
//
// run as one step, a block of 8 rows of scores at a time while the block
// is in L1, with the very operations of the three kernels in their order:
// each element's correctly rounded division, its float32 addition with
// the Add's operands in the node's order, then per row the softmax of
// package reduce (softmaxLine32): the first-NaN maximum
// (vmath.MaxFirstNaN32), e = Exp32(u - max), the sum of the e in index
// order from +0 (vmath.SumRows32: the same sequential chain per row), and
// each e divided by the sum. The intermediate tensors t and u are never
// written; the bits of y are those of the three steps.

// scoresStep is the fused step's configuration.
type scoresStep struct {
	d        int   // row length (the scores' last dimension)
	rows     int   // rows of scores
	maskRow  []int // offset of each score row's mask row
	addFirst bool  // the Add's first operand is t (else the mask)
}

// fuseScores replaces each Div, Add, Softmax run of r's steps that fits
// with one scores step. It runs once, when r is prepared.
func (r *chainRun) fuseScores() {
	for i := 0; i+2 < len(r.steps); i++ {
		s, ok := r.scoresAt(i)
		if !ok {
			continue
		}
		div, add, sm := r.steps[i], r.steps[i+1], r.steps[i+2]
		mask := add.in[1]
		if add.in[1] == div.out[0] {
			mask = add.in[0]
		}
		st := chainStep{
			op:  &kernel.Op{Into: s.into},
			n:   sm.n,
			in:  []*tensor.Tensor{div.in[0], div.in[1], mask},
			out: []*tensor.Tensor{sm.out[0]},
		}
		r.steps = append(append(r.steps[:i:i], st), r.steps[i+3:]...)
	}
}

// scoresAt reports whether steps i, i+1, i+2 are a Div, Add, Softmax run
// that the scores step computes exactly, and its configuration.
func (r *chainRun) scoresAt(i int) (*scoresStep, bool) {
	div, add, sm := r.steps[i], r.steps[i+1], r.steps[i+2]
	std := func(n *ir.Node, op string, v int64) bool {
		return n.Domain == "" && n.OpType == op && n.Version >= v
	}
	if !std(div.n, "Div", 7) || !std(add.n, "Add", 7) || !std(sm.n, "Softmax", 1) {
		return nil, false
	}
	if len(div.in) != 2 || len(add.in) != 2 || len(sm.in) != 1 || len(div.out) != 1 || len(add.out) != 1 || len(sm.out) < 1 {
		return nil, false
	}
	x, sc, t, u, y := div.in[0], div.in[1], div.out[0], add.out[0], sm.out[0]
	if x == nil || sc == nil || t == nil || u == nil || y == nil || sm.in[0] != u {
		return nil, false
	}
	addFirst := add.in[0] == t
	mask := add.in[1]
	if !addFirst {
		if add.in[1] != t {
			return nil, false
		}
		mask = add.in[0]
	}
	if mask == nil || mask == t {
		return nil, false
	}
	for _, v := range []*tensor.Tensor{x, sc, t, mask, u, y} {
		if v.DType != tensor.Float32 {
			return nil, false
		}
	}
	shape := x.Shape
	rank := len(shape)
	if rank == 0 || tensor.NumElems(sc.Shape) != 1 || len(sc.Shape) > rank ||
		!equalInts(t.Shape, shape) || !equalInts(u.Shape, shape) || !equalInts(y.Shape, shape) {
		return nil, false
	}
	// Softmax over the last axis only (from opset 13 the one axis; before,
	// the 2-D coercion at the last axis is the same rows).
	def := int64(-1)
	if sm.n.Version < 13 {
		def = 1
	}
	ax := sm.n.Int("axis", def)
	if ax < 0 {
		ax += int64(rank)
	}
	if ax != int64(rank-1) {
		return nil, false
	}
	// The mask broadcasts to the scores with its last dimension whole.
	ms := mask.Shape
	if len(ms) == 0 || len(ms) > rank || ms[len(ms)-1] != shape[rank-1] {
		return nil, false
	}
	d := shape[rank-1]
	if d == 0 {
		return nil, false
	}
	stride := make([]int, rank) // the mask's stride along each score axis
	acc := 1
	for k := rank - 1; k >= 0; k-- {
		mk := k - (rank - len(ms))
		if mk < 0 {
			continue
		}
		switch ms[mk] {
		case shape[k]:
			if ms[mk] != 1 {
				stride[k] = acc
			}
		case 1:
		default:
			return nil, false
		}
		acc *= ms[mk]
	}
	// Nothing else may read t or u, and neither may be the result.
	for j, s := range r.steps {
		for _, v := range s.in {
			if (v == t && j != i+1) || (v == u && j != i+2) {
				return nil, false
			}
		}
		if j != i && j != i+1 {
			for _, v := range s.out {
				if v == t || v == u {
					return nil, false
				}
			}
		}
	}
	if r.result == t || r.result == u {
		return nil, false
	}
	rows := tensor.NumElems(shape) / d
	off := make([]int, rows)
	var idx [16]int
	if rank-1 > len(idx) {
		return nil, false
	}
	o := 0
	for row := 0; row < rows; row++ {
		off[row] = o
		for k := rank - 2; k >= 0; k-- {
			idx[k]++
			o += stride[k]
			if idx[k] < shape[k] {
				break
			}
			o -= stride[k] * shape[k]
			idx[k] = 0
		}
	}
	return &scoresStep{d: d, rows: rows, maskRow: off, addFirst: addFirst}, true
}

// into computes the scores step: in = (x, divisor, mask), out = (y).
func (s *scoresStep) into(c *kernel.Ctx, _ *ir.Node, in, out []*tensor.Tensor) error {
	xs, ok1 := in[0].Data.([]float32)
	sc, ok2 := in[1].Data.([]float32)
	ms, ok3 := in[2].Data.([]float32)
	ys, ok4 := out[0].Data.([]float32)
	if !ok1 || !ok2 || !ok3 || !ok4 || len(sc) != 1 || len(xs) != s.rows*s.d || len(ys) != len(xs) {
		return fmt.Errorf("attention scores: unexpected operands")
	}
	d, scale, v := s.d, sc[0], c.Vec()
	var sums [8]float32
	for r0 := 0; r0 < s.rows; r0 += 8 {
		k := min(8, s.rows-r0)
		blk := ys[r0*d : (r0+k)*d]
		v.DivScalar32s(blk, xs[r0*d:(r0+k)*d], scale)
		for l := 0; l < k; l++ {
			row := blk[l*d : (l+1)*d]
			m := ms[s.maskRow[r0+l]:][:d]
			if s.addFirst {
				v.Add32s(row, row, m)
			} else {
				v.Add32s(row, m, row)
			}
			v.SubScalar32s(row, row, v.MaxFirstNaN32(row))
		}
		v.Exp32s(blk, blk)
		v.SumRows32(sums[:k], blk, d)
		for l := 0; l < k; l++ {
			row := blk[l*d : (l+1)*d]
			v.DivScalar32s(row, row, sums[l])
		}
	}
	return nil
}
