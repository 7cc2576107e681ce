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
func foldLayout(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, second := range g.Nodes {
		if removed[second] || second.Domain != "" || len(second.Inputs) == 0 {
			continue
		}
		m := newMatcher(g)
		var first *ir.Node
		for _, n := range g.Nodes {
			if !removed[n] && len(n.Outputs) == 1 && n.Outputs[0] == second.Inputs[0] {
				first = n
			}
		}
		if first == nil || first.Domain != "" || first.OpType != second.OpType || m.only(first.Outputs[0], second.OpType) != second {
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
				renameUses(g, second.Outputs[0], first.Inputs[0])
				removed[first], removed[second] = true, true
				s.log.Info(s.pass, "removed", map[string]any{"nodes": origin, "reason": "transposes cancel"})
				continue
			}
			second.Inputs[0] = first.Inputs[0]
			second.Attrs["perm"] = &ir.Attr{Name: "perm", Kind: ir.AttrInts, Ints: perm}
			removed[first] = true
			s.origin[second.Name] = origin
			s.log.Info(s.pass, "folded", map[string]any{"layer": second.Name, "from": origin, "kind": "transpose-transpose", "perm": perm})
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
			second.Inputs[0] = first.Inputs[0]
			removed[first] = true
			s.origin[second.Name] = origin
			s.log.Info(s.pass, "folded", map[string]any{"layer": second.Name, "from": origin, "kind": "reshape-reshape"})
		}
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}
