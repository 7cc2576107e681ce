package compile

import (
	"github.com/vouchml/vouch/ir"
)

// foldLayout folds layout operations into their neighbours where that
// changes no value: a Transpose of a Transpose becomes one Transpose (or
// nothing, when the permutations cancel), and a Reshape of a Reshape
// becomes one Reshape to the final shape (when the final shape is a
// constant without 0 entries, which would copy a dimension from the
// intermediate shape). Both only move data, so bits are unchanged.
//
// The pass is linear in the graph (a 20,000-node chain of Transposes took
// minutes when it rebuilt its use counts and searched for each node's
// producer per node): the producers are indexed once and the use counts
// are updated by each fold.
func foldLayout(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	producer := map[string]*ir.Node{}
	for _, n := range g.Nodes {
		if len(n.Outputs) == 1 {
			producer[n.Outputs[0]] = n
		}
	}
	m := newMatcher(g)
	for _, second := range g.Nodes {
		if removed[second] || second.Domain != "" || len(second.Inputs) == 0 || (second.OpType != "Transpose" && second.OpType != "Reshape") {
			continue
		}
		first := producer[second.Inputs[0]]
		if first == nil || removed[first] || first.Domain != "" || first.OpType != second.OpType || m.only(first.Outputs[0], second.OpType) != second {
			continue
		}
		switch second.OpType {
		case "Transpose":
			p1, p2 := first.Ints("perm", nil), second.Ints("perm", nil)
			if p1 == nil || p2 == nil || len(p1) != len(p2) {
				continue // default perms need the rank; leave them
			}
			perm := make([]int64, len(p2))
			identity := true
			for i := range p2 {
				if p2[i] < 0 || int(p2[i]) >= len(p1) {
					perm = nil
					break
				}
				perm[i] = p1[p2[i]]
				identity = identity && perm[i] == int64(i)
			}
			if perm == nil {
				continue
			}
			origin := append(append([]string{}, s.origin[first.Name]...), s.origin[second.Name]...)
			if identity && !isGraphOutput(g, second.Outputs[0]) {
				m.drop(first)
				m.drop(second)
				m.rename(second.Outputs[0], first.Inputs[0])
				removed[first], removed[second] = true, true
				s.removedNode(map[string]any{"nodes": origin, "reason": "transposes cancel"})
				continue
			}
			m.drop(first)
			m.drop(second)
			second.Inputs[0] = first.Inputs[0]
			m.add(second)
			second.Attrs["perm"] = &ir.Attr{Name: "perm", Kind: ir.AttrInts, Ints: perm}
			removed[first] = true
			s.origin[second.Name] = origin
			s.fused("folded", map[string]any{"layer": second.Name, "from": origin, "kind": "transpose-transpose", "perm": perm})
		case "Reshape":
			shape, ok := g.Initializers[second.Input(1)]
			if !ok || first.Int("allowzero", 0) != 0 {
				continue
			}
			v, err := shape.Int64s()
			if err != nil {
				continue
			}
			zero := false
			for _, d := range v {
				zero = zero || d == 0
			}
			if zero {
				continue
			}
			origin := append(append([]string{}, s.origin[first.Name]...), s.origin[second.Name]...)
			m.drop(first)
			m.drop(second)
			second.Inputs[0] = first.Inputs[0]
			m.add(second)
			removed[first] = true
			s.origin[second.Name] = origin
			s.fused("folded", map[string]any{"layer": second.Name, "from": origin, "kind": "reshape-reshape"})
		}
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}

// drop takes n's direct inputs out of the matcher's use counts and
// consumer lists (n is about to be removed or rewired; add puts it back).
func (m *matcher) drop(n *ir.Node) {
	for _, in := range n.Inputs {
		if in == "" {
			continue
		}
		m.uses[in]--
		c := m.cons[in]
		for i, x := range c {
			if x == n {
				m.cons[in] = append(c[:i:i], c[i+1:]...)
				break
			}
		}
	}
}

// add counts n's direct inputs.
func (m *matcher) add(n *ir.Node) {
	for _, in := range n.Inputs {
		if in != "" {
			m.uses[in]++
			m.cons[in] = append(m.cons[in], n)
		}
	}
}

// rename makes every reader of old read new. Readers are found through
// the consumer lists; where a subgraph also reads old (a use the lists do
// not hold) the whole graph is renamed and the counts rebuilt.
func (m *matcher) rename(old, new string) {
	if m.uses[old] != len(m.cons[old]) {
		renameUses(m.g, old, new)
		*m = *newMatcher(m.g)
		return
	}
	for _, c := range append([]*ir.Node{}, m.cons[old]...) {
		m.drop(c)
		for i, in := range c.Inputs {
			if in == old {
				c.Inputs[i] = new
			}
		}
		m.add(c)
	}
}
