package tree

import (
	"math"
	"slices"
)

// Ensemble is a parsed, validated tree ensemble: its trees in one
// flattened preorder layout (tree by tree, each branch followed by its
// true child's subtree, then its false child's), the leaves' weights, the
// aggregation, base values and post transform, and, for TreeSHAP, the
// node covers. It is immutable after parsing except for SetCovers and
// CoversFromData, which must not run concurrently with SHAP.
type Ensemble struct {
	op       string
	double   bool // thresholds or weights came as doubles: compare and sum in float64
	ntargets int
	agg      int
	post     int
	base     []float64

	roots []int32 // first node of tree t; roots[len-1] is the node count
	depth []int32 // per tree: edges on its longest root-leaf path
	feat  []int32
	thr   []float64
	mode  []uint8
	miss  []bool  // NaN takes the true branch
	no    []int32 // false child of a branch (its true child is the next node); -1 for a leaf
	wlo   []int32 // leaf i's weights are wt/wv[wlo[i]:wlo[i+1]]
	wt    []int32
	wv    []float64
	wv32  []float32
	mlo   []int32 // BRANCH_MEMBER node i's set is mem[mlo[i]:mlo[i+1]], ascending
	mem   []float64
	pos   []int32 // attribute position of each node (the cover order)
	npos  int
	hit   []float64
	cover []float64 // per node in layout order; nil until known
	nfeat int

	classifier bool
	labelsInt  []int64
	labelsStr  []string
	binary     bool // ORT's binary case: two labels, weights on one class only
	binClass   int
	allPos     bool

	single int32 // the target every leaf's one weight is for (SUM or AVERAGE), or -1
}

// layout checks the raw trees reachable from roots and lays them out in
// preorder. npos is the number of attribute positions.
func (e *Ensemble) layout(raw []rawNode, ws []rawWeight, members []float64, roots []int, npos int) error {
	state := make([]uint8, len(raw)) // 1: laid out
	e.npos = npos
	e.wlo = append(e.wlo, 0)
	e.mlo = append(e.mlo, 0)
	type frame struct {
		raw, parent int // parent: layout index whose false child this is, or -1
		depth       int
	}
	var stack []frame
	for t, r := range roots {
		e.roots = append(e.roots, int32(len(e.feat)))
		maxd := 0
		stack = append(stack[:0], frame{r, -1, 0})
		for len(stack) > 0 {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			i := f.raw
			// A branch whose children are one node is that node.
			for raw[i].mode != modeLeaf && raw[i].yes == raw[i].no {
				if state[i] != 0 {
					return invalid("tree %d: node %d is reached twice (a cycle or a shared subtree)", t, raw[i].nid)
				}
				state[i] = 1
				i = raw[i].yes
			}
			if state[i] != 0 {
				return invalid("tree %d: node %d is reached twice (a cycle or a shared subtree)", t, raw[i].nid)
			}
			state[i] = 1
			if f.depth > MaxDepth {
				return invalid("tree %d is deeper than %d", t, MaxDepth)
			}
			maxd = max(maxd, f.depth)
			if len(e.feat) >= MaxNodes {
				return invalid("more than %d nodes", MaxNodes)
			}
			li := int32(len(e.feat))
			if f.parent >= 0 {
				e.no[f.parent] = li
			}
			rn := &raw[i]
			e.pos = append(e.pos, int32(rn.pos))
			e.hit = append(e.hit, rn.hit)
			e.mode = append(e.mode, rn.mode)
			if rn.mode == modeLeaf {
				e.feat = append(e.feat, 0)
				e.thr = append(e.thr, 0)
				e.miss = append(e.miss, false)
				e.no = append(e.no, -1)
				for _, w := range ws[rn.wlo:rn.whi] {
					e.wt = append(e.wt, w.target)
					e.wv = append(e.wv, w.value)
				}
			} else {
				if rn.feat < 0 || rn.feat >= MaxFeatures {
					return invalid("tree %d: node %d: feature id %d is out of range [0, %d)", t, rn.nid, rn.feat, MaxFeatures)
				}
				e.nfeat = max(e.nfeat, int(rn.feat)+1)
				e.feat = append(e.feat, int32(rn.feat))
				e.thr = append(e.thr, rn.thr)
				e.miss = append(e.miss, rn.missTrue)
				e.no = append(e.no, -1)
				if rn.mode == modeMember {
					set := slices.Clone(members[rn.mlo:rn.mhi])
					slices.Sort(set)
					e.mem = append(e.mem, set...)
				}
				// true child next in preorder: push false first.
				stack = append(stack, frame{rn.no, int(li), f.depth + 1}, frame{rn.yes, -1, f.depth + 1})
			}
			e.wlo = append(e.wlo, int32(len(e.wt)))
			e.mlo = append(e.mlo, int32(len(e.mem)))
		}
		e.depth = append(e.depth, int32(maxd))
	}
	e.roots = append(e.roots, int32(len(e.feat)))
	e.single = -1
	if (e.agg == aggSum || e.agg == aggAverage) && len(e.wt) > 0 {
		e.single = e.wt[0]
		for i, m := range e.mode {
			if m == modeLeaf && (e.wlo[i+1]-e.wlo[i] != 1 || e.wt[e.wlo[i]] != e.single) {
				e.single = -1
				break
			}
		}
	}
	e.wv32 = make([]float32, len(e.wv))
	for i, v := range e.wv {
		e.wv32[i] = float32(v)
	}
	return nil
}

// setBase checks and records the base values.
func (e *Ensemble) setBase(base []float64) error {
	switch {
	case len(base) == 0, len(base) == e.ntargets:
	case e.classifier && e.ntargets == 2 && len(base) == 1:
	default:
		return invalid("%d base values for %d targets", len(base), e.ntargets)
	}
	e.base = base
	return nil
}

// classInfo records ONNX Runtime's binary case: two class labels and
// weights for one class only.
func (e *Ensemble) classInfo(ws []rawWeight) {
	e.allPos = true
	seen := map[int32]bool{}
	for _, w := range ws {
		seen[w.target] = true
		if w.value < 0 {
			e.allPos = false
		}
	}
	if e.ntargets == 2 && len(seen) == 1 {
		e.binary = true
		for c := range seen {
			e.binClass = int(c)
		}
	}
}

// useHitrates takes nodes_hitrates as TreeSHAP covers when they are not
// all equal (exporters write 1.0 everywhere, which carries no
// information).
func (e *Ensemble) useHitrates() {
	same := true
	for _, h := range e.hit {
		if h < 0 || math.IsNaN(h) || math.IsInf(h, 0) {
			return
		}
		same = same && h == e.hit[0]
	}
	if !same {
		e.cover = slices.Clone(e.hit)
	}
}

// Trees returns the number of trees.
func (e *Ensemble) Trees() int { return len(e.roots) - 1 }

// NumFeatures returns the largest feature id the model uses plus one.
func (e *Ensemble) NumFeatures() int { return e.nfeat }

// NumTargets returns the number of margins (raw scores before the post
// transform): one per target or class, but one for a binary classifier
// that weighs a single class (XGBoost's binary:logistic).
func (e *Ensemble) NumTargets() int {
	if e.binary {
		return 1
	}
	return e.ntargets
}

// marginTarget maps margin t to its aggregation target.
func (e *Ensemble) marginTarget(t int) int {
	if e.binary {
		return e.binClass
	}
	return t
}

// marginBase is the base value added to margin t.
func (e *Ensemble) marginBase(t int) float64 {
	switch {
	case len(e.base) == 0:
		return 0
	case len(e.base) == 1:
		if e.binary || t == 0 {
			return e.base[0]
		}
		return 0
	}
	return e.base[e.marginTarget(t)]
}

// goesTrue is a branch's decision under the ONNX-ML semantics: the
// comparison, or NaN where missing values track the true branch. x is
// already in the ensemble's precision.
func (e *Ensemble) goesTrue(i int, x float64) bool {
	t := e.thr[i]
	var c bool
	switch e.mode[i] {
	case modeLEQ:
		c = x <= t
	case modeLT:
		c = x < t
	case modeGTE:
		c = x >= t
	case modeGT:
		c = x > t
	case modeEQ:
		c = x == t
	case modeNEQ:
		c = x != t
	case modeMember:
		set := e.mem[e.mlo[i]:e.mlo[i+1]]
		_, c = slices.BinarySearch(set, x)
	}
	return c || (e.miss[i] && x != x)
}

// leafOf walks tree t for row x (in the ensemble's precision) and returns
// its leaf's layout index. This is the reference traversal: the compiled
// layout must reach the same leaves.
func (e *Ensemble) leafOf(t int, x []float64) int32 {
	i := e.roots[t]
	for e.mode[i] != modeLeaf {
		if e.goesTrue(int(i), x[e.feat[i]]) {
			i++
		} else {
			i = e.no[i]
		}
	}
	return i
}

// Margin computes the raw scores of one row (features in float32, at
// least NumFeatures of them) before the post transform: out[t] for each of
// NumTargets margins, aggregation and base value included, in the
// kernel's own arithmetic (float32 unless the model is in doubles).
func (e *Ensemble) Margin(x []float32, out []float64) {
	xs := make([]float64, e.nfeat)
	for f := range xs {
		xs[f] = float64(x[f])
	}
	leaves := make([]int32, e.Trees())
	for t := range leaves {
		leaves[t] = e.leafOf(t, xs)
	}
	if e.double {
		margin(e, e.wv, leaves, out)
	} else {
		margin(e, e.wv32, leaves, out)
	}
}

func margin[A float32 | float64](e *Ensemble, w []A, leaves []int32, out []float64) {
	acc := make([]A, e.ntargets)
	has := make([]bool, e.ntargets)
	accumulate(e, w, leaves, acc, has)
	finishAgg(e, acc)
	for t := range e.NumTargets() {
		v := acc[e.marginTarget(t)]
		if e.classifier && e.ntargets == 2 {
			v += A(e.marginBase(t))
		}
		out[t] = float64(v)
	}
}

// accumulate aggregates the leaves' weights into acc (zeroed here): the
// leaves in tree order, a leaf's weights in attribute order, each one
// rounded addition (or comparison, for MIN and MAX) in A. has reports the
// targets that received a weight.
func accumulate[A float32 | float64](e *Ensemble, w []A, leaves []int32, acc []A, has []bool) {
	clear(acc)
	clear(has)
	for _, l := range leaves {
		for k := e.wlo[l]; k < e.wlo[l+1]; k++ {
			t, v := e.wt[k], w[k]
			switch {
			case e.agg == aggMin:
				if !has[t] || v < acc[t] {
					acc[t] = v
				}
			case e.agg == aggMax:
				if !has[t] || v > acc[t] {
					acc[t] = v
				}
			default:
				acc[t] += v
			}
			has[t] = true
		}
	}
}

// finishAgg applies AVERAGE's division and adds the base values, as ONNX
// Runtime does: the score divided by the tree count, then plus the base.
// A two-class classifier's base values are ONNX Runtime's special case,
// applied in finishClass.
func finishAgg[A float32 | float64](e *Ensemble, acc []A) {
	if e.agg == aggAverage {
		n := A(e.Trees())
		for i := range acc {
			acc[i] /= n
		}
	}
	if e.classifier && e.ntargets == 2 {
		return
	}
	if len(e.base) == len(acc) {
		for i := range acc {
			acc[i] += A(e.base[i])
		}
	}
}

// Stats describes an ensemble for the build log and report.
type Stats struct {
	Op            string `json:"op"`
	Trees         int    `json:"trees"`
	Nodes         int    `json:"nodes"`
	Leaves        int    `json:"leaves"`
	MaxDepth      int    `json:"max_depth"`
	Features      int    `json:"features"`     // distinct feature ids in branches
	FeatureSpan   int    `json:"feature_span"` // largest feature id + 1
	Targets       int    `json:"targets"`      // aggregated scores (classes or targets)
	Double        bool   `json:"double"`       // compared and summed in float64
	Compiled      bool   `json:"compiled"`     // the key layout applies (see Compile)
	Aggregate     string `json:"aggregate"`    // SUM, AVERAGE, MIN, MAX
	PostTransform string `json:"post_transform"`
}

// Stats returns e's statistics.
func (e *Ensemble) Stats() Stats {
	s := Stats{Op: e.op, Trees: e.Trees(), Nodes: len(e.feat), FeatureSpan: e.nfeat, Targets: e.ntargets, Double: e.double}
	used := map[int32]bool{}
	for i, m := range e.mode {
		if m == modeLeaf {
			s.Leaves++
		} else {
			used[e.feat[i]] = true
		}
	}
	s.Features = len(used)
	for _, d := range e.depth {
		s.MaxDepth = max(s.MaxDepth, int(d))
	}
	s.Compiled = e.compilable()
	s.Aggregate = [...]string{"AVERAGE", "SUM", "MIN", "MAX"}[e.agg]
	s.PostTransform = [...]string{"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"}[e.post]
	return s
}
