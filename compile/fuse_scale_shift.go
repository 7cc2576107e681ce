package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// fuseScaleShift turns each float32 inference BatchNormalization that
// fold-batchnorm left (one that does not read a convolution: DenseNet's
// pre-activation BatchNormalization + Relu pairs, 62 of them) into one
// ScaleShift layer, taking in the Relu that alone reads it. The layer's
// per-channel A and B are computed here as the BatchNormalization kernel
// computes them, and it applies them and the Relu's comparison in the
// kernels' order, so the bits are the graph's.
func fuseScaleShift(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, bn := range g.Nodes {
		if removed[bn] || bn.OpType != "BatchNormalization" || bn.Domain != "" || len(bn.Inputs) != 5 || len(bn.Outputs) < 1 {
			continue
		}
		c, u := consumers(g), uses(g)
		if bn.Int("training_mode", 0) != 0 || (len(bn.Outputs) > 1 && anyUsed(u, bn.Outputs[1:])) {
			continue
		}
		xt, ok := g.Types[bn.Inputs[0]]
		if !ok || xt.DType != tensor.Float32 || !xt.RankKnown || len(xt.Shape) < 2 || !xt.Shape[1].Known() {
			continue
		}
		C := int(xt.Shape[1].Value)
		var p [4][]float32
		okAll := true
		for i := range p {
			t, ok := g.Initializers[bn.Inputs[i+1]]
			if !ok || t.DType != tensor.Float32 || t.Len() != C {
				okAll = false
				break
			}
			p[i] = t.Data.([]float32)
		}
		if !okAll {
			continue
		}
		a, b := nn.ScaleShiftParams(p[0], p[1], p[2], p[3], bn.Float("epsilon", 1e-5))
		aName, bName := bn.Name+"/scale_shift_a", bn.Name+"/scale_shift_b"
		g.Initializers[aName] = tensor.From(a, C)
		g.Initializers[bName] = tensor.From(b, C)
		f := &ir.Node{Name: bn.Name, OpType: nn.OpScaleShift, Domain: fusedDomain, Version: 1,
			Inputs: []string{bn.Inputs[0], aName, bName}, Outputs: []string{bn.Outputs[0]}, Attrs: map[string]*ir.Attr{}}
		origin := append([]string{}, s.origin[bn.Name]...)
		relu := ""
		if next := soleConsumer(g, c, u, bn.Outputs[0]); next != nil && next.OpType == "Relu" && next.Domain == "" && len(next.Inputs) == 1 {
			f.Attrs["relu"] = &ir.Attr{Name: "relu", Kind: ir.AttrInt, I: 1}
			f.Outputs = []string{next.Outputs[0]}
			origin = append(origin, s.origin[next.Name]...)
			removed[next] = true
			relu = next.Name
		}
		*bn = *f
		s.origin[bn.Name] = origin
		s.log.Info(s.pass, "fused", map[string]any{"layer": bn.Name, "from": origin, "channels": C, "relu": relu})
	}
	var keep []*ir.Node
	for _, n := range g.Nodes {
		if !removed[n] {
			keep = append(keep, n)
		}
	}
	g.Nodes = keep
	return nil
}
