package tree

import (
	"math"
	"unsafe"
)

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

// cnode is one node of the key layout: go to the node at byte offset Hi
// when key F >= K, else to the next node (12 bytes on).
type cnode struct {
	K, F int32
	Hi   uint32
}

const nodeSize = 12

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
	nf := int32(max(e.nfeat, 1))
	c := &compiled{nodes: make([]cnode, len(e.feat)), nfeat: max(e.nfeat, 1)}
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
			c.nodes[i] = cnode{K: math.MinInt32, F: 0, Hi: uint32(i) * nodeSize}
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
		c.nodes[i] = cnode{K: int32(k), F: vec*nf + e.feat[i], Hi: uint32(e.no[i]) * nodeSize}
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

// keys writes the four key vectors of row x (len nfeat) into k, key j at
// k[j*stride]: stride 1 for one row, lanes for a block of rows
// interleaved (row r's keys at k[r:]).
func (c *compiled) keys(x []float32, k []int32, stride int) {
	n := c.nfeat
	_ = k[(4*n-1)*stride]
	for f, v := range x[:n] {
		a, b, cc, d := int32(math.MaxInt32), int32(math.MinInt32), int32(math.MaxInt32), int32(math.MinInt32)
		if v == v {
			kv := key32(v)
			a, b, cc, d = kv, kv, -kv, -kv
		}
		k[f*stride], k[(n+f)*stride], k[(2*n+f)*stride], k[(3*n+f)*stride] = a, b, cc, d
	}
}

// lanes is how many walks run interleaved: eight independent chains of
// loads that the core overlaps (a lone walk is bound by load latency).
const lanes = 8

// The walks below read the layout through base pointers, without bounds
// checks: the layout is valid by construction (compile: every Hi and
// every next node of a branch is a node; every F is below 4·nfeat) and the
// callers pass key blocks of 4·nfeat keys (per lane). Each step is
// branch-free, next = v >= K ? Hi : i+12 by a sign mask, and the lanes
// are written out by hand so that they stay in registers.

// walkRows advances eight rows depth steps through one tree from byte
// offset root; kb holds the rows' keys interleaved (stride lanes).
func walkRows(nb unsafe.Pointer, root uint32, depth int32, kb unsafe.Pointer) [lanes]uint32 {
	i0, i1, i2, i3, i4, i5, i6, i7 := root, root, root, root, root, root, root, root
	for d := depth; d > 0; d-- {
		n0, n1 := (*cnode)(unsafe.Add(nb, i0)), (*cnode)(unsafe.Add(nb, i1))
		n2, n3 := (*cnode)(unsafe.Add(nb, i2)), (*cnode)(unsafe.Add(nb, i3))
		n4, n5 := (*cnode)(unsafe.Add(nb, i4)), (*cnode)(unsafe.Add(nb, i5))
		n6, n7 := (*cnode)(unsafe.Add(nb, i6)), (*cnode)(unsafe.Add(nb, i7))
		m0 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n0.F)<<5))) - int64(n0.K)) >> 63)
		m1 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n1.F)<<5+4))) - int64(n1.K)) >> 63)
		m2 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n2.F)<<5+8))) - int64(n2.K)) >> 63)
		m3 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n3.F)<<5+12))) - int64(n3.K)) >> 63)
		m4 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n4.F)<<5+16))) - int64(n4.K)) >> 63)
		m5 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n5.F)<<5+20))) - int64(n5.K)) >> 63)
		m6 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n6.F)<<5+24))) - int64(n6.K)) >> 63)
		m7 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n7.F)<<5+28))) - int64(n7.K)) >> 63)
		i0 = (i0+nodeSize)&m0 | n0.Hi&^m0
		i1 = (i1+nodeSize)&m1 | n1.Hi&^m1
		i2 = (i2+nodeSize)&m2 | n2.Hi&^m2
		i3 = (i3+nodeSize)&m3 | n3.Hi&^m3
		i4 = (i4+nodeSize)&m4 | n4.Hi&^m4
		i5 = (i5+nodeSize)&m5 | n5.Hi&^m5
		i6 = (i6+nodeSize)&m6 | n6.Hi&^m6
		i7 = (i7+nodeSize)&m7 | n7.Hi&^m7
	}
	return [lanes]uint32{i0, i1, i2, i3, i4, i5, i6, i7}
}

// walkTrees advances eight walks of one row (keys at kb, stride 1) from
// the byte offsets in start, depth steps.
func walkTrees(nb unsafe.Pointer, start *[lanes]uint32, depth int32, kb unsafe.Pointer) [lanes]uint32 {
	i0, i1, i2, i3, i4, i5, i6, i7 := start[0], start[1], start[2], start[3], start[4], start[5], start[6], start[7]
	for d := depth; d > 0; d-- {
		n0, n1 := (*cnode)(unsafe.Add(nb, i0)), (*cnode)(unsafe.Add(nb, i1))
		n2, n3 := (*cnode)(unsafe.Add(nb, i2)), (*cnode)(unsafe.Add(nb, i3))
		n4, n5 := (*cnode)(unsafe.Add(nb, i4)), (*cnode)(unsafe.Add(nb, i5))
		n6, n7 := (*cnode)(unsafe.Add(nb, i6)), (*cnode)(unsafe.Add(nb, i7))
		m0 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n0.F)<<2))) - int64(n0.K)) >> 63)
		m1 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n1.F)<<2))) - int64(n1.K)) >> 63)
		m2 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n2.F)<<2))) - int64(n2.K)) >> 63)
		m3 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n3.F)<<2))) - int64(n3.K)) >> 63)
		m4 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n4.F)<<2))) - int64(n4.K)) >> 63)
		m5 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n5.F)<<2))) - int64(n5.K)) >> 63)
		m6 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n6.F)<<2))) - int64(n6.K)) >> 63)
		m7 := uint32((int64(*(*int32)(unsafe.Add(kb, uintptr(n7.F)<<2))) - int64(n7.K)) >> 63)
		i0 = (i0+nodeSize)&m0 | n0.Hi&^m0
		i1 = (i1+nodeSize)&m1 | n1.Hi&^m1
		i2 = (i2+nodeSize)&m2 | n2.Hi&^m2
		i3 = (i3+nodeSize)&m3 | n3.Hi&^m3
		i4 = (i4+nodeSize)&m4 | n4.Hi&^m4
		i5 = (i5+nodeSize)&m5 | n5.Hi&^m5
		i6 = (i6+nodeSize)&m6 | n6.Hi&^m6
		i7 = (i7+nodeSize)&m7 | n7.Hi&^m7
	}
	return [lanes]uint32{i0, i1, i2, i3, i4, i5, i6, i7}
}

// leavesRows walks every tree for a block of rows (keys interleaved, see
// keys; a short block's spare lanes repeat a row) and writes
// leaves[r*T+t], the leaf of tree t for row r.
func (c *compiled) leavesRows(e *Ensemble, keys []int32, rows int, leaves []int32) {
	nt := e.Trees()
	_ = keys[4*c.nfeat*lanes-1]
	nb, kb := unsafe.Pointer(unsafe.SliceData(c.nodes)), unsafe.Pointer(unsafe.SliceData(keys))
	for t := 0; t < nt; t++ {
		idx := walkRows(nb, uint32(e.roots[t])*nodeSize, e.depth[t], kb)
		for r := 0; r < rows; r++ {
			leaves[r*nt+t] = int32(idx[r] / nodeSize)
		}
	}
}

// sumRows is leavesRows for an ensemble of one weight per leaf on one
// target: it adds each leaf's weight to its row's sum as it is reached,
// in tree order from +0, the additions accumulate makes.
func (c *compiled) sumRows(e *Ensemble, keys []int32, sums *[lanes]float32) {
	nt := e.Trees()
	_ = keys[4*c.nfeat*lanes-1]
	nb, kb := unsafe.Pointer(unsafe.SliceData(c.nodes)), unsafe.Pointer(unsafe.SliceData(keys))
	wb := unsafe.Pointer(unsafe.SliceData(c.leafW)) // leafW[i] at byte offset i*4 = off/3
	*sums = [lanes]float32{}
	for t := 0; t < nt; t++ {
		idx := walkRows(nb, uint32(e.roots[t])*nodeSize, e.depth[t], kb)
		for r := range sums {
			sums[r] += *(*float32)(unsafe.Add(wb, idx[r]/3))
		}
	}
}

// leavesRow walks every tree for one row, eight trees at a time (the
// group walks its deepest tree's depth; a finished walk stays on its leaf;
// a short group repeats its last tree).
func (c *compiled) leavesRow(e *Ensemble, k []int32, leaves []int32) {
	nt := e.Trees()
	_ = k[4*c.nfeat-1]
	nb, kb := unsafe.Pointer(unsafe.SliceData(c.nodes)), unsafe.Pointer(unsafe.SliceData(k))
	for t0 := 0; t0 < nt; t0 += lanes {
		ng := min(lanes, nt-t0)
		var start [lanes]uint32
		var d int32
		for g := range start {
			t := t0 + min(g, ng-1)
			start[g] = uint32(e.roots[t]) * nodeSize
			d = max(d, e.depth[t])
		}
		idx := walkTrees(nb, &start, d, kb)
		for g := 0; g < ng; g++ {
			leaves[t0+g] = int32(idx[g] / nodeSize)
		}
	}
}
