package compile

import (
	"slices"

	"github.com/vouchml/vouch/ir"
)

// maxShapeRounds bounds fold-shapes-fixpoint's rounds: each round folds at
// least one node or the pass stops, and a graph's shape computations are
// rarely more than a few Shape→…→Pad→Shape links deep.
const maxShapeRounds = 16

// foldShapesFixpoint repeats fold-shapes and fold-constants until neither
// folds anything. One round of each leaves the shapes that only become
// static once an earlier computation is folded: Swin's window attention
// pads its input to a multiple of the window with pads computed from
// Shape, Mod and Sub; until those pads are constants the Pad's output has
// unknown dimensions, so every Shape read after it, the window Reshapes'
// targets, the shifted-window mask (ConstantOfShape, Slice, ScatterND,
// Equal, Where) and the crop Slices stayed layers that ran on every
// request (swin_t: 351 Shape, 207 Gather, 100 Equal, 100 Where, 12 Pads of
// 2 ms each). Folding is exact: a folded node's output is the value it
// would have computed, by the same kernel.
func foldShapesFixpoint(s *state) error {
	for range maxShapeRounds {
		before := len(s.g.Nodes)
		if err := foldShapes(s); err != nil {
			return err
		}
		if err := foldConstants(s); err != nil {
			return err
		}
		if len(s.g.Nodes) == before {
			break
		}
	}
	return nil
}

// dropInferenceDropout removes a Dropout that is the identity and whose
// mask output is unread: one whose training_mode input is a constant false
// (eliminate-identity leaves a Dropout with that input alone), or one whose
// ratio is a constant 0 whatever its training_mode (x·mask/(1-0) = x, every
// mask element 1). torchvision 0.14's Swin calls F.dropout(attn, p=0.0)
// with PyTorch's default training=True, so its export has 24 Dropouts in
// training mode of ratio 0, each of which ran as a copy and a mask of ones
// (up to 0.8 ms each on swin_t).
func dropInferenceDropout(s *state) error {
	u := uses(s.g)
	var drop []*ir.Node // decided before any rewiring: the test reads names
	for _, n := range s.g.Nodes {
		if inferenceDropout(s.g, n, u) {
			drop = append(drop, n)
		}
	}
	for _, n := range drop {
		renameUses(s.g, n.Outputs[0], n.Inputs[0])
		s.removedNode(map[string]any{"node": n.Name, "op": n.OpType, "input": n.Inputs[0], "output": n.Outputs[0]})
	}
	s.g.Nodes = slices.DeleteFunc(s.g.Nodes, func(n *ir.Node) bool { return slices.Contains(drop, n) })
	return nil
}

func inferenceDropout(g *ir.Graph, n *ir.Node, u map[string]int) bool {
	if n.Domain != "" || n.OpType != "Dropout" || n.Version < 12 || len(n.Inputs) < 3 || n.Inputs[0] == "" || len(n.Outputs) < 1 || n.Outputs[0] == "" {
		return false
	}
	if len(n.Outputs) > 1 && n.Outputs[1] != "" && u[n.Outputs[1]] > 0 {
		return false // the mask is read
	}
	if isGraphOutput(g, n.Outputs[0]) {
		return false
	}
	if r, ok := g.Initializers[n.Input(1)]; ok && r.Len() == 1 {
		if f, err := r.Float64s(); err == nil && f[0] == 0 {
			_, known := g.Initializers[n.Inputs[2]]
			return known // a training_mode computed at run time is still checked there
		}
	}
	t, ok := g.Initializers[n.Inputs[2]]
	if !ok || t.Len() != 1 {
		return false
	}
	b, ok := t.Data.([]bool)
	return ok && !b[0]
}
