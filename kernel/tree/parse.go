package tree

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// Bounds on what a model may claim. The attribute arrays are already in
// memory when a node is parsed, so these bound what parsing and running
// allocate from the values inside them (feature ids, target counts, depth).
const (
	// MaxFeatures bounds a node's feature id: each row is expanded into
	// 2·(max feature id + 1) comparison keys.
	MaxFeatures = 1 << 20
	// MaxTargets bounds n_targets and the number of class labels.
	MaxTargets = 1 << 16
	// MaxDepth bounds a tree's depth (TreeSHAP's path tables are depth²).
	MaxDepth = 256
	// MaxNodes bounds the nodes of one ensemble.
	MaxNodes = 1 << 26
)

// Node modes, the numbering of TreeEnsemble (opset 5) nodes_modes, plus leaf.
const (
	modeLEQ uint8 = iota
	modeLT
	modeGTE
	modeGT
	modeEQ
	modeNEQ
	modeMember
	modeLeaf
)

var modeNames = map[string]uint8{
	"BRANCH_LEQ": modeLEQ, "BRANCH_LT": modeLT, "BRANCH_GTE": modeGTE, "BRANCH_GT": modeGT,
	"BRANCH_EQ": modeEQ, "BRANCH_NEQ": modeNEQ, "LEAF": modeLeaf,
}

// Aggregate functions, numbered as TreeEnsemble's aggregate_function.
const (
	aggAverage = iota
	aggSum
	aggMin
	aggMax
)

// Post transforms, numbered as TreeEnsemble's post_transform.
const (
	postNone = iota
	postSoftmax
	postLogistic
	postSoftmaxZero
	postProbit
)

var postNames = map[string]int{"NONE": postNone, "SOFTMAX": postSoftmax, "LOGISTIC": postLogistic, "SOFTMAX_ZERO": postSoftmaxZero, "PROBIT": postProbit}

// ErrInvalid is wrapped by every error about a malformed ensemble.
var ErrInvalid = errors.New("tree: invalid ensemble")

func invalid(format string, args ...any) error {
	return fmt.Errorf("tree: %s: %w", fmt.Sprintf(format, args...), ErrInvalid)
}

// rawNode is one node of the attribute form before layout: children are
// raw indices into the same array (-1 for none).
type rawNode struct {
	feat      int64
	thr       float64
	mode      uint8
	missTrue  bool
	yes, no   int // raw indices of the true and false child
	pos       int // attribute position (the cover order, see SetCovers)
	wlo, whi  int // weights [wlo, whi) in rawWeights, leaves only
	mlo, mhi  int // set members [mlo, mhi) in members, BRANCH_MEMBER only
	hit       float64
	tree, nid int64 // legacy ids, for error messages
}

type rawWeight struct {
	target int32
	value  float64
}

// attrs reads typed attributes and remembers the first error.
type attrs struct {
	n   *ir.Node
	err error
}

func (a *attrs) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

func (a *attrs) ints(name string) []int64 {
	at, ok := a.n.Attrs[name]
	if !ok {
		return nil
	}
	if at.Kind != ir.AttrInts && at.Kind != ir.AttrInt {
		a.fail(invalid("attribute %s must be ints", name))
		return nil
	}
	if at.Kind == ir.AttrInt {
		return []int64{at.I}
	}
	return at.Ints
}

func (a *attrs) int(name string, def int64) int64 {
	at, ok := a.n.Attrs[name]
	if !ok {
		return def
	}
	if at.Kind != ir.AttrInt {
		a.fail(invalid("attribute %s must be an int", name))
		return def
	}
	return at.I
}

func (a *attrs) str(name, def string) string {
	at, ok := a.n.Attrs[name]
	if !ok {
		return def
	}
	if at.Kind != ir.AttrString {
		a.fail(invalid("attribute %s must be a string", name))
		return def
	}
	return at.S
}

func (a *attrs) strings(name string) []string {
	at, ok := a.n.Attrs[name]
	if !ok {
		return nil
	}
	if at.Kind != ir.AttrStrings {
		a.fail(invalid("attribute %s must be strings", name))
		return nil
	}
	return at.Strings
}

// floats reads name (floats) or name_as_tensor (a double or float tensor);
// double reports whether the values came as doubles. Both present is an
// error.
func (a *attrs) floats(name string) (v []float64, present, double bool) {
	at, ok1 := a.n.Attrs[name]
	_, ok2 := a.n.Attrs[name+"_as_tensor"]
	if ok1 && ok2 {
		a.fail(invalid("both %s and %s_as_tensor are set", name, name))
		return nil, false, false
	}
	if ok1 {
		if at.Kind != ir.AttrFloats && at.Kind != ir.AttrFloat {
			a.fail(invalid("attribute %s must be floats", name))
			return nil, false, false
		}
		fs := at.Floats
		if at.Kind == ir.AttrFloat {
			fs = []float32{at.F}
		}
		v = make([]float64, len(fs))
		for i, f := range fs {
			v[i] = float64(f)
		}
		return v, true, false
	}
	if ok2 {
		return a.tensor(name + "_as_tensor")
	}
	return nil, false, false
}

// tensor reads a float tensor attribute as float64s.
func (a *attrs) tensor(name string) (v []float64, present, double bool) {
	at, ok := a.n.Attrs[name]
	if !ok {
		return nil, false, false
	}
	if at.Kind != ir.AttrTensor || at.T == nil {
		a.fail(invalid("attribute %s must be a tensor", name))
		return nil, false, false
	}
	switch at.T.DType {
	case tensor.Float32, tensor.Float64, tensor.Float16:
	default:
		a.fail(invalid("attribute %s is a %v tensor, want float, double or float16", name, at.T.DType))
		return nil, false, false
	}
	if err := at.T.Check(); err != nil {
		a.fail(invalid("attribute %s: %v", name, err))
		return nil, false, false
	}
	v, err := at.T.Float64s()
	if err != nil {
		a.fail(invalid("attribute %s: %v", name, err))
		return nil, false, false
	}
	return v, true, at.T.DType == tensor.Float64
}

// FromNode parses and validates a TreeEnsembleClassifier,
// TreeEnsembleRegressor (ai.onnx.ml 1-3) or TreeEnsemble (ai.onnx.ml 5)
// node. Every malformed model (hostile ids, cycles, missing children,
// out-of-range features or classes, mismatched lengths) is an error
// wrapping ErrInvalid.
func FromNode(n *ir.Node) (*Ensemble, error) {
	if n == nil {
		return nil, invalid("nil node")
	}
	var e *Ensemble
	var err error
	switch n.OpType {
	case "TreeEnsembleClassifier", "TreeEnsembleRegressor":
		e, err = parseLegacy(n)
	case "TreeEnsemble":
		e, err = parseV5(n)
	default:
		return nil, invalid("%s is not a tree ensemble operator", n.OpType)
	}
	if err != nil {
		return nil, err
	}
	e.op = n.OpType
	return e, nil
}

func parseLegacy(n *ir.Node) (*Ensemble, error) {
	a := &attrs{n: n}
	cls := n.OpType == "TreeEnsembleClassifier"
	treeIDs := a.ints("nodes_treeids")
	nodeIDs := a.ints("nodes_nodeids")
	feats := a.ints("nodes_featureids")
	modes := a.strings("nodes_modes")
	yes := a.ints("nodes_truenodeids")
	no := a.ints("nodes_falsenodeids")
	miss := a.ints("nodes_missing_value_tracks_true")
	thr, _, dthr := a.floats("nodes_values")
	hits, hasHits, _ := a.floats("nodes_hitrates")
	base, _, dbase := a.floats("base_values")
	prefix := "target_"
	if cls {
		prefix = "class_"
	}
	wTree := a.ints(prefix + "treeids")
	wNode := a.ints(prefix + "nodeids")
	wID := a.ints(prefix + "ids")
	wVal, _, dw := a.floats(prefix + "weights")
	post := a.str("post_transform", "NONE")
	var agg string
	var nt int64
	var labInt []int64
	var labStr []string
	if cls {
		labInt = a.ints("classlabels_int64s")
		labStr = a.strings("classlabels_strings")
	} else {
		agg = a.str("aggregate_function", "SUM")
		nt = a.int("n_targets", 1)
	}
	if a.err != nil {
		return nil, a.err
	}
	nn := len(modes)
	if nn == 0 {
		return nil, invalid("nodes_modes is empty")
	}
	if nn > MaxNodes {
		return nil, invalid("%d nodes, more than the bound %d", nn, MaxNodes)
	}
	for _, c := range []struct {
		name string
		l    int
	}{{"nodes_treeids", len(treeIDs)}, {"nodes_nodeids", len(nodeIDs)}, {"nodes_featureids", len(feats)},
		{"nodes_truenodeids", len(yes)}, {"nodes_falsenodeids", len(no)}, {"nodes_values", len(thr)}} {
		if c.l != nn {
			return nil, invalid("%s has %d entries, nodes_modes %d", c.name, c.l, nn)
		}
	}
	if miss != nil && len(miss) != nn {
		return nil, invalid("nodes_missing_value_tracks_true has %d entries, nodes_modes %d", len(miss), nn)
	}
	if hasHits && len(hits) != nn {
		return nil, invalid("nodes_hitrates has %d entries, nodes_modes %d", len(hits), nn)
	}
	nw := len(wVal)
	if len(wTree) != nw || len(wNode) != nw || len(wID) != nw {
		return nil, invalid("%streeids, %snodeids, %sids and %sweights have %d, %d, %d and %d entries",
			prefix, prefix, prefix, prefix, len(wTree), len(wNode), len(wID), nw)
	}
	e := &Ensemble{double: dthr || dbase || dw}
	if cls {
		switch {
		case len(labInt) > 0 && len(labStr) > 0:
			return nil, invalid("both classlabels_int64s and classlabels_strings are set")
		case len(labStr) > 0:
			e.labelsStr = labStr
			nt = int64(len(labStr))
		case len(labInt) > 0:
			e.labelsInt = labInt
			nt = int64(len(labInt))
		default:
			return nil, invalid("a classifier needs classlabels_int64s or classlabels_strings")
		}
		e.classifier = true
		e.agg = aggSum
	} else {
		ag, ok := map[string]int{"AVERAGE": aggAverage, "SUM": aggSum, "MIN": aggMin, "MAX": aggMax}[agg]
		if !ok {
			return nil, invalid("unknown aggregate_function %q (AVERAGE, SUM, MIN or MAX)", agg)
		}
		e.agg = ag
	}
	if nt < 1 || nt > MaxTargets {
		return nil, invalid("%d targets, want 1 to %d", nt, MaxTargets)
	}
	e.ntargets = int(nt)
	p, ok := postNames[post]
	if !ok {
		return nil, invalid("unknown post_transform %q (NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT)", post)
	}
	e.post = p

	raw := make([]rawNode, nn)
	type key struct{ tree, node int64 }
	index := make(map[key]int, nn)
	for i := range raw {
		m, ok := modeNames[modes[i]]
		if !ok {
			return nil, invalid("node %d of tree %d: unknown mode %q", nodeIDs[i], treeIDs[i], modes[i])
		}
		k := key{treeIDs[i], nodeIDs[i]}
		if _, dup := index[k]; dup {
			return nil, invalid("node %d of tree %d is defined twice", k.node, k.tree)
		}
		index[k] = i
		r := rawNode{feat: feats[i], thr: thr[i], mode: m, pos: i, yes: -1, no: -1, hit: 1, tree: k.tree, nid: k.node}
		if miss != nil {
			r.missTrue = miss[i] != 0
		}
		if hasHits {
			r.hit = hits[i]
		}
		raw[i] = r
	}
	for i := range raw {
		r := &raw[i]
		if r.mode == modeLeaf {
			continue
		}
		y, ok1 := index[key{r.tree, yes[i]}]
		f, ok2 := index[key{r.tree, no[i]}]
		if !ok1 || !ok2 {
			return nil, invalid("node %d of tree %d: child %d or %d does not exist in the tree", r.nid, r.tree, yes[i], no[i])
		}
		r.yes, r.no = y, f
	}
	// Weights, grouped per leaf in attribute order.
	cnt := make([]int, nn+1)
	wnode := make([]int, nw)
	for j := 0; j < nw; j++ {
		i, ok := index[key{wTree[j], wNode[j]}]
		if !ok {
			return nil, invalid("%sweights[%d]: node %d of tree %d does not exist", prefix, j, wNode[j], wTree[j])
		}
		if raw[i].mode != modeLeaf {
			return nil, invalid("%sweights[%d]: node %d of tree %d is not a leaf", prefix, j, wNode[j], wTree[j])
		}
		if wID[j] < 0 || wID[j] >= nt {
			return nil, invalid("%sids[%d] = %d is out of range [0, %d)", prefix, j, wID[j], nt)
		}
		wnode[j] = i
		cnt[i+1]++
	}
	for i := 0; i < nn; i++ {
		cnt[i+1] += cnt[i]
	}
	ws := make([]rawWeight, nw)
	fill := append([]int(nil), cnt[:nn]...)
	for j := 0; j < nw; j++ {
		i := wnode[j]
		ws[fill[i]] = rawWeight{int32(wID[j]), wVal[j]}
		fill[i]++
	}
	for i := range raw {
		raw[i].wlo, raw[i].whi = cnt[i], cnt[i+1]
	}
	// Roots: per tree (ascending tree id), the one node no other node
	// points at.
	child := make([]bool, nn)
	for i := range raw {
		if raw[i].mode != modeLeaf {
			child[raw[i].yes] = true
			child[raw[i].no] = true
		}
	}
	rootOf := map[int64]int{}
	var ids []int64
	for i := range raw {
		if child[i] {
			continue
		}
		t := raw[i].tree
		if j, dup := rootOf[t]; dup {
			return nil, invalid("tree %d has two roots (nodes %d and %d): an unreachable node or a disconnected tree", t, raw[j].nid, raw[i].nid)
		}
		rootOf[t] = i
		ids = append(ids, t)
	}
	trees := map[int64]bool{}
	for i := range raw {
		trees[raw[i].tree] = true
	}
	for t := range trees {
		if _, ok := rootOf[t]; !ok {
			return nil, invalid("tree %d has no root (every node is some node's child: a cycle)", t)
		}
	}
	slices.Sort(ids)
	roots := make([]int, len(ids))
	for k, t := range ids {
		roots[k] = rootOf[t]
	}
	if err := e.layout(raw, ws, nil, roots, nn); err != nil {
		return nil, err
	}
	if err := e.setBase(base); err != nil {
		return nil, err
	}
	if cls {
		e.classInfo(ws)
	}
	if hasHits {
		e.useHitrates()
	}
	return e, nil
}

func parseV5(n *ir.Node) (*Ensemble, error) {
	a := &attrs{n: n}
	feats := a.ints("nodes_featureids")
	yes := a.ints("nodes_truenodeids")
	no := a.ints("nodes_falsenodeids")
	yesLeaf := a.ints("nodes_trueleafs")
	noLeaf := a.ints("nodes_falseleafs")
	miss := a.ints("nodes_missing_value_tracks_true")
	roots := a.ints("tree_roots")
	lt := a.ints("leaf_targetids")
	splits, _, dsplit := a.tensor("nodes_splits")
	hits, hasHits, _ := a.tensor("nodes_hitrates")
	lw, _, dlw := a.tensor("leaf_weights")
	mem, hasMem, _ := a.tensor("membership_values")
	nt := a.int("n_targets", 0)
	agg := a.int("aggregate_function", aggSum)
	post := a.int("post_transform", postNone)
	var modes []float64
	if at, ok := n.Attrs["nodes_modes"]; ok {
		if at.Kind != ir.AttrTensor || at.T == nil || at.T.DType != tensor.Uint8 {
			a.fail(invalid("attribute nodes_modes must be a uint8 tensor"))
		} else if err := at.T.Check(); err != nil {
			a.fail(invalid("attribute nodes_modes: %v", err))
		} else {
			modes, _ = at.T.Float64s()
		}
	}
	if a.err != nil {
		return nil, a.err
	}
	nn := len(feats)
	if nn == 0 {
		return nil, invalid("nodes_featureids is empty")
	}
	if nn > MaxNodes || len(lw) > MaxNodes {
		return nil, invalid("%d nodes and %d leaves, more than the bound %d", nn, len(lw), MaxNodes)
	}
	for _, c := range []struct {
		name string
		l    int
	}{{"nodes_modes", len(modes)}, {"nodes_truenodeids", len(yes)}, {"nodes_falsenodeids", len(no)},
		{"nodes_trueleafs", len(yesLeaf)}, {"nodes_falseleafs", len(noLeaf)}, {"nodes_splits", len(splits)}} {
		if c.l != nn {
			return nil, invalid("%s has %d entries, nodes_featureids %d", c.name, c.l, nn)
		}
	}
	if miss != nil && len(miss) != nn {
		return nil, invalid("nodes_missing_value_tracks_true has %d entries, nodes_featureids %d", len(miss), nn)
	}
	if hasHits && len(hits) != nn {
		return nil, invalid("nodes_hitrates has %d entries, nodes_featureids %d", len(hits), nn)
	}
	if len(lt) != len(lw) || len(lw) == 0 {
		return nil, invalid("leaf_targetids and leaf_weights have %d and %d entries (want equal, non-zero)", len(lt), len(lw))
	}
	if nt < 1 || nt > MaxTargets {
		return nil, invalid("n_targets %d, want 1 to %d", nt, MaxTargets)
	}
	if agg < aggAverage || agg > aggMax {
		return nil, invalid("aggregate_function %d, want 0 (AVERAGE) to 3 (MAX)", agg)
	}
	if post < postNone || post > postProbit {
		return nil, invalid("post_transform %d, want 0 (NONE) to 4 (PROBIT)", post)
	}
	if len(roots) == 0 {
		return nil, invalid("tree_roots is empty")
	}
	e := &Ensemble{double: dsplit || dlw, ntargets: int(nt), agg: int(agg), post: int(post)}
	// Raw nodes: interior nodes 0..nn-1, then one leaf node per leaf entry.
	nl := len(lw)
	raw := make([]rawNode, nn+nl)
	ws := make([]rawWeight, nl)
	var members []float64
	for j := 0; j < nl; j++ {
		if lt[j] < 0 || lt[j] >= nt {
			return nil, invalid("leaf_targetids[%d] = %d is out of range [0, %d)", j, lt[j], nt)
		}
		ws[j] = rawWeight{int32(lt[j]), lw[j]}
		raw[nn+j] = rawNode{mode: modeLeaf, pos: nn + j, wlo: j, whi: j + 1, yes: -1, no: -1, hit: 1, nid: int64(nn + j)}
	}
	child := func(i int, id, leaf int64) (int, error) {
		switch leaf {
		case 0:
			if id < 0 || id >= int64(nn) {
				return 0, invalid("node %d: child node %d is out of range [0, %d)", i, id, nn)
			}
			return int(id), nil
		case 1:
			if id < 0 || id >= int64(nl) {
				return 0, invalid("node %d: child leaf %d is out of range [0, %d)", i, id, nl)
			}
			return nn + int(id), nil
		}
		return 0, invalid("node %d: leaf flag %d, want 0 or 1", i, leaf)
	}
	next := 0 // next unread membership value
	for i := 0; i < nn; i++ {
		m := modes[i]
		if m < 0 || m > float64(modeMember) {
			return nil, invalid("node %d: mode %v, want 0 (BRANCH_LEQ) to 6 (BRANCH_MEMBER)", i, m)
		}
		r := rawNode{feat: feats[i], thr: splits[i], mode: uint8(m), pos: i, hit: 1, nid: int64(i)}
		var err error
		if r.yes, err = child(i, yes[i], yesLeaf[i]); err != nil {
			return nil, err
		}
		if r.no, err = child(i, no[i], noLeaf[i]); err != nil {
			return nil, err
		}
		if miss != nil {
			r.missTrue = miss[i] != 0
		}
		if hasHits {
			r.hit = hits[i]
		}
		if r.mode == modeMember {
			if !hasMem {
				return nil, invalid("node %d is BRANCH_MEMBER but membership_values is not set", i)
			}
			lo := len(members)
			for next < len(mem) && !math.IsNaN(mem[next]) {
				members = append(members, mem[next])
				next++
			}
			next++ // the NaN delimiter (absent after the last set)
			r.mlo, r.mhi = lo, len(members)
		}
		raw[i] = r
	}
	if next < len(mem) {
		return nil, invalid("membership_values has %d values past the last BRANCH_MEMBER node's set", len(mem)-next)
	}
	rs := make([]int, len(roots))
	for k, r := range roots {
		if r < 0 || r >= int64(nn) {
			return nil, invalid("tree_roots[%d] = %d is out of range [0, %d)", k, r, nn)
		}
		rs[k] = int(r)
	}
	if err := e.layout(raw, ws, members, rs, nn+nl); err != nil {
		return nil, err
	}
	if hasHits {
		e.useHitrates()
	}
	return e, nil
}
