package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// fuseChannelMul makes a float32 Mul of x, of shape [N, C, d...] with
// more than one element a plane, by an operand of shape [N, C, 1...] (the
// scale of a squeeze-excitation block, as EfficientNet, MobileNetV3,
// MnasNet and RegNetY compute it) a fused.ChannelMul layer: each channel
// plane scaled in one pass by its own float32, instead of elementwise's
// broadcasting rows. The products are the Mul's, in its operand order:
// the bits are the same.
func fuseChannelMul(s *state) error {
	g := s.g
	for _, n := range g.Nodes {
		if n.Domain != "" || n.OpType != "Mul" || len(n.Inputs) != 2 || len(n.Outputs) != 1 || n.Version > 0 && n.Version < 7 {
			continue
		}
		a, b := g.Types[n.Inputs[0]], g.Types[n.Inputs[1]]
		first := false
		switch {
		case channelScale(a, b):
		case channelScale(b, a):
			first = true
		default:
			continue
		}
		x, sc := n.Inputs[0], n.Inputs[1]
		if first {
			x, sc = sc, x
		}
		i := int64(0)
		if first {
			i = 1
		}
		*n = ir.Node{Name: n.Name, OpType: fused.ChannelMul, Domain: fusedDomain, Version: 1, Inputs: []string{x, sc}, Outputs: n.Outputs,
			Attrs: map[string]*ir.Attr{fused.AttrScaleFirst: {Name: fused.AttrScaleFirst, Kind: ir.AttrInt, I: i}}}
		s.fused("fused", map[string]any{"layer": n.Name, "from": s.origin[n.Name], "kind": "channel-mul"})
	}
	return nil
}

// channelScale reports whether x (float32, [N, C, d...], rank 3 or more,
// its planes' sizes known and more than one element) is multiplied by s of
// shape [N, C, 1...] (N and C the same dimensions as x's, known or the same
// symbol).
func channelScale(x, s ir.Type) bool {
	if x.DType != tensor.Float32 || s.DType != tensor.Float32 || !x.RankKnown || !s.RankKnown || len(x.Shape) < 3 || len(s.Shape) != len(x.Shape) {
		return false
	}
	for i := 0; i < 2; i++ {
		if x.Shape[i] != s.Shape[i] || x.Shape[i].Value < 0 && x.Shape[i].Param == "" {
			return false
		}
	}
	plane := int64(1)
	for i, d := range x.Shape[2:] {
		if !d.Known() || s.Shape[2+i] != (ir.Dim{Value: 1}) {
			return false
		}
		plane *= d.Value
	}
	return plane > 1
}
