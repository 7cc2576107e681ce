package tree

import (
	"math"
	"math/rand/v2"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

func ints(v ...int64) *ir.Attr     { return &ir.Attr{Kind: ir.AttrInts, Ints: v} }
func floats(v ...float32) *ir.Attr { return &ir.Attr{Kind: ir.AttrFloats, Floats: v} }
func strs(v ...string) *ir.Attr    { return &ir.Attr{Kind: ir.AttrStrings, Strings: v} }
func str(s string) *ir.Attr        { return &ir.Attr{Kind: ir.AttrString, S: s} }
func intAttr(i int64) *ir.Attr     { return &ir.Attr{Kind: ir.AttrInt, I: i} }
func tensorAttr(t *tensor.Tensor) *ir.Attr {
	return &ir.Attr{Kind: ir.AttrTensor, T: t}
}

// genSpec shapes a random legacy ensemble.
type genSpec struct {
	trees, depth, feats int
	targets             int
	modes               []string // drawn per branch
	classifier          bool
	leafStop            float64 // chance a node above max depth is a leaf
	thresholds          []float32
}

// genNode builds a random TreeEnsembleRegressor (or Classifier) whose
// thresholds come from a small grid, so that inputs hit them exactly.
func genNode(rng *rand.Rand, g genSpec) *ir.Node {
	var treeIDs, nodeIDs, feats, yes, no, miss, wt, wn, wid []int64
	var modes []string
	var vals, ws []float32
	for t := 0; t < g.trees; t++ {
		next := int64(0)
		var grow func(d int) int64
		grow = func(d int) int64 {
			id := next
			next++
			k := len(modes)
			treeIDs = append(treeIDs, int64(t))
			nodeIDs = append(nodeIDs, id)
			if d == g.depth || (d > 0 && rng.Float64() < g.leafStop) {
				modes = append(modes, "LEAF")
				feats, vals, yes, no, miss = append(feats, 0), append(vals, 0), append(yes, 0), append(no, 0), append(miss, 0)
				nw := 1
				if g.targets > 1 {
					nw = 1 + rng.IntN(g.targets)
				}
				for j := 0; j < nw; j++ {
					wt, wn = append(wt, int64(t)), append(wn, id)
					wid = append(wid, int64(rng.IntN(g.targets)))
					ws = append(ws, float32(rng.NormFloat64()))
				}
				return id
			}
			modes = append(modes, g.modes[rng.IntN(len(g.modes))])
			feats = append(feats, int64(rng.IntN(g.feats)))
			vals = append(vals, g.thresholds[rng.IntN(len(g.thresholds))])
			yes, no, miss = append(yes, 0), append(no, 0), append(miss, int64(rng.IntN(2)))
			y := grow(d + 1)
			n := grow(d + 1)
			yes[k], no[k] = y, n
			return id
		}
		grow(0)
	}
	n := &ir.Node{Name: "trees", OpType: "TreeEnsembleRegressor", Domain: Domain, Version: 3, Inputs: []string{"X"}, Outputs: []string{"Y"},
		Attrs: map[string]*ir.Attr{
			"nodes_treeids": ints(treeIDs...), "nodes_nodeids": ints(nodeIDs...), "nodes_featureids": ints(feats...),
			"nodes_modes": strs(modes...), "nodes_values": floats(vals...), "nodes_truenodeids": ints(yes...),
			"nodes_falsenodeids": ints(no...), "nodes_missing_value_tracks_true": ints(miss...),
		}}
	prefix := "target_"
	if g.classifier {
		n.OpType = "TreeEnsembleClassifier"
		n.Outputs = []string{"Y", "Z"}
		prefix = "class_"
		labels := make([]int64, g.targets)
		for i := range labels {
			labels[i] = int64(10 + i)
		}
		n.Attrs["classlabels_int64s"] = ints(labels...)
	} else {
		n.Attrs["n_targets"] = intAttr(int64(g.targets))
	}
	n.Attrs[prefix+"treeids"], n.Attrs[prefix+"nodeids"], n.Attrs[prefix+"ids"], n.Attrs[prefix+"weights"] = ints(wt...), ints(wn...), ints(wid...), floats(ws...)
	for i := range n.Attrs["nodes_modes"].Strings {
		_ = i
	}
	return n
}

// grid is the threshold grid, with the values inputs are drawn from:
// each threshold, its neighbours, zeros of both signs, infinities, NaN.
var grid = []float32{-2, -0.5, 0, 0.25, 1, 3}

func genInput(rng *rand.Rand, rows, feats int) *tensor.Tensor {
	x := make([]float32, rows*feats)
	for i := range x {
		switch r := rng.IntN(10); {
		case r < 4:
			g := grid[rng.IntN(len(grid))]
			x[i] = [3]float32{math.Nextafter32(g, -10), g, math.Nextafter32(g, 10)}[rng.IntN(3)]
		case r < 5:
			x[i] = [5]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0}[rng.IntN(5)]
		default:
			x[i] = float32(rng.NormFloat64() * 2)
		}
	}
	return tensor.From(x, rows, feats)
}

// runNode runs n on x with the given tactic and worker count.
func runNode(n *ir.Node, x *tensor.Tensor, tactic string, workers int) ([]*tensor.Tensor, error) {
	if tactic == "" {
		delete(n.Attrs, kernel.TacticAttr)
	} else {
		n.Attrs[kernel.TacticAttr] = str(tactic)
	}
	p := parallel.New(workers)
	defer p.Close()
	return Ops()[n.OpType].Run(&kernel.Ctx{Pool: p}, n, []*tensor.Tensor{x})
}
