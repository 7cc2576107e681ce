package compile

import (
	"cmp"
	"slices"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// chainable lists the elementwise operators that fuse-elementwise merges:
// each output element is a function of the input elements at its own
// offset (after broadcasting), so running them block by block gives their
// bits exactly.
var chainable = map[string]bool{
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Pow": true,
	"Relu": true, "LeakyRelu": true, "Sigmoid": true, "HardSigmoid": true, "HardSwish": true,
	"Tanh": true, "Exp": true, "Log": true, "Erf": true, "Sqrt": true, "Neg": true, "Abs": true,
	"Reciprocal": true, "Clip": true, "Gelu": true, "Softplus": true, "Softsign": true, "Mish": true,
	"Sign": true, "Ceil": true, "Floor": true, "Round": true,
	"Sin": true, "Cos": true, "Tan": true, "Asin": true, "Acos": true, "Atan": true,
	"Sinh": true, "Cosh": true, "Asinh": true, "Acosh": true, "Atanh": true,
}

// fuseElementwise merges maximal groups of at least two float32
// elementwise nodes into one "vouch" Elementwise layer that runs them block
// by block in one pass over memory (package fused). A group is a tree: each
// member but the last (the root) has its output read once, by another
// member, and is no graph output; every member's output has the root's
// shape, and every operand from outside the group either has that shape
// too (symbolic dimensions must match by name) or holds one element. Only
// operators whose kernel has an in-place Into join. The layer takes the
// root's place in the node order (every outside operand is computed before
// the root) and the name of the group's first node.
func fuseElementwise(s *state) error {
	g := s.g
	if err := ir.Infer(g, s.reg, nil); err != nil {
		return err
	}
	m := newMatcher(g)
	ok := map[*ir.Node]bool{}
	for _, n := range g.Nodes {
		ok[n] = s.chainable(n)
	}
	// parent: the member that reads n's output, where n joins its group.
	parent := map[*ir.Node]*ir.Node{}
	children := map[*ir.Node][]*ir.Node{}
	for _, n := range g.Nodes {
		if !ok[n] {
			continue
		}
		c := soleConsumer(g, m.cons, m.uses, n.Outputs[0])
		if c == nil || !ok[c] || !sameDims(g.Types[n.Outputs[0]], g.Types[c.Outputs[0]]) {
			continue
		}
		parent[n] = c
		children[c] = append(children[c], n)
	}
	index := map[*ir.Node]int{}
	for i, n := range g.Nodes {
		index[n] = i
	}
	removed := map[*ir.Node]bool{}
	for _, root := range g.Nodes {
		if !ok[root] || parent[root] != nil || len(children[root]) == 0 {
			continue
		}
		// The group, in graph order.
		var parts []*ir.Node
		var walk func(n *ir.Node)
		walk = func(n *ir.Node) {
			parts = append(parts, n)
			for _, c := range children[n] {
				walk(c)
			}
		}
		walk(root)
		sortByIndex(parts, index)
		inner := map[string]bool{}
		for _, p := range parts {
			inner[p.Outputs[0]] = true
		}
		var ins []string
		seen := map[string]bool{}
		for _, p := range parts {
			for _, in := range p.Inputs {
				if in != "" && !inner[in] && !seen[in] {
					seen[in] = true
					ins = append(ins, in)
				}
			}
		}
		first := parts[0]
		out := root.Outputs[0]
		body := &ir.Graph{Name: first.Name + "/elementwise", Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}
		for _, in := range ins {
			body.Inputs = append(body.Inputs, &ir.Value{Name: in, Type: g.Types[in]})
		}
		var origin, ops []string
		for _, p := range parts {
			c := *p
			c.Inputs = append([]string{}, p.Inputs...)
			c.Outputs = append([]string{}, p.Outputs...)
			body.Nodes = append(body.Nodes, &c)
			origin = append(origin, s.origin[p.Name]...)
			ops = append(ops, p.OpType)
		}
		body.Outputs = []*ir.Value{{Name: out, Type: g.Types[out]}}
		layer := &ir.Node{Name: first.Name, OpType: "Elementwise", Domain: fusedDomain, Version: 1, Inputs: ins, Outputs: []string{out},
			Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
		for _, p := range parts {
			if p != root {
				removed[p] = true
			}
		}
		*root = *layer
		s.origin[root.Name] = origin
		s.fused("fused", map[string]any{"layer": root.Name, "from": origin, "kind": "elementwise", "ops": ops})
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}

// sortByIndex puts nodes in graph order. The walk that gathers a group
// gives them in reverse, so an insertion sort was quadratic: 8 s for a
// 20,000-node chain.
func sortByIndex(nodes []*ir.Node, index map[*ir.Node]int) {
	slices.SortFunc(nodes, func(a, b *ir.Node) int { return cmp.Compare(index[a], index[b]) })
}

// chainable reports whether n may join an elementwise group: a float32
// elementwise operator with an in-place Into whose operands have its
// output's shape or one element.
func (s *state) chainable(n *ir.Node) bool {
	if n.Domain != "" || !chainable[n.OpType] || len(n.Outputs) != 1 || n.Outputs[0] == "" {
		return false
	}
	switch n.OpType {
	case "Add", "Sub", "Mul", "Div", "Pow":
		if n.Version > 0 && n.Version < 7 {
			return false // legacy broadcasting
		}
	}
	op, err := s.reg.Lookup(n)
	if err != nil || op.Into == nil || !op.InPlace {
		return false
	}
	for _, a := range n.Attrs {
		if len(subgraphs(a)) > 0 {
			return false
		}
	}
	t, ok := s.g.Types[n.Outputs[0]]
	if !ok || t.DType != tensor.Float32 || !t.RankKnown {
		return false
	}
	operands := 0
	for _, in := range n.Inputs {
		if in == "" {
			continue
		}
		it, ok := s.g.Types[in]
		if !ok || it.DType != tensor.Float32 || !it.RankKnown {
			return false
		}
		if sameDims(it, t) {
			operands++
			continue
		}
		if !oneElement(it) {
			return false
		}
	}
	return operands > 0
}

// sameDims reports whether two shapes are provably equal: known sizes
// equal, symbolic dimensions of the same name.
func sameDims(a, b ir.Type) bool {
	if !a.RankKnown || !b.RankKnown || len(a.Shape) != len(b.Shape) {
		return false
	}
	for i, d := range a.Shape {
		e := b.Shape[i]
		switch {
		case d.Known() && e.Known():
			if d.Value != e.Value {
				return false
			}
		case d.Param != "" && d.Param == e.Param:
		default:
			return false
		}
	}
	return true
}

func oneElement(t ir.Type) bool {
	if !t.RankKnown {
		return false
	}
	for _, d := range t.Shape {
		if !d.Known() || d.Value != 1 {
			return false
		}
	}
	return true
}
