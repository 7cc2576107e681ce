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
	nfeat int // keys per vector
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

// step is one branch-free move from node i for key vector k.
func step(nodes []cnode, i int32, k []int32) int32 {
	n := &nodes[i]
	m := int32((int64(k[n.F]) - int64(n.K)) >> 63) // -1 when v < K
	return (i+1)&m | n.Hi&^m
}

// lanes is how many walks run interleaved: independent chains of loads
// that the core overlaps.
const lanes = 8

// leavesRows walks every tree for rows (lanes at a time per tree) and
// writes leaves[r*T+t], the leaf of tree t for row r. keys holds each
// row's 4·nfeat keys.
func (c *compiled) leavesRows(e *Ensemble, keys []int32, rows int, leaves []int32) {
	nt := e.Trees()
	kn := 4 * c.nfeat
	nodes := c.nodes
	for r0 := 0; r0 < rows; r0 += lanes {
		nr := min(lanes, rows-r0)
		for t := 0; t < nt; t++ {
			root := e.roots[t]
			var idx [lanes]int32
			for r := range idx {
				idx[r] = root
			}
			for d := e.depth[t]; d > 0; d-- {
				for r := 0; r < nr; r++ {
					idx[r] = step(nodes, idx[r], keys[(r0+r)*kn:(r0+r+1)*kn])
				}
			}
			for r := 0; r < nr; r++ {
				leaves[(r0+r)*nt+t] = idx[r]
			}
		}
	}
}

// leavesRow walks every tree for one row, lanes trees at a time.
func (c *compiled) leavesRow(e *Ensemble, k []int32, leaves []int32) {
	nt := e.Trees()
	nodes := c.nodes
	k = k[:4*c.nfeat]
	for t0 := 0; t0 < nt; t0 += lanes {
		ng := min(lanes, nt-t0)
		var idx [lanes]int32
		var d int32
		for g := 0; g < ng; g++ {
			idx[g] = e.roots[t0+g]
			d = max(d, e.depth[t0+g])
		}
		for ; d > 0; d-- {
			for g := 0; g < ng; g++ {
				idx[g] = step(nodes, idx[g], k)
			}
		}
		copy(leaves[t0:t0+ng], idx[:ng])
	}
}
