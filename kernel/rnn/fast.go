package rnn

import (
	"math"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// The float32 path computes exactly the chains of cell.step (see the
// package doc), reorganised for speed:
//
//   - The input projections of every step come first: P[t][j] is the
//     chain from the bias sum over x_t·W[j,:] (k ascending), for all t at
//     once, with W transposed so that one step of every chain reads a row
//     of Wᵀ (chainRows: 16 chains per vector lane group).
//   - Each recurrent step continues the chain P[t][j] over h·R[j,:], with R
//     transposed the same way.
//   - The gate activations run on whole gate blocks through vmath's slice
//     functions (the same bits as the scalar ones); the other element
//     operations are the scalar code's, in its order.
//
// Every chain is the scalar path's chain, FMA for FMA, so the outputs are
// its bits except for NaN payloads: a NaN gate pre-activation is stored as
// the canonical quiet NaN 0x7fc00000 here.

// chainLevel is which chain kernels run: the portable ones, chainRowsY
// (AVX2 and FMA) or also chainRowsZ and chainRows8Z (AVX-512F). Every
// level gives the same bits.
type chainLevel int

const (
	chainPortable chainLevel = iota
	chainAVX2
	chainAVX512
)

// levelOf is the chain level kc allows on this CPU.
func levelOf(kc *kernel.Ctx) chainLevel {
	switch {
	case haveZ && kc.AVX512():
		return chainAVX512
	case haveY && kc.AVX2():
		return chainAVX2
	}
	return chainPortable
}

// chainRows sets y[j], j < len(y), to the chain acc = FMA(x[kk],
// b[kk*ldb+j], acc) over kk < len(x) ascending from y[j], then canon (a
// NaN becomes 0x7fc00000). At lv, the AVX-512 twin takes the columns in
// whole groups of 16, the AVX2 twin the groups of 8 after them, the
// portable loop the rest; all give the same bits.
func chainRows(lv chainLevel, x, b []float32, ldb int, y []float32) {
	k, n := len(x), len(y)
	if n == 0 {
		return
	}
	if k > 0 {
		_ = b[(k-1)*ldb+n-1] // bounds for the assembly
	}
	done := 0
	if lv == chainAVX512 && k > 0 && n >= 16 {
		done = n &^ 15
		chainRowsZ(k, &x[0], &b[0], ldb, &y[0], done)
	}
	if m := (n - done) &^ 7; lv >= chainAVX2 && k > 0 && m > 0 {
		chainRowsY(k, &x[0], &b[done], ldb, &y[done], m)
		done += m
	}
	if done < n {
		chainRowsPortable(x, b[done:], ldb, y[done:])
	}
}

// chainRowsPortable is chainRowsZ's portable twin.
func chainRowsPortable(x, b []float32, ldb int, y []float32) {
	for kk, xv := range x {
		row := b[kk*ldb : kk*ldb+len(y)]
		for j, bv := range row {
			y[j] = vmath.FMA32(xv, bv, y[j])
		}
	}
	for j, v := range y {
		if v != v {
			y[j] = math.Float32frombits(0x7fc00000)
		}
	}
}

// transpose32 returns the [cols, rows] transpose of the row-major
// [rows, cols] matrix m.
func transpose32(m []float32, rows, cols int) []float32 {
	t := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		for j, v := range m[i*cols : (i+1)*cols] {
			t[j*rows+i] = v
		}
	}
	return t
}

// act32s returns s as a slice function: v's forms of the sigmoid and
// tanh (the bits of Sigmoid32 and Tanh32 at every level), else the scalar
// activation applied element by element.
func act32s(s actSpec, v vmath.Vec) func(dst, src []float32) {
	switch s.name {
	case "sigmoid":
		return v.Sigmoid32s
	case "tanh":
		return v.Tanh32s
	}
	f := activation(s, f32)
	return func(dst, src []float32) {
		for i, v := range src {
			dst[i] = f(v)
		}
	}
}

// fast32 is one direction of a float32 node, its weights transposed, with
// the state of every batch row: the recurrent chains of all rows at one
// step are computed together (eight rows share each row of Rᵀ), and each
// row's gate arithmetic is its own, so a row's bits never depend on the
// others (batch invariance).
type fast32 struct {
	c      config
	lv     chainLevel
	z      bool      // lv is chainAVX512
	wt, rt []float32 // [input, G], [hidden, G]
	init   []float32 // [G]: each gate row's chain start for P
	rbh    []float32 // GRU linear_before_reset: Rb of the h~ block, or zeros
	p      []float32 // peepholes (i, o, f) or nil
	acts   []func(dst, src []float32)
	pre    []float32 // [batch, seq, G]: the chains
	h, cs  []float32 // [batch, H]
	hb, rh []float32 // [batch, H]: GRU's h~ recurrent chains, r ⊙ h
	g1, g2 []float32 // gate values (one row at a time)
	g3, g4 []float32
	xin    []float32 // eight rows of a chain's x, packed step-major
}

func newFast32(c config, d int, pk *pack, b, p []float32, lv chainLevel, v vmath.Vec) *fast32 {
	H, G := c.hidden, c.kind.gates()*c.hidden
	e := &fast32{c: c, lv: lv, z: lv == chainAVX512, wt: pk.wt[d], rt: pk.rt[d]}
	e.init = make([]float32, G)
	e.rbh = make([]float32, H)
	if b != nil {
		wb, rb := b[d*2*G:d*2*G+G], b[d*2*G+G:(d+1)*2*G]
		for j := range e.init {
			e.init[j] = wb[j] + rb[j]
		}
		if c.kind == cellGRU && c.linearBeforeReset {
			// The h~ block's input chain starts from Wbh alone; its
			// recurrent chain from Rbh.
			copy(e.init[2*H:], wb[2*H:3*H])
			copy(e.rbh, rb[2*H:3*H])
		}
	}
	if p != nil {
		e.p = p[d*3*H : (d+1)*3*H]
	}
	perDir := len(c.kind.defaultActs())
	for _, s := range c.acts[d*perDir : (d+1)*perDir] {
		e.acts = append(e.acts, act32s(s, v))
	}
	B := c.batch
	e.pre = make([]float32, B*c.seq*G)
	e.h, e.cs, e.hb, e.rh = make([]float32, B*H), make([]float32, B*H), make([]float32, B*H), make([]float32, B*H)
	e.g1, e.g2, e.g3, e.g4 = make([]float32, H), make([]float32, H), make([]float32, H), make([]float32, H)
	e.xin = make([]float32, 8*max(c.input, H))
	return e
}

func (e *fast32) clip(v []float32) {
	if l := e.c.clip; l > 0 {
		for i, x := range v {
			v[i] = max(-l, min(l, x))
		}
	}
}

// chains continues, for rows r < nb, the chains dst[r*ldd : r*ldd+n] over
// src(r)·b (src(r) of K values, b of row stride ldb): on AVX-512 eight
// rows at a time share each row of b (chainRows8Z; the columns past the
// last multiple of 32 and the last rows one row at a time). Every chain is
// chainRows' chain either way.
func (e *fast32) chains(nb, K int, src func(r int) []float32, b []float32, ldb int, dst []float32, ldd, n int) {
	r, n32 := 0, n&^31
	if e.z && K > 0 && n32 > 0 {
		for ; r+8 <= nb; r += 8 {
			for q := 0; q < 8; q++ {
				for kk, v := range src(r + q)[:K] {
					e.xin[kk*8+q] = v
				}
			}
			_ = dst[(r+7)*ldd+n32-1]
			chainRows8Z(K, &e.xin[0], &b[0], ldb, &dst[r*ldd], ldd, n32)
			if n32 < n {
				for q := r; q < r+8; q++ {
					chainRows(e.lv, src(q), b[n32:], ldb, dst[q*ldd+n32:q*ldd+n])
				}
			}
		}
	}
	for ; r < nb; r++ {
		chainRows(e.lv, src(r), b, ldb, dst[r*ldd:r*ldd+n])
	}
}

// project computes the input chains P[b][s] of steps s < L of batch row b
// (x(s) is step s's input): eight steps at a time share each row of Wᵀ,
// which is what a large input projection is bound by.
func (e *fast32) project(b, L int, x func(s int) []float32) {
	G := len(e.init)
	pre := e.pre[b*e.c.seq*G:]
	for s := 0; s < L; s++ {
		copy(pre[s*G:(s+1)*G], e.init)
	}
	e.chains(L, e.c.input, x, e.wt, G, pre, G, G)
}

// step advances rows [b0, b0+nb) by step s (their input chains in
// P[b][s]); every row of the run is at a step it has.
func (e *fast32) step(s, b0, nb int) {
	H, G, seq := e.c.hidden, len(e.init), e.c.seq
	pre := e.pre[(b0*seq+s)*G:]
	ldp := seq * G
	hrow := func(r int) []float32 { return e.h[(b0+r)*H : (b0+r+1)*H] }
	switch e.c.kind {
	case cellRNN, cellLSTM:
		e.chains(nb, H, hrow, e.rt, G, pre, ldp, G)
	case cellGRU:
		e.chains(nb, H, hrow, e.rt, G, pre, ldp, 2*H)
	}
	if e.c.kind == cellGRU {
		f := e.acts[0]
		for r := 0; r < nb; r++ {
			pr := pre[r*ldp : r*ldp+G]
			e.clip(pr[:2*H])
			f(pr[:H], pr[:H])       // z
			f(pr[H:2*H], pr[H:2*H]) // r
		}
		hb := e.hb[b0*H:]
		if e.c.linearBeforeReset {
			for r := 0; r < nb; r++ {
				copy(hb[r*H:(r+1)*H], e.rbh)
			}
			e.chains(nb, H, hrow, e.rt[2*H:], G, hb, H, H)
		} else {
			rh := e.rh[b0*H:]
			for r := 0; r < nb; r++ {
				rg, h := pre[r*ldp+H:r*ldp+2*H], hrow(r)
				for k := range h {
					rh[r*H+k] = rg[k] * h[k]
				}
			}
			e.chains(nb, H, func(r int) []float32 { return rh[r*H : (r+1)*H] }, e.rt[2*H:], G, pre[2*H:], ldp, H)
		}
	}
	for r := 0; r < nb; r++ {
		e.gates(pre[r*ldp:r*ldp+G], b0+r)
	}
}

// gates finishes row b's step from its chains pre (the scalar cell's
// element operations, in its order).
func (e *fast32) gates(pre []float32, b int) {
	H := e.c.hidden
	h := e.h[b*H : (b+1)*H]
	switch e.c.kind {
	case cellRNN:
		e.clip(pre)
		e.acts[0](h, pre)
	case cellGRU:
		g := e.acts[1]
		zg, rg, hh := pre[:H], pre[H:2*H], e.g3
		xp := pre[2*H:]
		if e.c.linearBeforeReset {
			hb := e.hb[b*H : (b+1)*H]
			for j := range hh {
				hh[j] = vmath.FMA32(rg[j], hb[j], xp[j])
			}
		} else {
			copy(hh, xp)
		}
		e.clip(hh)
		g(hh, hh)
		for j := range h {
			h[j] = vmath.FMA32(zg[j], h[j], (1-zg[j])*hh[j])
		}
	case cellLSTM:
		f, g, ha := e.acts[0], e.acts[1], e.acts[2]
		pi, po, pf, pc := pre[:H], pre[H:2*H], pre[2*H:3*H], pre[3*H:]
		c := e.cs[b*H : (b+1)*H]
		if p := e.p; p != nil {
			for j := range c {
				pi[j] = vmath.FMA32(p[j], c[j], pi[j])
				pf[j] = vmath.FMA32(p[2*H+j], c[j], pf[j])
			}
		}
		e.clip(pi)
		e.clip(pf)
		e.clip(pc)
		ig, fg, cc, og := e.g1, e.g2, e.g3, e.g4
		f(ig, pi)
		f(fg, pf)
		if e.c.coupled {
			for j, v := range ig {
				fg[j] = 1 - v
			}
		}
		g(cc, pc)
		for j := range c {
			c[j] = vmath.FMA32(fg[j], c[j], ig[j]*cc[j])
		}
		if p := e.p; p != nil {
			for j := range c {
				po[j] = vmath.FMA32(p[H+j], c[j], po[j])
			}
		}
		e.clip(po)
		f(og, po)
		ha(h, c)
		for j := range h {
			h[j] *= og[j]
		}
	}
}

// compute32 is compute for float32 inputs on the fast path, with W and R
// transposed in pk (nil: transposed here), at kc's instruction set: the
// AVX-512 chains where kc allows them and the CPU has them, vmath at kc's
// level; every level gives the same bits.
func compute32(c config, in []*tensor.Tensor, lens []int, pk *pack, kc *kernel.Ctx) ([]*tensor.Tensor, error) {
	lv, vec := levelOf(kc), kc.Vec()
	get := func(i int) []float32 {
		if t := kernel.Input(in, i); t != nil {
			return t.Data.([]float32)
		}
		return nil
	}
	x, w, r, b := get(0), get(1), get(2), get(3)
	h0 := get(5)
	var c0, p []float32
	if c.kind == cellLSTM {
		c0, p = get(6), get(7)
	}
	if pk == nil {
		pk = transposeAll(c, w, r)
	}
	H, I := c.hidden, c.input
	y := make([]float32, c.seq*c.dirs*c.batch*H)
	yh := make([]float32, c.dirs*c.batch*H)
	yc := make([]float32, c.dirs*c.batch*H)
	xOff, stOff, yOff := c.xOff, c.stOff, c.yOff
	maxL := 0
	for _, L := range lens {
		maxL = max(maxL, L)
	}
	for d := 0; d < c.dirs; d++ {
		e := newFast32(c, d, pk, b, p, lv, vec)
		reverse := c.reverse || d == 1
		at := func(bi, s int) int {
			if reverse {
				return lens[bi] - 1 - s
			}
			return s
		}
		for bi := 0; bi < c.batch; bi++ {
			if h0 != nil {
				copy(e.h[bi*H:(bi+1)*H], h0[stOff(d, bi):])
			}
			if c0 != nil {
				copy(e.cs[bi*H:(bi+1)*H], c0[stOff(d, bi):])
			}
			e.project(bi, lens[bi], func(s int) []float32 { t := at(bi, s); return x[xOff(t, bi) : xOff(t, bi)+I] })
		}
		for s := 0; s < maxL; s++ {
			// Runs of consecutive rows that have step s.
			for b0 := 0; b0 < c.batch; {
				if s >= lens[b0] {
					b0++
					continue
				}
				nb := 1
				for b0+nb < c.batch && s < lens[b0+nb] {
					nb++
				}
				e.step(s, b0, nb)
				for bi := b0; bi < b0+nb; bi++ {
					t := at(bi, s)
					copy(y[yOff(t, d, bi):yOff(t, d, bi)+H], e.h[bi*H:(bi+1)*H])
				}
				b0 += nb
			}
		}
		for bi := 0; bi < c.batch; bi++ {
			copy(yh[stOff(d, bi):stOff(d, bi)+H], e.h[bi*H:(bi+1)*H])
			copy(yc[stOff(d, bi):stOff(d, bi)+H], e.cs[bi*H:(bi+1)*H])
		}
	}
	yShape, stShape := c.outShapes()
	out := []*tensor.Tensor{tensor.From(y, yShape...), tensor.From(yh, stShape...)}
	if c.kind == cellLSTM {
		out = append(out, tensor.From(yc, stShape...))
	}
	return out, nil
}
