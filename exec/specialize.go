package exec

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// maxSpecialConst bounds the size of a value computed at bind time.
const maxSpecialConst = 1 << 16

// specialize infers g's types for its (static) input shapes and folds what
// those shapes decide: Shape and Size of statically shaped values become
// constants, and so does every node whose inputs are then all constant (the
// shape arithmetic of dynamic models: Gather, Cast, Range, Unsqueeze,
// Concat...). It repeats until nothing more folds, so a Reshape fed by such
// a chain gets a static output type and a place in the arena. g's node list
// and initializer map are replaced, never modified in place: they are
// shared with the executor.
func specialize(g *ir.Graph, reg *kernel.Registry, ops map[*ir.Node]*kernel.Op) error {
	inits := make(map[string]*tensor.Tensor, len(g.Initializers))
	for k, v := range g.Initializers {
		inits[k] = v
	}
	g.Initializers = inits
	outputs := map[string]bool{}
	for _, o := range g.Outputs {
		outputs[o.Name] = true
	}
	for round := 0; ; round++ {
		if err := ir.Infer(g, reg, nil); err != nil {
			return err
		}
		if round == 8 {
			return nil
		}
		var keep []*ir.Node
		folded := false
		for _, n := range g.Nodes {
			if v := foldAtBind(g, n, ops[n], outputs); v != nil {
				for i, o := range n.Outputs {
					if o != "" {
						g.Initializers[o] = v[i]
					}
				}
				folded = true
				continue
			}
			keep = append(keep, n)
		}
		g.Nodes = keep
		if !folded {
			return nil
		}
	}
}

// foldAtBind returns n's outputs when the bound shapes decide them, or nil.
func foldAtBind(g *ir.Graph, n *ir.Node, op *kernel.Op, outputs map[string]bool) []*tensor.Tensor {
	if op == nil || n.Domain != "" || len(n.Outputs) == 0 {
		return nil
	}
	for _, o := range n.Outputs {
		if outputs[o] {
			return nil
		}
	}
	for _, a := range n.Attrs {
		if a.G != nil || len(a.Graphs) > 0 {
			return nil
		}
	}
	switch n.OpType {
	case "Shape", "Size":
		shape, ok := g.Types[n.Input(0)].Static()
		if !ok {
			return nil
		}
		if n.OpType == "Size" {
			return []*tensor.Tensor{tensor.Scalar(int64(tensor.NumElems(shape)))}
		}
		start, end := 0, len(shape)
		if n.Version >= 15 {
			start, end = clampAxis(n.Int("start", 0), len(shape)), clampAxis(n.Int("end", int64(len(shape))), len(shape))
		}
		dims := []int64{}
		for i := start; i < end; i++ {
			dims = append(dims, int64(shape[i]))
		}
		return []*tensor.Tensor{tensor.From(dims, len(dims))}
	case "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial":
		return nil
	}
	in := make([]*tensor.Tensor, len(n.Inputs))
	any := false
	for i, name := range n.Inputs {
		if name == "" {
			continue
		}
		c, ok := g.Initializers[name]
		if !ok || c.Len() > maxSpecialConst {
			return nil
		}
		in[i] = c
		any = true
	}
	if !any {
		return nil
	}
	// Size the outputs before running: a constant that claims more than
	// the fold bound is left to the run, where the budget applies.
	if CheckOutputs(n, op, in, maxSpecialConst*16) != nil {
		return nil
	}
	outs, err := op.Run(&kernel.Ctx{}, n, in)
	if err != nil || len(outs) != len(n.Outputs) {
		return nil
	}
	for _, o := range outs {
		if o == nil || o.DType == tensor.Sequence || o.Len() > maxSpecialConst {
			return nil
		}
	}
	return outs
}

// clampAxis maps a Shape start/end attribute into [0, rank].
func clampAxis(v int64, rank int) int {
	if v < 0 {
		v += int64(rank)
	}
	return int(min(max(v, 0), int64(rank)))
}
