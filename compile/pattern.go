package compile

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// matcher answers the questions pattern passes ask about a graph.
type matcher struct {
	g    *ir.Graph
	cons map[string][]*ir.Node
	uses map[string]int
}

func newMatcher(g *ir.Graph) *matcher {
	return &matcher{g: g, cons: consumers(g), uses: uses(g)}
}

// only returns the single reader of v with the given op type, if v has
// exactly one reader, is no graph output and is read once.
func (m *matcher) only(v, op string) *ir.Node {
	n := soleConsumer(m.g, m.cons, m.uses, v)
	if n == nil || n.Domain != "" || n.OpType != op {
		return nil
	}
	return n
}

// other returns the input of a binary node that is not v.
func other(n *ir.Node, v string) (string, bool) {
	if len(n.Inputs) != 2 {
		return "", false
	}
	switch v {
	case n.Inputs[0]:
		return n.Inputs[1], true
	case n.Inputs[1]:
		return n.Inputs[0], true
	}
	return "", false
}

// scalar returns the value of a one-element float constant.
func (m *matcher) scalar(name string) (float64, bool) {
	t, ok := m.g.Initializers[name]
	if !ok || t.Len() != 1 || !t.DType.IsFloat() {
		return 0, false
	}
	v, err := t.Float64s()
	if err != nil {
		return 0, false
	}
	return v[0], true
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// lastAxis reports whether a Reduce node reduces exactly the last axis of
// a rank-r input with keepdims.
func (m *matcher) lastAxis(n *ir.Node, rank int) bool {
	if n.Int("keepdims", 1) != 1 {
		return false
	}
	axes := n.Ints("axes", nil)
	if n.Input(1) != "" {
		t, ok := m.g.Initializers[n.Input(1)]
		if !ok {
			return false
		}
		v, err := t.Int64s()
		if err != nil {
			return false
		}
		axes = v
	}
	return len(axes) == 1 && (axes[0] == -1 || (rank > 0 && axes[0] == int64(rank-1)))
}

// fuseLayerNorm replaces the written-out layer normalization
//
//	mean = ReduceMean(x, last axis); d = x - mean
//	y = d / Sqrt(ReduceMean(d^2, last axis) + eps) * gamma + beta
//
// with one LayerNormalization layer (axis -1, epsilon eps).
func fuseLayerNorm(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, r1 := range g.Nodes {
		if removed[r1] || r1.Domain != "" || r1.OpType != "ReduceMean" {
			continue
		}
		m := newMatcher(g)
		x := r1.Input(0)
		xt := g.Types[x]
		if !xt.RankKnown || !m.lastAxis(r1, len(xt.Shape)) || xt.DType != tensor.Float32 {
			continue
		}
		sub := m.only(r1.Outputs[0], "Sub")
		if sub == nil || sub.Input(0) != x || sub.Input(1) != r1.Outputs[0] {
			continue
		}
		d := sub.Outputs[0]
		readers := m.cons[d]
		if len(readers) != 2 || m.uses[d] != 2 {
			continue
		}
		var pow, div *ir.Node
		for _, r := range readers {
			switch r.OpType {
			case "Pow":
				pow = r
			case "Div":
				div = r
			}
		}
		if pow == nil || div == nil || pow.Input(0) != d || div.Input(0) != d {
			continue
		}
		if e, ok := m.scalar(pow.Input(1)); !ok || e != 2 {
			continue
		}
		r2 := m.only(pow.Outputs[0], "ReduceMean")
		if r2 == nil || !m.lastAxis(r2, len(xt.Shape)) {
			continue
		}
		addEps := m.only(r2.Outputs[0], "Add")
		if addEps == nil {
			continue
		}
		epsName, _ := other(addEps, r2.Outputs[0])
		eps, ok := m.scalar(epsName)
		if !ok {
			continue
		}
		sqrt := m.only(addEps.Outputs[0], "Sqrt")
		if sqrt == nil || m.only(sqrt.Outputs[0], "Div") != div || div.Input(1) != sqrt.Outputs[0] {
			continue
		}
		mul := m.only(div.Outputs[0], "Mul")
		if mul == nil {
			continue
		}
		gamma, _ := other(mul, div.Outputs[0])
		addB := m.only(mul.Outputs[0], "Add")
		if addB == nil {
			continue
		}
		beta, _ := other(addB, mul.Outputs[0])
		last := xt.Shape[len(xt.Shape)-1]
		gt, gok := g.Initializers[gamma]
		bt, bok := g.Initializers[beta]
		if !gok || !bok || len(gt.Shape) != 1 || len(bt.Shape) != 1 || !last.Known() || gt.Shape[0] != int(last.Value) || bt.Shape[0] != int(last.Value) || gt.DType != tensor.Float32 || bt.DType != tensor.Float32 {
			continue
		}
		parts := []*ir.Node{r1, sub, pow, r2, addEps, sqrt, div, mul, addB}
		ln := &ir.Node{Name: r1.Name, OpType: "LayerNormalization", Version: 17,
			Inputs: []string{x, gamma, beta}, Outputs: []string{addB.Outputs[0]},
			Attrs: map[string]*ir.Attr{
				"axis":    {Name: "axis", Kind: ir.AttrInt, I: -1},
				"epsilon": {Name: "epsilon", Kind: ir.AttrFloat, F: float32(eps)},
			}}
		var origin []string
		for _, p := range parts {
			origin = append(origin, s.origin[p.Name]...)
			removed[p] = true
		}
		delete(removed, r1)
		*r1 = *ln
		s.origin[r1.Name] = origin
		s.fused("fused", map[string]any{"layer": r1.Name, "from": origin, "kind": "layernorm", "epsilon": eps})
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}

// fuseGelu replaces the erf form of GELU as PyTorch exports it,
// Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5), with one Gelu layer.
func fuseGelu(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, div := range g.Nodes {
		if removed[div] || div.Domain != "" || div.OpType != "Div" {
			continue
		}
		m := newMatcher(g)
		x := div.Input(0)
		if c, ok := m.scalar(div.Input(1)); !ok || !near(c, math.Sqrt2, 1e-4) || g.Types[x].DType != tensor.Float32 {
			continue
		}
		erf := m.only(div.Outputs[0], "Erf")
		if erf == nil {
			continue
		}
		add := m.only(erf.Outputs[0], "Add")
		if add == nil {
			continue
		}
		if one, _ := other(add, erf.Outputs[0]); !func() bool { v, ok := m.scalar(one); return ok && v == 1 }() {
			continue
		}
		mul := m.only(add.Outputs[0], "Mul")
		if mul == nil {
			continue
		}
		if xx, _ := other(mul, add.Outputs[0]); xx != x {
			continue
		}
		half := m.only(mul.Outputs[0], "Mul")
		if half == nil {
			continue
		}
		if h, _ := other(half, mul.Outputs[0]); !func() bool { v, ok := m.scalar(h); return ok && v == 0.5 }() {
			continue
		}
		parts := []*ir.Node{div, erf, add, mul, half}
		gelu := &ir.Node{Name: div.Name, OpType: "Gelu", Version: 20, Inputs: []string{x}, Outputs: []string{half.Outputs[0]},
			Attrs: map[string]*ir.Attr{"approximate": {Name: "approximate", Kind: ir.AttrString, S: "none"}}}
		var origin []string
		for _, p := range parts {
			origin = append(origin, s.origin[p.Name]...)
			removed[p] = true
		}
		delete(removed, div)
		*div = *gelu
		s.origin[div.Name] = origin
		s.fused("fused", map[string]any{"layer": div.Name, "from": origin, "kind": "gelu-erf"})
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}

func without(nodes []*ir.Node, removed map[*ir.Node]bool) []*ir.Node {
	var keep []*ir.Node
	for _, n := range nodes {
		if !removed[n] {
			keep = append(keep, n)
		}
	}
	return keep
}

// fuseGeluTanh replaces the tanh approximation of GELU as PyTorch exports
// it,
//
//	Mul(Mul(x, Add(Tanh(Mul(Add(x, Mul(Pow(x, 3), 0.044715)), √(2/π))), 1)), 0.5)
//
// with one Gelu layer (approximate "tanh").
func fuseGeluTanh(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, pow := range g.Nodes {
		if removed[pow] || pow.Domain != "" || pow.OpType != "Pow" {
			continue
		}
		m := newMatcher(g)
		x := pow.Input(0)
		if e, ok := m.scalar(pow.Input(1)); !ok || e != 3 || g.Types[x].DType != tensor.Float32 {
			continue
		}
		isConst := func(n *ir.Node, v string, want, tol float64) bool {
			c, _ := other(n, v)
			got, ok := m.scalar(c)
			return ok && near(got, want, tol)
		}
		cube := m.only(pow.Outputs[0], "Mul")
		if cube == nil || !isConst(cube, pow.Outputs[0], 0.044715, 1e-6) {
			continue
		}
		inner := m.only(cube.Outputs[0], "Add")
		if inner == nil {
			continue
		}
		if xx, _ := other(inner, cube.Outputs[0]); xx != x {
			continue
		}
		scale := m.only(inner.Outputs[0], "Mul")
		if scale == nil || !isConst(scale, inner.Outputs[0], math.Sqrt(2/math.Pi), 1e-5) {
			continue
		}
		th := m.only(scale.Outputs[0], "Tanh")
		if th == nil {
			continue
		}
		one := m.only(th.Outputs[0], "Add")
		if one == nil || !isConst(one, th.Outputs[0], 1, 0) {
			continue
		}
		mul := m.only(one.Outputs[0], "Mul")
		if mul == nil {
			continue
		}
		if xx, _ := other(mul, one.Outputs[0]); xx != x {
			continue
		}
		half := m.only(mul.Outputs[0], "Mul")
		if half == nil || !isConst(half, mul.Outputs[0], 0.5, 0) {
			continue
		}
		parts := []*ir.Node{pow, cube, inner, scale, th, one, mul, half}
		gelu := &ir.Node{Name: pow.Name, OpType: "Gelu", Version: 20, Inputs: []string{x}, Outputs: []string{half.Outputs[0]},
			Attrs: map[string]*ir.Attr{"approximate": {Name: "approximate", Kind: ir.AttrString, S: "tanh"}}}
		var origin []string
		for _, p := range parts {
			origin = append(origin, s.origin[p.Name]...)
			removed[p] = true
		}
		delete(removed, pow)
		*pow = *gelu
		s.origin[pow.Name] = origin
		s.fused("fused", map[string]any{"layer": pow.Name, "from": origin, "kind": "gelu-tanh"})
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}
