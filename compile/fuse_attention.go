package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// fuseAttention replaces scaled dot-product attention,
//
//	Softmax(MatMul(Q, K) [÷ or × scale] [+ mask …]) then MatMul with V,
//
// with one "vouch" Attention layer that runs the same nodes in order (see
// package fused: a chain layer keeps their bits). Between the scaling and
// the Softmax it takes any run of Adds (additive masks of any shape that
// broadcasts: BERT's padding mask, a causal mask, Swin's relative-position
// bias) and Reshapes (Swin's shifted windows add their window mask in a
// view of five dimensions and reshape back), each value read only by the
// next node.
func fuseAttention(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, qk := range g.Nodes {
		if removed[qk] || qk.Domain != "" || qk.OpType != "MatMul" {
			continue
		}
		m := newMatcher(g)
		parts := []*ir.Node{qk}
		cur := qk.Outputs[0]
		next := soleConsumer(g, m.cons, m.uses, cur)
		if next != nil && next.Domain == "" && (next.OpType == "Div" || next.OpType == "Mul") && next.Input(0) == cur {
			if _, ok := m.scalar(next.Input(1)); ok {
				parts = append(parts, next)
				cur = next.Outputs[0]
				next = soleConsumer(g, m.cons, m.uses, cur)
			}
		}
		for next != nil && next.Domain == "" && len(next.Outputs) == 1 &&
			(next.OpType == "Add" || (next.OpType == "Reshape" && next.Input(0) == cur)) {
			parts = append(parts, next)
			cur = next.Outputs[0]
			next = soleConsumer(g, m.cons, m.uses, cur)
		}
		if next == nil || next.Domain != "" || next.OpType != "Softmax" {
			continue
		}
		parts = append(parts, next)
		pv := m.only(next.Outputs[0], "MatMul")
		if pv == nil || pv.Input(0) != next.Outputs[0] {
			continue
		}
		parts = append(parts, pv)
		// The layer's inputs: every value the parts read that they do not
		// produce, in first-use order.
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
		body := &ir.Graph{Name: qk.Name + "/attention", Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}
		for _, in := range ins {
			body.Inputs = append(body.Inputs, &ir.Value{Name: in, Type: g.Types[in]})
		}
		var origin []string
		for _, p := range parts {
			c := *p
			c.Inputs = append([]string{}, p.Inputs...)
			body.Nodes = append(body.Nodes, &c)
			origin = append(origin, s.origin[p.Name]...)
		}
		out := pv.Outputs[0]
		body.Outputs = []*ir.Value{{Name: out, Type: g.Types[out]}}
		layer := &ir.Node{Name: qk.Name, OpType: "Attention", Domain: fusedDomain, Version: 1, Inputs: ins, Outputs: []string{out},
			Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
		for _, p := range parts[1:] {
			removed[p] = true
		}
		*qk = *layer
		s.origin[layer.Name] = origin
		s.fused("fused", map[string]any{"layer": qk.Name, "from": origin, "kind": "attention"})
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}
