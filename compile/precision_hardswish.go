package compile

import (
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/tensor"
)

// fuseQ8HardSwish folds a HardSwish that PyTorch exported as HardSigmoid
// then Mul (MobileNetV3) into the int8 layer before it: where a Q8 layer
// without activation writes y, read only by a float32 HardSigmoid h and a
// Mul of y and h (in either order), h read only by that Mul, neither a
// graph output, the Q8 layer takes the Mul's output and the activation
// q8.ActHardSwish with h's alpha, beta and opset version and the Mul's
// operand order; its epilogue computes the two nodes' float32 operations
// element by element (kernel/q8 act.go), so the bits do not change, only
// the separate pass over the output goes. It returns the number folded.
func fuseQ8HardSwish(g *ir.Graph, log *buildlog.Log) int {
	readers := map[string][]*ir.Node{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" {
				readers[in] = append(readers[in], n)
			}
		}
	}
	out := map[string]bool{}
	for _, v := range g.Outputs {
		out[v.Name] = true
	}
	drop := map[*ir.Node]bool{}
	folded := 0
	for _, q := range g.Nodes {
		if q.Domain != fused.Domain || q.OpType != fused.OpQ8 || len(q.Outputs) != 1 || out[q.Outputs[0]] {
			continue
		}
		if l, _ := fused.LayerOf(q); l.Activation != "" || l.ActInputs != 0 {
			continue
		}
		y := q.Outputs[0]
		r := readers[y]
		if len(r) != 2 {
			continue
		}
		h, m := r[0], r[1]
		if h.OpType != "HardSigmoid" {
			h, m = m, h
		}
		if h.OpType != "HardSigmoid" || h.Domain != "" || m.OpType != "Mul" || m.Domain != "" || len(h.Inputs) != 1 ||
			len(h.Outputs) != 1 || len(m.Inputs) != 2 || len(m.Outputs) != 1 || out[h.Outputs[0]] || len(readers[h.Outputs[0]]) != 1 {
			continue
		}
		hs := h.Outputs[0]
		var first bool
		switch {
		case m.Inputs[0] == y && m.Inputs[1] == hs:
		case m.Inputs[0] == hs && m.Inputs[1] == y:
			first = true
		default:
			continue
		}
		if t, ok := g.Types[y]; ok && t.DType != tensor.Float32 {
			continue
		}
		layout := q.Ints(fused.AttrLayout, nil)
		if len(layout) != 3 {
			continue
		}
		q.Attrs[fused.AttrActivation] = &ir.Attr{Name: fused.AttrActivation, Kind: ir.AttrString, S: q8.ActHardSwish}
		q.Attrs[fused.AttrActVersion] = &ir.Attr{Name: fused.AttrActVersion, Kind: ir.AttrInt, I: h.Version}
		q.Attrs[fused.ActPrefix+"alpha"] = &ir.Attr{Name: fused.ActPrefix + "alpha", Kind: ir.AttrFloat, F: h.Float("alpha", 0.2)}
		q.Attrs[fused.ActPrefix+"beta"] = &ir.Attr{Name: fused.ActPrefix + "beta", Kind: ir.AttrFloat, F: h.Float("beta", 0.5)}
		if first {
			q.Attrs[fused.AttrSigmoidFirst] = &ir.Attr{Name: fused.AttrSigmoidFirst, Kind: ir.AttrInt, I: 1}
		}
		q.Outputs = []string{m.Outputs[0]}
		drop[h], drop[m] = true, true
		folded++
		log.Info("precision", "fused-hardswish", map[string]any{"layer": q.Name, "hardsigmoid": h.Name, "mul": m.Name})
	}
	if folded > 0 {
		kept := g.Nodes[:0]
		for _, n := range g.Nodes {
			if !drop[n] {
				kept = append(kept, n)
			}
		}
		g.Nodes = kept
	}
	return folded
}
