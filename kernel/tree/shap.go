package tree

import (
	"errors"
	"fmt"
	"math"
)

// ErrNoCovers is returned by SHAP for an ensemble without node covers.
var ErrNoCovers = errors.New("tree: no node covers (call SetCovers or CoversFromData)")

// SetCovers sets the node covers that path-dependent TreeSHAP weighs the
// branches by (XGBoost's cover, a count of training rows, ...): one per
// node in attribute order — index i is node i of the nodes_* attributes
// for TreeEnsembleClassifier and TreeEnsembleRegressor; for TreeEnsemble,
// the nodes_* entries first, then the leaf_* entries. Covers must be
// finite and non-negative.
func (e *Ensemble) SetCovers(covers []float64) error {
	if len(covers) != e.npos {
		return fmt.Errorf("tree: %d covers for %d nodes", len(covers), e.npos)
	}
	for i, c := range covers {
		if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			return fmt.Errorf("tree: cover %d is %v, want a finite value >= 0", i, c)
		}
	}
	cv := make([]float64, len(e.pos))
	for i, p := range e.pos {
		cv[i] = covers[p]
	}
	e.cover = cv
	return nil
}

// CoversFromData sets each node's cover to the number of rows of x (rows
// rows of len(x)/rows features, at least NumFeatures) that reach it: the
// background distribution TreeSHAP then explains against. ONNX models
// carry no covers (exporters write nodes_hitrates of 1.0), so this is how
// an ONNX-only ensemble gets them.
func (e *Ensemble) CoversFromData(x []float32, rows int) error {
	if rows < 1 || len(x)%rows != 0 || len(x)/rows < e.nfeat {
		return fmt.Errorf("tree: %d values are not %d rows of at least %d features", len(x), rows, e.nfeat)
	}
	stride := len(x) / rows
	cv := make([]float64, len(e.feat))
	xs := make([]float64, e.nfeat)
	for r := 0; r < rows; r++ {
		for f := range xs {
			xs[f] = float64(x[r*stride+f])
		}
		for t := 0; t < e.Trees(); t++ {
			i := e.roots[t]
			for {
				cv[i]++
				if e.mode[i] == modeLeaf {
					break
				}
				if e.goesTrue(int(i), xs[e.feat[i]]) {
					i++
				} else {
					i = e.no[i]
				}
			}
		}
	}
	e.cover = cv
	return nil
}

// fractions returns the shares of branch i's cover that go to its true
// and false children. A branch of zero cover shares equally.
func (e *Ensemble) fractions(i int32) (yes, no float64) {
	c := e.cover[i]
	if c == 0 {
		return 0.5, 0.5
	}
	return e.cover[i+1] / c, e.cover[e.no[i]] / c
}

// shapScale is the factor of every tree's contribution to a margin.
func (e *Ensemble) shapScale() float64 {
	if e.agg == aggAverage {
		return 1 / float64(e.Trees())
	}
	return 1
}

// marginOf maps an aggregation target to its margin index (-1: none).
func (e *Ensemble) marginOf(target int32) int {
	if e.binary {
		if int(target) == e.binClass {
			return 0
		}
		return -1
	}
	return int(target)
}

// pathElem is one feature on TreeSHAP's current path: its feature, the
// fractions of zero (feature unknown: cover share) and one (feature known:
// does x go this way) paths that flow through, and the permutation weight.
type pathElem struct {
	d       int32
	z, o, w float64
}

// SHAP computes exact path-dependent TreeSHAP (Lundberg, Erion and Lee,
// "Consistent individualized feature attribution for tree ensembles",
// Algorithm 2) for row x: out[t*(nfeat+1)+j] is feature j's contribution
// to margin t (see NumTargets and Margin) and out[t*(nfeat+1)+nfeat] the
// expected margin under the covers; each row of out sums to the margin up
// to float64 rounding (the margin itself is summed in float32). nfeat
// must be at least NumFeatures. MIN and MAX aggregations are not
// additive and have no TreeSHAP.
func (e *Ensemble) SHAP(x []float32, nfeat int, out []float64) error {
	if e.cover == nil {
		return ErrNoCovers
	}
	if e.agg == aggMin || e.agg == aggMax {
		return fmt.Errorf("tree: TreeSHAP needs a SUM or AVERAGE ensemble, not %s", e.Stats().Aggregate)
	}
	if nfeat < e.nfeat || len(x) < e.nfeat {
		return fmt.Errorf("tree: SHAP over %d features (row of %d), the model reads feature %d", nfeat, len(x), e.nfeat-1)
	}
	nm := e.NumTargets()
	if len(out) < nm*(nfeat+1) {
		return fmt.Errorf("tree: SHAP output of %d values, want %d", len(out), nm*(nfeat+1))
	}
	out = out[:nm*(nfeat+1)]
	clear(out)
	s := &shapState{e: e, out: out, stride: nfeat + 1, scale: e.shapScale()}
	s.x = make([]float64, e.nfeat)
	for f := range s.x {
		s.x[f] = float64(x[f])
	}
	maxd := 0
	for _, d := range e.depth {
		maxd = max(maxd, int(d))
	}
	s.paths = make([]pathElem, (maxd+2)*(maxd+3)/2)
	for t := 0; t < e.Trees(); t++ {
		s.recurse(e.roots[t], s.paths[:0], 1, 1, -1)
		s.expect(e.roots[t], s.scale)
	}
	for m := 0; m < nm; m++ {
		out[m*s.stride+nfeat] += e.marginBase(m)
	}
	return nil
}

type shapState struct {
	e      *Ensemble
	x      []float64
	out    []float64
	stride int
	scale  float64
	paths  []pathElem
}

// expect adds the expected value of the subtree at i, weighted by p, to
// every margin's last column.
func (s *shapState) expect(i int32, p float64) {
	e := s.e
	for e.mode[i] != modeLeaf {
		fy, fn := e.fractions(i)
		s.expect(i+1, p*fy)
		p *= fn
		i = e.no[i]
	}
	for k := e.wlo[i]; k < e.wlo[i+1]; k++ {
		if m := e.marginOf(e.wt[k]); m >= 0 {
			s.out[m*s.stride+s.stride-1] += p * e.wv[k]
		}
	}
}

// recurse is Algorithm 2's RECURSE: m is the path above node i (its
// storage is followed by room for the deeper paths).
func (s *shapState) recurse(i int32, m []pathElem, pz, po float64, pi int32) {
	if pz == 0 && po == 0 {
		return // no path flows here: every weight below is zero
	}
	e := s.e
	// Copy the parent's path into the next segment and extend it.
	next := s.paths[len(m)+cap(s.paths)-cap(m):]
	next = next[:len(m)]
	copy(next, m)
	m = extend(next, pz, po, pi)
	if e.mode[i] == modeLeaf {
		for p := 1; p < len(m); p++ {
			w := unwoundSum(m, p) * (m[p].o - m[p].z) * s.scale
			for k := e.wlo[i]; k < e.wlo[i+1]; k++ {
				if t := e.marginOf(e.wt[k]); t >= 0 {
					s.out[t*s.stride+int(m[p].d)] += w * e.wv[k]
				}
			}
		}
		return
	}
	d := e.feat[i]
	hot, cold := i+1, e.no[i]
	fh, fc := e.fractions(i)
	if !e.goesTrue(int(i), s.x[d]) {
		hot, cold = cold, hot
		fh, fc = fc, fh
	}
	iz, io := 1.0, 1.0
	for k := 1; k < len(m); k++ {
		if m[k].d == d {
			iz, io = m[k].z, m[k].o
			m = unwind(m, k)
			break
		}
	}
	s.recurse(hot, m, iz*fh, io, d)
	s.recurse(cold, m, iz*fc, 0, d)
}

// extend appends feature pi with fractions pz, po and updates the weights.
func extend(m []pathElem, pz, po float64, pi int32) []pathElem {
	l := len(m)
	w := 0.0
	if l == 0 {
		w = 1
	}
	m = append(m, pathElem{d: pi, z: pz, o: po, w: w})
	for i := l - 1; i >= 0; i-- {
		m[i+1].w += po * m[i].w * float64(i+1) / float64(l+1)
		m[i].w = pz * m[i].w * float64(l-i) / float64(l+1)
	}
	return m
}

// unwind removes element i from the path, undoing its extension.
func unwind(m []pathElem, i int) []pathElem {
	l := len(m) - 1
	n := m[l].w
	o, z := m[i].o, m[i].z
	for j := l - 1; j >= 0; j-- {
		if o != 0 {
			t := m[j].w
			m[j].w = n * float64(l+1) / (float64(j+1) * o)
			n = t - m[j].w*z*float64(l-j)/float64(l+1)
		} else {
			m[j].w = m[j].w * float64(l+1) / (z * float64(l-j))
		}
	}
	for j := i; j < l; j++ {
		m[j].d, m[j].z, m[j].o = m[j+1].d, m[j+1].z, m[j+1].o
	}
	return m[:l]
}

// unwoundSum is the total weight of the path with element i unwound.
func unwoundSum(m []pathElem, i int) float64 {
	l := len(m) - 1
	o, z := m[i].o, m[i].z
	n := m[l].w
	total := 0.0
	for j := l - 1; j >= 0; j-- {
		if o != 0 {
			t := n * float64(l+1) / (float64(j+1) * o)
			total += t
			n = m[j].w - t*z*float64(l-j)/float64(l+1)
		} else if z != 0 {
			total += m[j].w * float64(l+1) / (z * float64(l-j))
		}
	}
	return total
}
