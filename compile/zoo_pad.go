package compile

import (
	"github.com/vouchml/vouch/ir"
)

// eliminateNoopPad removes Pad nodes that pad nothing (every pad 0, from
// the pads attribute of Pad-1/2 or a constant pads input), by rewiring
// their readers: their output is their input, element for element (any
// mode, any constant value). PyTorch exports such Pads before
// AveragePool (DenseNet's transitions), and each ran as a copy.
func eliminateNoopPad(s *state) error {
	var keep []*ir.Node
	for _, n := range s.g.Nodes {
		if !noopPad(s.g, n) || isGraphOutput(s.g, n.Outputs[0]) {
			keep = append(keep, n)
			continue
		}
		renameUses(s.g, n.Outputs[0], n.Inputs[0])
		s.removedNode(map[string]any{"node": n.Name, "op": n.OpType, "input": n.Inputs[0], "output": n.Outputs[0]})
	}
	s.g.Nodes = keep
	return nil
}

func noopPad(g *ir.Graph, n *ir.Node) bool {
	if n.OpType != "Pad" || n.Domain != "" || len(n.Inputs) < 1 || n.Inputs[0] == "" || len(n.Outputs) != 1 {
		return false
	}
	var pads []int64
	if n.Version > 0 && n.Version < 11 {
		pads = n.Ints("pads", nil)
	} else {
		t, ok := g.Initializers[n.Input(1)]
		if !ok {
			return false
		}
		v, err := t.Int64s()
		if err != nil {
			return false
		}
		pads = v
	}
	if len(pads) == 0 {
		return false
	}
	for _, p := range pads {
		if p != 0 {
			return false
		}
	}
	return true
}
