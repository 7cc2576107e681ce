package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// fuseResidual merges the residual Add that follows a fused MatMul (or
// Gemm) + bias layer, y = (x·W + b) + x' as in a transformer block, into
// that layer as its second Add (kernel/fused: layout [n, 2, 0]). The
// fused layer runs the two Adds in their order, each with the running
// value as its first operand, and hands them to the MatMul kernel as one
// epilogue (kernel.Epilogue: ColBias, then Residual2) where the residual
// has the output's shape; otherwise it runs the second Add as its own
// pass. Either way the float32 operations are the two Adds', so the bits
// are unchanged.
//
// It runs after the precision pass, so the layers it extends are float32
// ones that stayed Fused (int8 and float16 layers keep their one Add).
// Only a layer without activation (layout [n, 1, 0]) whose output is read
// by the Add alone takes the residual; the layer moves to the Add's place
// in the node order, where both of the Add's operands are computed.
func fuseResidual(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	c, u := consumers(g), uses(g)
	for i, n := range g.Nodes {
		l, ok := fused.LayerOf(n)
		if removed[n] || !ok || n.OpType != fused.OpFused || len(n.Outputs) != 1 {
			continue
		}
		if l.Base != "MatMul" && l.Base != "Gemm" {
			continue
		}
		if l.Adds != 1 || l.ActInputs != 0 || l.Activation != "" || l.Check(len(n.Inputs)) != nil {
			continue
		}
		out := n.Outputs[0]
		add := soleConsumer(g, c, u, out)
		if add == nil || add.Domain != "" || add.OpType != "Add" || add.Version < 7 || len(add.Inputs) != 2 || len(add.Outputs) != 1 {
			continue
		}
		res, ok := other(add, out)
		if !ok || res == "" || !isF32(g, out) || !isF32(g, res) || !isF32(g, add.Outputs[0]) {
			continue
		}
		n.Inputs = append(n.Inputs, res)
		l.Adds = 2
		l.SetAttrs(n.Attrs)
		n.Outputs = []string{add.Outputs[0]}
		s.origin[n.Name] = append(s.origin[n.Name], s.origin[add.Name]...)
		// The layer takes the Add's place: every input of the layer is
		// computed before the layer was, the residual before the Add.
		for j := i + 1; j < len(g.Nodes); j++ {
			if g.Nodes[j] == add {
				g.Nodes[j] = n
				break
			}
		}
		g.Nodes[i] = add
		removed[add] = true
		s.fused("fused", map[string]any{"layer": n.Name, "from": s.origin[n.Name], "residual": res})
		c, u = consumers(g), uses(g)
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}

// isF32 reports whether value v is known to be float32.
func isF32(g *ir.Graph, v string) bool {
	t, ok := g.Types[v]
	return ok && t.DType == tensor.Float32
}
