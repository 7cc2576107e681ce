package tree

import "math"

// The compiled layout. Every branch that compares (LEQ, LT, GTE, GT) a
// float32 feature with a non-NaN threshold is rewritten, at build time,
// as "go to Hi when v >= K, else to the next node" on int32 keys:
//
//	key(x) = bits(x), with the low 31 bits flipped when x < 0 (-0 as +0)
//
// orders the non-NaN floats as the integers order their keys, so each
// comparison is one integer comparison. The row is expanded into four key
// vectors, which fold the comparison's direction and the NaN routing into
// the choice of vector:
//
//	vector 0: key(x),  NaN -> MaxInt32     vector 1: key(x),  NaN -> MinInt32
//	vector 2: -key(x), NaN -> MaxInt32     vector 3: -key(x), NaN -> MinInt32
//
// A branch's false child is Hi and its true child the next node (the
// preorder layout), and "false" is, for a threshold key kt,
//
//	LT  k >= kt      LEQ  k >= kt+1      GT  -k >= -kt      GTE  -k >= 1-kt
//
// taken on vector 0 or 2 when NaN goes false (MaxInt32 >= every K) and on
// vector 1 or 3 when NaN goes true (MinInt32 < every K). A leaf loops to
// itself (K = MinInt32), so every tree is walked exactly its depth steps
// without a branch on the data: next = v >= K ? Hi : i+1, computed with a
// mask. The layout reaches exactly the leaves of the reference walk
// (Ensemble.leafOf), so the sums, which are shared code, are the same bits.
type compiled struct {
	nodes []cnode
	nfeat int       // keys per vector
	leafW []float32 // a leaf's one weight, when Ensemble.single >= 0
}

type cnode struct{ K, F, Hi int32 }

// compilable reports whether every branch fits the key layout.
func (e *Ensemble) compilable() bool {
	if e.double {
		return false
	}
	for i, m := range e.mode {
		switch m {
		case modeLeaf:
		case modeLEQ, modeLT, modeGTE, modeGT:
			if math.IsNaN(e.thr[i]) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// compile builds the key layout, or returns nil when e does not fit it.
func (e *Ensemble) compile() *compiled {
	if !e.compilable() {
		return nil
	}
	nf := int32(e.nfeat)
	c := &compiled{nodes: make([]cnode, len(e.feat)), nfeat: e.nfeat}
	if e.single >= 0 {
		c.leafW = make([]float32, len(e.feat))
		for i, m := range e.mode {
			if m == modeLeaf {
				c.leafW[i] = e.wv32[e.wlo[i]]
			}
		}
	}
	for i, m := range e.mode {
		if m == modeLeaf {
			c.nodes[i] = cnode{K: math.MinInt32, F: 0, Hi: int32(i)}
			continue
		}
		kt := int64(key32(float32(e.thr[i])))
		var k int64
		vec := int32(0)
		switch m {
		case modeLT:
			k = kt
		case modeLEQ:
			k = kt + 1
		case modeGT:
			k, vec = -kt, 2
		case modeGTE:
			k, vec = 1-kt, 2
		}
		if e.miss[i] {
			vec++
		}
		c.nodes[i] = cnode{K: int32(k), F: vec*nf + e.feat[i], Hi: e.no[i]}
	}
	return c
}

// key32 is the order-preserving integer key of a non-NaN float32.
func key32(x float32) int32 {
	if x == 0 {
		return 0
	}
	b := int32(math.Float32bits(x))
	if b < 0 {
		b ^= math.MaxInt32
	}
	return b
}

// keys writes the four key vectors of row x (len nfeat) into k (len 4·nfeat).
func (c *compiled) keys(x []float32, k []int32) {
	n := c.nfeat
	k = k[:4*n]
	for f, v := range x[:n] {
		if v != v {
			k[f], k[n+f], k[2*n+f], k[3*n+f] = math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32
			continue
		}
		kv := key32(v)
		k[f], k[n+f], k[2*n+f], k[3*n+f] = kv, kv, -kv, -kv
	}
}

// lanes is how many walks run interleaved: eight independent chains of
// loads that the core overlaps (a lone walk is bound by load latency).
const lanes = 8

// walk8 advances eight walks depth steps: walk g starts at node start[g]
// and reads keys from keys[off[g]:]. Each step is branch-free:
// next = v >= K ? Hi : i+1, by a sign mask. The lanes are written out by
// hand so that the Go compiler keeps them in registers.
func walk8(nodes []cnode, start *[lanes]int32, depth int32, keys []int32, off *[lanes]int) [lanes]int32 {
	i0, i1, i2, i3, i4, i5, i6, i7 := start[0], start[1], start[2], start[3], start[4], start[5], start[6], start[7]
	o0, o1, o2, o3, o4, o5, o6, o7 := off[0], off[1], off[2], off[3], off[4], off[5], off[6], off[7]
	for d := depth; d > 0; d-- {
		n0, n1, n2, n3 := &nodes[i0], &nodes[i1], &nodes[i2], &nodes[i3]
		n4, n5, n6, n7 := &nodes[i4], &nodes[i5], &nodes[i6], &nodes[i7]
		m0 := int32((int64(keys[o0+int(n0.F)]) - int64(n0.K)) >> 63)
		m1 := int32((int64(keys[o1+int(n1.F)]) - int64(n1.K)) >> 63)
		m2 := int32((int64(keys[o2+int(n2.F)]) - int64(n2.K)) >> 63)
		m3 := int32((int64(keys[o3+int(n3.F)]) - int64(n3.K)) >> 63)
		m4 := int32((int64(keys[o4+int(n4.F)]) - int64(n4.K)) >> 63)
		m5 := int32((int64(keys[o5+int(n5.F)]) - int64(n5.K)) >> 63)
		m6 := int32((int64(keys[o6+int(n6.F)]) - int64(n6.K)) >> 63)
		m7 := int32((int64(keys[o7+int(n7.F)]) - int64(n7.K)) >> 63)
		i0 = (i0+1)&m0 | n0.Hi&^m0
		i1 = (i1+1)&m1 | n1.Hi&^m1
		i2 = (i2+1)&m2 | n2.Hi&^m2
		i3 = (i3+1)&m3 | n3.Hi&^m3
		i4 = (i4+1)&m4 | n4.Hi&^m4
		i5 = (i5+1)&m5 | n5.Hi&^m5
		i6 = (i6+1)&m6 | n6.Hi&^m6
		i7 = (i7+1)&m7 | n7.Hi&^m7
	}
	return [lanes]int32{i0, i1, i2, i3, i4, i5, i6, i7}
}

// leavesRows walks every tree for rows (eight rows at a time per tree;
// a short block repeats its last row in the spare lanes) and writes
// leaves[r*T+t], the leaf of tree t for row r. keys holds each row's
// 4·nfeat keys.
func (c *compiled) leavesRows(e *Ensemble, keys []int32, rows int, leaves []int32) {
	nt := e.Trees()
	kn := 4 * c.nfeat
	for r0 := 0; r0 < rows; r0 += lanes {
		nr := min(lanes, rows-r0)
		var off [lanes]int
		for r := range off {
			off[r] = (r0 + min(r, nr-1)) * kn
		}
		for t := 0; t < nt; t++ {
			root := e.roots[t]
			start := [lanes]int32{root, root, root, root, root, root, root, root}
			idx := walk8(c.nodes, &start, e.depth[t], keys, &off)
			for r := 0; r < nr; r++ {
				leaves[(r0+r)*nt+t] = idx[r]
			}
		}
	}
}

// sumRows is leavesRows for an ensemble of one weight per leaf on one
// target: it adds each leaf's weight to its row's sum as it is reached,
// in tree order from +0, the additions accumulate makes.
func (c *compiled) sumRows(e *Ensemble, keys []int32, rows int, sums *[lanes]float32) {
	nt := e.Trees()
	kn := 4 * c.nfeat
	var off [lanes]int
	for r := range off {
		off[r] = min(r, rows-1) * kn
	}
	*sums = [lanes]float32{}
	w := c.leafW
	for t := 0; t < nt; t++ {
		root := e.roots[t]
		start := [lanes]int32{root, root, root, root, root, root, root, root}
		idx := walk8(c.nodes, &start, e.depth[t], keys, &off)
		for r := range sums {
			sums[r] += w[idx[r]]
		}
	}
}

// leavesRow walks every tree for one row, eight trees at a time (the
// group walks its deepest tree's depth; a finished walk stays on its leaf).
func (c *compiled) leavesRow(e *Ensemble, k []int32, leaves []int32) {
	nt := e.Trees()
	var off [lanes]int
	for t0 := 0; t0 < nt; t0 += lanes {
		ng := min(lanes, nt-t0)
		var start [lanes]int32
		var d int32
		for g := range start {
			t := t0 + min(g, ng-1)
			start[g] = e.roots[t]
			d = max(d, e.depth[t])
		}
		idx := walk8(c.nodes, &start, d, k, &off)
		copy(leaves[t0:t0+ng], idx[:ng])
	}
}
