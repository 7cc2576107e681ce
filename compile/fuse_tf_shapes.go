package compile

import (
	"slices"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// maxShapeRounds bounds fold-shapes-fixpoint's rounds: each round folds at
// least one node or the pass stops. A round can take one link of a chain
// of dynamic shapes (a dynamic-batch ShuffleNet's 16 blocks each measure
// the previous block's output: about 2 rounds a block).
const maxShapeRounds = 64

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
// would have computed, by the same kernel. Each round also makes constant
// the Reshape targets that dynamic-batch exports assemble from kept
// dimensions (foldDimReshapes).
func foldShapesFixpoint(s *state) error {
	for round := range maxShapeRounds {
		s.log.Info(s.pass, "round", map[string]any{"round": round, "nodes": len(s.g.Nodes)})
		before := len(s.g.Nodes)
		if err := foldShapes(s); err != nil {
			return err
		}
		if err := foldConstants(s); err != nil {
			return err
		}
		if foldDimReshapes(s) > 0 {
			// The Shape→Gather→Concat chains that built the targets are
			// dead now; removed, their Shapes no longer count as readers
			// of the values they measured (patterns want sole readers).
			if err := eliminateDead(s); err != nil {
				return err
			}
			continue
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

// foldDimReshapes makes constant the target of a Reshape assembled at run
// time from dimensions it keeps: a Concat (axis 0) of constant pieces and
// of pieces Gather(Shape(v), j) (or its Unsqueeze) that stand at position
// i of the target where v's dimension j is the same symbolic dimension as
// the data's dimension i. With allowzero 0, a 0 in the target copies the
// data's dimension at its position, so such a piece is 0 in the constant
// target: the same shape for every input. A model exported with a dynamic
// batch builds every Reshape target from Shape(x)[0] (ShuffleNet's
// channel shuffle, BERT's heads); with the target constant, the Reshape's
// output has known dimensions but the batch, and the shape folding and
// the passes after it see them. It returns how many targets it folded.
func foldDimReshapes(s *state) int {
	g := s.g
	prod := map[string]*ir.Node{}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			prod[o] = n
		}
	}
	folded := 0
	for _, n := range g.Nodes {
		if n.Domain != "" || n.OpType != "Reshape" || n.Version < 5 || len(n.Inputs) != 2 || n.Int("allowzero", 0) != 0 {
			continue
		}
		if _, ok := g.Initializers[n.Inputs[1]]; ok {
			continue
		}
		xt := g.Types[n.Inputs[0]]
		cat := prod[n.Inputs[1]]
		if !xt.RankKnown || cat == nil || cat.Domain != "" || cat.OpType != "Concat" || cat.Int("axis", 0) != 0 {
			continue
		}
		var target []int64
		ok := true
		for _, p := range cat.Inputs {
			if t, isConst := g.Initializers[p]; isConst {
				v, err := t.Int64s()
				if err != nil || len(t.Shape) != 1 {
					ok = false
					break
				}
				target = append(target, v...)
				continue
			}
			d, dimOK := shapeDim(g, prod, p)
			i := len(target)
			if !dimOK || i >= len(xt.Shape) || d.Param == "" || d != xt.Shape[i] {
				ok = false
				break
			}
			target = append(target, 0)
		}
		if !ok || len(target) == 0 {
			continue
		}
		name := fresh(g, n.Name+"/target")
		g.Initializers[name] = tensor.From(target, len(target))
		s.foldedConst(map[string]any{"node": n.Name, "op": "Reshape target", "value": target})
		n.Inputs[1] = name
		folded++
	}
	return folded
}

// shapeDim returns the dimension that the one-element value p holds when
// p is Gather(Shape(v), j) with a constant j (a scalar Gather under an
// Unsqueeze of axis 0, or a one-element index), as v's type has it.
func shapeDim(g *ir.Graph, prod map[string]*ir.Node, p string) (ir.Dim, bool) {
	n := prod[p]
	if n != nil && n.Domain == "" && n.OpType == "Unsqueeze" {
		var axes []int64
		if len(n.Inputs) > 1 {
			if t, ok := g.Initializers[n.Inputs[1]]; ok {
				axes, _ = t.Int64s()
			}
		} else {
			axes = n.Ints("axes", nil)
		}
		if len(axes) != 1 || axes[0] != 0 {
			return ir.Dim{}, false
		}
		n = prod[n.Inputs[0]]
	}
	if n == nil || n.Domain != "" || n.OpType != "Gather" || n.Int("axis", 0) != 0 || len(n.Inputs) != 2 {
		return ir.Dim{}, false
	}
	idx, ok := g.Initializers[n.Inputs[1]]
	sh := prod[n.Inputs[0]]
	if !ok || idx.Len() != 1 || sh == nil || sh.Domain != "" || sh.OpType != "Shape" || sh.Int("start", 0) != 0 || sh.Has("end") {
		return ir.Dim{}, false
	}
	j, err := idx.Int64s()
	vt := g.Types[sh.Inputs[0]]
	if err != nil || !vt.RankKnown || j[0] < 0 || j[0] >= int64(len(vt.Shape)) {
		return ir.Dim{}, false
	}
	return vt.Shape[j[0]], true
}
