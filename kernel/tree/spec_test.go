package tree

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

var nan32 = float32(math.NaN())

// stump is a one-branch regressor: feature 0 against 1, true leaf 10,
// false leaf 20.
func stump(mode string, missTrue int64) *ir.Node {
	return &ir.Node{OpType: "TreeEnsembleRegressor", Domain: Domain, Version: 3, Attrs: map[string]*ir.Attr{
		"nodes_treeids": ints(0, 0, 0), "nodes_nodeids": ints(0, 1, 2), "nodes_featureids": ints(0, 0, 0),
		"nodes_modes": strs(mode, "LEAF", "LEAF"), "nodes_values": floats(1, 0, 0),
		"nodes_truenodeids": ints(1, 0, 0), "nodes_falsenodeids": ints(2, 0, 0),
		"nodes_missing_value_tracks_true": ints(missTrue, 0, 0),
		"target_treeids":                  ints(0, 0), "target_nodeids": ints(1, 2), "target_ids": ints(0, 0), "target_weights": floats(10, 20),
	}}
}

func run1(t *testing.T, n *ir.Node, x ...float32) []*tensor.Tensor {
	t.Helper()
	for _, tac := range []string{TacticWalk, ""} {
		out, err := runNode(n, tensor.From(append([]float32(nil), x...), len(x), 1), tac, 1)
		if err != nil {
			t.Fatal(err)
		}
		if tac == "" {
			return out
		}
	}
	return nil
}

// TestModes: each node mode's comparison and NaN routing, from the spec:
// the true branch when the comparison holds, or when X is NaN and
// nodes_missing_value_tracks_true is set (NEQ holds for NaN anyway).
func TestModes(t *testing.T) {
	inputs := []float32{0.5, 1, 2, nan32}
	for _, c := range []struct {
		mode       string
		want, miss []float32 // outputs with missing tracks false / true
	}{
		{"BRANCH_LEQ", []float32{10, 10, 20, 20}, []float32{10, 10, 20, 10}},
		{"BRANCH_LT", []float32{10, 20, 20, 20}, []float32{10, 20, 20, 10}},
		{"BRANCH_GTE", []float32{20, 10, 10, 20}, []float32{20, 10, 10, 10}},
		{"BRANCH_GT", []float32{20, 20, 10, 20}, []float32{20, 20, 10, 10}},
		{"BRANCH_EQ", []float32{20, 10, 20, 20}, []float32{20, 10, 20, 10}},
		{"BRANCH_NEQ", []float32{10, 20, 10, 10}, []float32{10, 20, 10, 10}},
	} {
		for mt, want := range [][]float32{c.want, c.miss} {
			got := run1(t, stump(c.mode, int64(mt)), inputs...)[0].Data.([]float32)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%s missing_tracks_true=%d: x=%v gives %v, want %v", c.mode, mt, inputs[i], got[i], want[i])
				}
			}
		}
	}
}

// TestAsTensor: the *_as_tensor attributes are doubles, compared and
// summed in float64: float32(0.1) > 0.1 as doubles.
func TestAsTensor(t *testing.T) {
	n := stump("BRANCH_LEQ", 0)
	delete(n.Attrs, "nodes_values")
	delete(n.Attrs, "target_weights")
	n.Attrs["nodes_values_as_tensor"] = tensorAttr(tensor.From([]float64{0.1, 0, 0}, 3))
	n.Attrs["target_weights_as_tensor"] = tensorAttr(tensor.From([]float64{1e-9, 2}, 2))
	n.Attrs["base_values_as_tensor"] = tensorAttr(tensor.From([]float64{1}, 1))
	got := run1(t, n, 0.1, 0.05)[0].Data.([]float32)
	if got[0] != 3 || got[1] != float32(1+1e-9) {
		t.Errorf("as_tensor: got %v, want [3 %v]", got, float32(1+1e-9))
	}
	n.Attrs["nodes_values"] = floats(1, 0, 0)
	if _, err := FromNode(n); err == nil || !strings.Contains(err.Error(), "both nodes_values") {
		t.Errorf("both nodes_values forms: %v", err)
	}
}

// twoTrees is a regressor of two one-leaf... two stumps on target 0 (leaf
// values 1 and 3 for x <= 1) and, for tree 1's false leaf, target 1.
func twoTrees(agg string) *ir.Node {
	return &ir.Node{OpType: "TreeEnsembleRegressor", Domain: Domain, Version: 3, Attrs: map[string]*ir.Attr{
		"nodes_treeids": ints(0, 0, 0, 1, 1, 1), "nodes_nodeids": ints(0, 1, 2, 0, 1, 2), "nodes_featureids": ints(0, 0, 0, 0, 0, 0),
		"nodes_modes": strs("BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"), "nodes_values": floats(1, 0, 0, 1, 0, 0),
		"nodes_truenodeids": ints(1, 0, 0, 1, 0, 0), "nodes_falsenodeids": ints(2, 0, 0, 2, 0, 0),
		"target_treeids": ints(0, 0, 1, 1), "target_nodeids": ints(1, 2, 1, 2), "target_ids": ints(0, 0, 0, 1),
		"target_weights": floats(1, 5, 3, 7), "n_targets": intAttr(2), "aggregate_function": str(agg),
		"base_values": floats(100, 200),
	}}
}

func TestAggregates(t *testing.T) {
	for _, c := range []struct {
		agg  string
		want []float32 // x=0: both trees' true leaves; x=2: 5 (target 0) and 7 (target 1)
	}{
		{"SUM", []float32{104, 200, 105, 207}},
		{"AVERAGE", []float32{102, 200, 102.5, 203.5}},
		{"MIN", []float32{101, 200, 105, 207}},
		{"MAX", []float32{103, 200, 105, 207}},
	} {
		got := run1(t, twoTrees(c.agg), 0, 2)[0].Data.([]float32)
		for i := range c.want {
			if got[i] != c.want[i] {
				t.Errorf("%s: got %v, want %v", c.agg, got, c.want)
				break
			}
		}
	}
}

// classifier3 is a three-class classifier of one stump: x <= 1 weighs
// classes (0: 1, 1: 2, 2: 0); else (2: 3).
func classifier3(post string) *ir.Node {
	return &ir.Node{OpType: "TreeEnsembleClassifier", Domain: Domain, Version: 3, Attrs: map[string]*ir.Attr{
		"nodes_treeids": ints(0, 0, 0), "nodes_nodeids": ints(0, 1, 2), "nodes_featureids": ints(0, 0, 0),
		"nodes_modes": strs("BRANCH_LEQ", "LEAF", "LEAF"), "nodes_values": floats(1, 0, 0),
		"nodes_truenodeids": ints(1, 0, 0), "nodes_falsenodeids": ints(2, 0, 0),
		"class_treeids": ints(0, 0, 0, 0), "class_nodeids": ints(1, 1, 1, 2), "class_ids": ints(0, 1, 2, 2),
		"class_weights": floats(1, 2, 0, 3), "classlabels_strings": strs("low", "mid", "high"),
		"post_transform": str(post),
	}}
}

func TestPostTransforms(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	soft := func(v ...float64) []float64 {
		m, s := math.Inf(-1), 0.0
		for _, x := range v {
			m = math.Max(m, x)
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = math.Exp(x - m)
			s += out[i]
		}
		for i := range out {
			out[i] /= s
		}
		return out
	}
	e3 := math.Exp(-3)
	for _, c := range []struct {
		post string
		want []float64 // rows x=0 and x=2
		tol  float64
	}{
		{"NONE", []float64{1, 2, 0, 0, 0, 3}, 0},
		{"LOGISTIC", []float64{sig(1), sig(2), 0.5, 0.5, 0.5, sig(3)}, 1e-6},
		{"SOFTMAX", append(soft(1, 2, 0), soft(0, 0, 3)...), 1e-6},
		// SOFTMAX_ZERO: zeros stay zero and stay out of the sum.
		{"SOFTMAX_ZERO", []float64{math.Exp(-1) / (math.Exp(-1) + 1), 1 / (math.Exp(-1) + 1), 0, 0 * e3, 0 * e3, 1}, 1e-6},
		// PROBIT: √2·erfinv(2p-1) by Winitzki's approximation (2e-3).
		{"PROBIT", []float64{math.Inf(1), math.NaN(), math.Inf(-1), math.Inf(-1), math.Inf(-1), math.NaN()}, 0},
	} {
		out := run1(t, classifier3(c.post), 0, 2)
		if l := out[0].Data.([]string); l[0] != "mid" || l[1] != "high" {
			t.Errorf("%s: labels %v, want [mid high]", c.post, l)
		}
		got := out[1].Data.([]float32)
		for i, w := range c.want {
			g := float64(got[i])
			ok := math.Abs(g-w) <= c.tol || (math.IsNaN(w) && math.IsNaN(g)) || (math.IsInf(w, 0) && g == w)
			if c.post == "PROBIT" && (i == 1 || i == 5) {
				ok = math.IsNaN(g) // probit of a score above 1
			}
			if !ok {
				t.Errorf("%s: z[%d] = %v, want %v", c.post, i, g, w)
			}
		}
	}
	for _, c := range []struct{ p, want float64 }{{0.5, 0}, {0.8413447, 1}, {0.0227501, -2}} {
		if g := float64(probit(float32(c.p))); math.Abs(g-c.want) > 5e-3 {
			t.Errorf("probit(%v) = %v, want %v", c.p, g, c.want)
		}
	}
}

// binary is XGBoost's binary form: two labels, weights on class 0 only.
func binaryNode(post string, w1, w2 float32) *ir.Node {
	n := classifier3(post)
	n.Attrs["class_treeids"], n.Attrs["class_nodeids"], n.Attrs["class_ids"] = ints(0, 0), ints(1, 2), ints(0, 0)
	n.Attrs["class_weights"] = floats(w1, w2)
	delete(n.Attrs, "classlabels_strings")
	n.Attrs["classlabels_int64s"] = ints(7, 9)
	n.Attrs["base_values"] = floats(0.25)
	return n
}

func TestBinaryCase(t *testing.T) {
	// Mixed weights, LOGISTIC: s = w + base; label 9 when s > 0;
	// z = [σ(-s), σ(s)].
	out := run1(t, binaryNode("LOGISTIC", -1, 0.5), 0, 2)
	if l := out[0].Data.([]int64); l[0] != 7 || l[1] != 9 {
		t.Errorf("labels %v, want [7 9]", l)
	}
	z := out[1].Data.([]float32)
	for i, s := range []float32{-0.75, 0.75} {
		if z[2*i] != logistic32(-s) || z[2*i+1] != logistic32(s) {
			t.Errorf("row %d: z = %v, want [σ(%v), σ(%v)]", i, z[2*i:2*i+2], -s, s)
		}
	}
	// Non-negative weights, NONE: label by s > 0.5, z = [1-s, s].
	out = run1(t, binaryNode("NONE", 0.1, 0.5), 0, 2)
	if l := out[0].Data.([]int64); l[0] != 7 || l[1] != 9 {
		t.Errorf("labels %v, want [7 9]", l)
	}
	if z := out[1].Data.([]float32); z[0] != 1-float32(0.35) || z[1] != 0.35 || z[3] != 0.75 {
		t.Errorf("z = %v, want [0.65 0.35 0.25 0.75]", z)
	}
	e, err := FromNode(binaryNode("LOGISTIC", -1, 0.5))
	if err != nil || e.NumTargets() != 1 {
		t.Fatalf("binary: %d margins, %v", e.NumTargets(), err)
	}
	var m [1]float64
	e.Margin([]float32{2}, m[:])
	if m[0] != 0.75 {
		t.Errorf("margin %v, want 0.75", m[0])
	}
}

// v5 is a TreeEnsemble (opset 5) of two trees: tree 0 is a BRANCH_MEMBER
// node (x in {1, 5} -> leaf 0, else a LT node: x < 3 -> leaf 1, else 2),
// tree 1 a single leaf (both branches of its root on leaf 3).
func v5(dt tensor.DType) *ir.Node {
	split := func(v ...float64) *ir.Attr { return tensorAttr(tensor.FromFloat64s(dt, []int{len(v)}, v)) }
	return &ir.Node{OpType: "TreeEnsemble", Domain: Domain, Version: 5, Attrs: map[string]*ir.Attr{
		"nodes_featureids": ints(0, 0, 1), "nodes_modes": tensorAttr(tensor.From([]uint8{6, 1, 0}, 3)),
		"nodes_splits":      split(0, 3, 0),
		"nodes_truenodeids": ints(0, 1, 3), "nodes_trueleafs": ints(1, 1, 1),
		"nodes_falsenodeids": ints(1, 2, 3), "nodes_falseleafs": ints(0, 1, 1),
		"nodes_missing_value_tracks_true": ints(1, 0, 0),
		"membership_values":               split(1, 5, math.NaN()),
		"tree_roots":                      ints(0, 2),
		"leaf_targetids":                  ints(0, 0, 1, 1), "leaf_weights": split(10, 20, 30, 0.5),
		"n_targets": intAttr(2), "aggregate_function": intAttr(aggSum), "post_transform": intAttr(postNone),
	}}
}

func TestTreeEnsembleV5(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		n := v5(dt)
		x := tensor.FromFloat64s(dt, []int{5, 2}, []float64{1, 0, 5, 0, 2, 0, 4, 0, math.NaN(), 0})
		for _, tac := range []string{TacticWalk, ""} {
			out, err := runNode(n, x, tac, 1)
			if err != nil {
				t.Fatal(err)
			}
			if out[0].DType != dt {
				t.Errorf("%v input: output %v", dt, out[0].DType)
			}
			got, _ := out[0].Float64s()
			want := []float64{10, 0.5, 10, 0.5, 20, 0.5, 0, 30.5, 10, 0.5}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%v %q: got %v, want %v", dt, tac, got, want)
					break
				}
			}
		}
	}
	e, err := FromNode(v5(tensor.Float32))
	if err != nil {
		t.Fatal(err)
	}
	if s := e.Stats(); s.Trees != 2 || s.Leaves != 4 || s.Nodes != 6 || s.MaxDepth != 2 || s.Compiled {
		t.Errorf("stats %+v", s)
	}
}

// TestHostile: malformed ensembles are refused with an error naming the
// problem, never a panic or a hang.
func TestHostile(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(n *ir.Node)
		want string
	}{
		{"cycle", func(n *ir.Node) {
			n.Attrs["nodes_modes"] = strs("BRANCH_LEQ", "BRANCH_LEQ", "LEAF")
			n.Attrs["nodes_truenodeids"], n.Attrs["nodes_falsenodeids"] = ints(1, 0, 0), ints(2, 2, 0)
			n.Attrs["target_nodeids"] = ints(2, 2)
		}, "no root"},
		{"self loop", func(n *ir.Node) {
			n.Attrs["nodes_truenodeids"] = ints(0, 0, 0)
			n.Attrs["nodes_falsenodeids"] = ints(0, 0, 0)
		}, "root"},
		{"missing child", func(n *ir.Node) { n.Attrs["nodes_falsenodeids"] = ints(99, 0, 0) }, "does not exist"},
		{"huge node id", func(n *ir.Node) { n.Attrs["nodes_nodeids"] = ints(0, 1, 1<<62) }, "does not exist"},
		{"duplicate node", func(n *ir.Node) { n.Attrs["nodes_nodeids"] = ints(0, 1, 1) }, "defined twice"},
		{"negative feature", func(n *ir.Node) { n.Attrs["nodes_featureids"] = ints(-1, 0, 0) }, "feature id -1"},
		{"huge feature", func(n *ir.Node) { n.Attrs["nodes_featureids"] = ints(1<<40, 0, 0) }, "out of range"},
		{"lengths", func(n *ir.Node) { n.Attrs["nodes_values"] = floats(1, 0) }, "nodes_values has 2"},
		{"weight on branch", func(n *ir.Node) { n.Attrs["target_nodeids"] = ints(0, 2) }, "not a leaf"},
		{"target range", func(n *ir.Node) { n.Attrs["target_ids"] = ints(0, 5) }, "out of range"},
		{"huge n_targets", func(n *ir.Node) { n.Attrs["n_targets"] = intAttr(1 << 50) }, "targets"},
		{"mode", func(n *ir.Node) { n.Attrs["nodes_modes"] = strs("BRANCH_XX", "LEAF", "LEAF") }, "unknown mode"},
		{"base values", func(n *ir.Node) { n.Attrs["base_values"] = floats(1, 2, 3) }, "base values"},
		{"two roots", func(n *ir.Node) { n.Attrs["nodes_modes"] = strs("LEAF", "LEAF", "LEAF") }, "two roots"},
		{"kind", func(n *ir.Node) { n.Attrs["nodes_nodeids"] = floats(0, 1, 2) }, "must be ints"},
	} {
		n := stump("BRANCH_LEQ", 0)
		c.edit(n)
		_, err := FromNode(n)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		edit func(n *ir.Node)
		want string
	}{
		{"leaf range", func(n *ir.Node) { n.Attrs["nodes_truenodeids"] = ints(9, 1, 3) }, "child leaf 9"},
		{"shared subtree", func(n *ir.Node) { n.Attrs["tree_roots"] = ints(0, 1) }, "reached twice"},
		{"mode range", func(n *ir.Node) { n.Attrs["nodes_modes"] = tensorAttr(tensor.From([]uint8{7, 1, 0}, 3)) }, "mode 7"},
		{"leaf flag", func(n *ir.Node) { n.Attrs["nodes_falseleafs"] = ints(0, 2, 1) }, "leaf flag 2"},
		{"members", func(n *ir.Node) { delete(n.Attrs, "membership_values") }, "membership_values is not set"},
		{"root range", func(n *ir.Node) { n.Attrs["tree_roots"] = ints(0, -4) }, "tree_roots[1]"},
	} {
		n := v5(tensor.Float32)
		c.edit(n)
		_, err := FromNode(n)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("v5 %s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// Too few features at run time.
	if _, err := runNode(twoTrees("SUM"), tensor.From([]float32{}, 1, 0), "", 1); err == nil {
		t.Error("a row of 0 features ran")
	}
}

// TestTreeEnsembleFloat16: opset 5 takes float16 X (and splits) and
// answers in float16.
func TestTreeEnsembleFloat16(t *testing.T) {
	n := v5(tensor.Float16)
	x := tensor.FromFloat64s(tensor.Float16, []int{2, 2}, []float64{5, 0, 4, 0})
	out, err := runNode(n, x, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := out[0].Float64s()
	if out[0].DType != tensor.Float16 || got[0] != 10 || got[1] != 0.5 || got[2] != 0 || got[3] != 30.5 {
		t.Errorf("float16: %v %v", out[0].DType, got)
	}
	if _, err := runNode(stump("BRANCH_LEQ", 0), tensor.FromFloat64s(tensor.Float16, []int{1, 1}, []float64{1}), "", 1); err == nil {
		t.Error("TreeEnsembleRegressor accepted float16")
	}
}
