package fused

import (
	"fmt"
	"slices"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Attention's scores: the steps
//
//	t = x / scale        (Div by a one-element divisor; optional)
//	u = t + mask         (Adds of masks that broadcast to the scores, the
//	                      last axis whole or 1; any number, Reshapes that
//	                      keep the last axis between them: Swin's
//	                      relative-position bias, then its shifted-window
//	                      mask in a view of five dimensions)
//	y = Softmax(u)       (over the last axis)
//
// run as one step, a block of 8 rows of scores at a time while the block
// is in L1, with the very operations of the kernels in their order: each
// element's correctly rounded division, its float32 additions with each
// Add's operands in the node's order, then per row the softmax of package
// reduce (softmaxLine32): the first-NaN maximum (vmath.MaxFirstNaN32),
// e = Exp32(u - max), the sum of the e in index order from +0
// (vmath.SumRows32: the same sequential chain per row), and each e
// divided by the sum. A Reshape that keeps the last axis moves no value
// (row r of its input is row r of its output), so the rows are the same
// rows throughout. The intermediate tensors are never written; the bits
// of y are those of the steps.

// scoresStep is the fused step's configuration. Its inputs are x, the
// divisor when div, then each Add's mask; its output is y.
type scoresStep struct {
	d    int  // row length (the scores' last dimension)
	rows int  // rows of scores
	div  bool // x is divided by a one-element divisor first
	adds []scoresAdd
	// row is scratch for a mask broadcast along the row (one value a
	// row): a step belongs to one chainRun, which one call runs at a
	// time.
	row []float32
}

// scoresAdd is one Add of the step.
type scoresAdd struct {
	n       int   // the mask's elements
	maskRow []int // offset of each score row's mask row (or value)
	bcast   bool  // the mask's last dimension is 1: one value a row
	first   bool  // the scores are the Add's first operand (else the mask)
}

// fuseScores replaces each run of r's steps that fits (scoresAt) with one
// scores step. It runs once, when r is prepared.
func (r *chainRun) fuseScores() {
	for i := 0; i < len(r.steps); i++ {
		s, ins, n, ok := r.scoresAt(i)
		if !ok {
			continue
		}
		sm := r.steps[i+n-1]
		st := chainStep{
			op:  &kernel.Op{Into: s.into},
			n:   sm.n,
			in:  ins,
			out: []*tensor.Tensor{sm.out[0]},
		}
		r.steps = append(append(r.steps[:i:i], st), r.steps[i+n:]...)
	}
}

// scoresAt reports whether the steps from i are a run that the scores
// step computes exactly ([Div], then Adds and Reshapes, then Softmax,
// with at least a Div or an Add), its configuration, its inputs and how
// many steps it replaces.
func (r *chainRun) scoresAt(i int) (*scoresStep, []*tensor.Tensor, int, bool) {
	std := func(n *ir.Node, op string, v int64) bool {
		return n.Domain == "" && n.OpType == op && n.Version >= v
	}
	f32 := func(ts ...*tensor.Tensor) bool {
		for _, t := range ts {
			if t == nil || t.DType != tensor.Float32 {
				return false
			}
		}
		return true
	}
	first := r.steps[i]
	if len(first.in) < 1 || len(first.out) != 1 || !f32(first.in[0], first.out[0]) {
		return nil, nil, 0, false
	}
	shape := first.out[0].Shape
	rank := len(shape)
	if rank == 0 || shape[rank-1] == 0 {
		return nil, nil, 0, false
	}
	d := shape[rank-1]
	st := &scoresStep{d: d, rows: tensor.NumElems(shape) / d}
	var ins []*tensor.Tensor
	var inner []*tensor.Tensor // values the step no longer writes
	var cur *tensor.Tensor     // the running scores
	j := i
	if s := r.steps[j]; std(s.n, "Div", 7) && len(s.in) == 2 && f32(s.in[1]) && tensor.NumElems(s.in[1].Shape) == 1 &&
		len(s.in[1].Shape) <= rank && equalInts(s.in[0].Shape, shape) && s.in[1] != s.in[0] {
		st.div = true
		ins = append(ins, s.in[0], s.in[1])
		cur = s.out[0]
		inner = append(inner, cur)
		j++
	}
	for ; j < len(r.steps); j++ {
		s := r.steps[j]
		if len(s.out) < 1 || !f32(s.out[0]) {
			return nil, nil, 0, false
		}
		switch {
		case std(s.n, "Add", 7) && len(s.in) == 2 && len(s.out) == 1 && f32(s.in[0], s.in[1]):
			a := scoresAdd{first: true}
			mask := s.in[1]
			switch {
			case cur == nil:
				// The run starts with this Add: the scores are the
				// operand of the result's shape.
				if !equalInts(s.in[0].Shape, s.out[0].Shape) {
					a.first, mask = false, s.in[0]
				}
				x := s.in[0]
				if !a.first {
					x = s.in[1]
				}
				if !equalInts(x.Shape, s.out[0].Shape) || x == mask {
					return nil, nil, 0, false
				}
				ins = append(ins, x)
			case s.in[0] == cur:
			case s.in[1] == cur:
				a.first, mask = false, s.in[0]
			default:
				return nil, nil, 0, false
			}
			if mask == cur || slices.Contains(inner, mask) {
				return nil, nil, 0, false
			}
			off, bcast, ok := maskRows(mask.Shape, s.out[0].Shape)
			if !ok {
				return nil, nil, 0, false
			}
			a.maskRow, a.bcast, a.n = off, bcast, tensor.NumElems(mask.Shape)
			st.adds = append(st.adds, a)
			ins = append(ins, mask)
		case std(s.n, "Reshape", 5) && len(s.in) == 2 && len(s.out) == 1 && cur != nil && s.in[0] == cur:
			o := s.out[0].Shape
			if len(o) == 0 || o[len(o)-1] != d || tensor.NumElems(o) != st.rows*d {
				return nil, nil, 0, false
			}
		case std(s.n, "Softmax", 1) && len(s.in) == 1 && cur != nil && s.in[0] == cur:
			sh := cur.Shape
			def := int64(-1) // from opset 13 the one axis; before, the 2-D coercion at the last axis is the same rows
			if s.n.Version < 13 {
				def = 1
			}
			ax := s.n.Int("axis", def)
			if ax < 0 {
				ax += int64(len(sh))
			}
			if ax != int64(len(sh)-1) || !equalInts(s.out[0].Shape, sh) || (!st.div && len(st.adds) == 0) || !r.onlyInside(i, j, inner) {
				return nil, nil, 0, false
			}
			if slices.ContainsFunc(st.adds, func(a scoresAdd) bool { return a.bcast }) {
				st.row = make([]float32, d)
			}
			return st, ins, j - i + 1, true
		default:
			return nil, nil, 0, false
		}
		cur = s.out[0]
		inner = append(inner, cur)
	}
	return nil, nil, 0, false
}

// onlyInside reports whether the values inner, written by steps i .. j-1,
// are read only by steps i .. j, written by no other step, and none is
// the chain's result.
func (r *chainRun) onlyInside(i, j int, inner []*tensor.Tensor) bool {
	for k, s := range r.steps {
		if k >= i && k <= j {
			continue
		}
		for _, v := range s.in {
			if slices.Contains(inner, v) {
				return false
			}
		}
		for _, v := range s.out {
			if slices.Contains(inner, v) {
				return false
			}
		}
	}
	return !slices.Contains(inner, r.result)
}

// maskRows returns, for a mask of shape ms added to scores of shape
// shape (numpy broadcasting, the mask not larger), the offset of each
// score row's mask row; bcast when the mask's last dimension is 1 (the
// offset is then of the row's one value).
func maskRows(ms, shape []int) (off []int, bcast bool, ok bool) {
	rank := len(shape)
	if len(ms) > rank || rank-1 > 16 {
		return nil, false, false
	}
	d := shape[rank-1]
	last := 1
	if len(ms) > 0 {
		last = ms[len(ms)-1]
	}
	switch last {
	case d:
	case 1:
		bcast = d != 1
	default:
		return nil, false, false
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
			return nil, false, false
		}
		acc *= ms[mk]
	}
	rows := tensor.NumElems(shape) / d
	off = make([]int, rows)
	var idx [16]int
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
	return off, bcast, true
}

// into computes the scores step: in = (x, [divisor], masks...), out = (y).
func (s *scoresStep) into(c *kernel.Ctx, _ *ir.Node, in, out []*tensor.Tensor) error {
	xs, ok1 := in[0].Data.([]float32)
	ys, ok2 := out[0].Data.([]float32)
	mi := 1
	var scale float32
	if s.div {
		sc, ok := in[1].Data.([]float32)
		if !ok || len(sc) != 1 {
			return fmt.Errorf("attention scores: unexpected divisor")
		}
		scale, mi = sc[0], 2
	}
	if !ok1 || !ok2 || len(in) != mi+len(s.adds) || len(xs) != s.rows*s.d || len(ys) != len(xs) {
		return fmt.Errorf("attention scores: unexpected operands")
	}
	var masks [8][]float32
	if len(s.adds) > len(masks) {
		return fmt.Errorf("attention scores: %d masks", len(s.adds))
	}
	for a := range s.adds {
		m, ok := in[mi+a].Data.([]float32)
		if !ok || len(m) != s.adds[a].n {
			return fmt.Errorf("attention scores: mask %d is not %d float32 values", a, s.adds[a].n)
		}
		masks[a] = m
	}
	d, v := s.d, c.Vec()
	var sums [8]float32
	for r0 := 0; r0 < s.rows; r0 += 8 {
		k := min(8, s.rows-r0)
		blk := ys[r0*d : (r0+k)*d]
		if s.div {
			v.DivScalar32s(blk, xs[r0*d:(r0+k)*d], scale)
		} else {
			copy(blk, xs[r0*d:(r0+k)*d])
		}
		for l := 0; l < k; l++ {
			row := blk[l*d : (l+1)*d]
			for a := range s.adds {
				ad := &s.adds[a]
				var m []float32
				if ad.bcast {
					mv := masks[a][ad.maskRow[r0+l]]
					for i := range s.row {
						s.row[i] = mv
					}
					m = s.row
				} else {
					m = masks[a][ad.maskRow[r0+l]:][:d]
				}
				if ad.first {
					v.Add32s(row, row, m)
				} else {
					v.Add32s(row, m, row)
				}
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
