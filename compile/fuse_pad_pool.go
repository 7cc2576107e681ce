package compile

import (
	"github.com/vouchml/vouch/ir"
)

// foldPadPool folds a constant-zero Pad of the spatial axes into the
// AveragePool that alone reads it, as the pool's own pads with
// count_include_pad = 1: PyTorch exports avg_pool2d(x, 3, 1, padding=1)
// that way (every Inception block of inception_v3, where each Pad ran as
// a copy of the whole tensor). Exact: the pool's sum starts from +0 and
// adds its window's values in order, so it is never -0, and adding a +0
// (or -0) padding value leaves it as it was; the padded pool's divisor is
// its window's positions inside the padded tensor, which the folded
// pool's count_include_pad counts (floor mode only: ceil_mode's output
// size depends on where the padding is).
func foldPadPool(s *state) error {
	readers := consumers(s.g)
	var keep []*ir.Node
	removed := map[*ir.Node]bool{}
	for _, n := range s.g.Nodes {
		if n.OpType != "AveragePool" || n.Domain != "" || len(n.Inputs) != 1 {
			continue
		}
		pad := producer(s.g, n.Inputs[0])
		if pad == nil || removed[pad] || len(readers[pad.Outputs[0]]) != 1 || isGraphOutput(s.g, pad.Outputs[0]) {
			continue
		}
		sp, ok := zeroSpatialPads(s.g, pad)
		if !ok || !plainPool(n, len(sp)/2) {
			continue
		}
		attrs := map[string]*ir.Attr{}
		for k, a := range n.Attrs {
			attrs[k] = a
		}
		attrs["pads"] = &ir.Attr{Name: "pads", Kind: ir.AttrInts, Ints: sp}
		attrs["count_include_pad"] = &ir.Attr{Name: "count_include_pad", Kind: ir.AttrInt, I: 1}
		n.Attrs = attrs
		n.Inputs = []string{pad.Inputs[0]}
		removed[pad] = true
		s.origin[n.Name] = append(append([]string{}, s.origin[pad.Name]...), s.origin[n.Name]...)
		s.fused("folded", map[string]any{"layer": n.Name, "pad": pad.Name, "pads": sp})
	}
	for _, n := range s.g.Nodes {
		if !removed[n] {
			keep = append(keep, n)
		}
	}
	s.g.Nodes = keep
	return nil
}

// producer returns the node whose output is v, or nil.
func producer(g *ir.Graph, v string) *ir.Node {
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o == v {
				return n
			}
		}
	}
	return nil
}

// zeroSpatialPads returns the spatial pads ([begin..., end...] over the
// axes after N and C) of a constant-mode Pad with value 0 and
// non-negative pads, none on N and C; ok is false for any other node.
func zeroSpatialPads(g *ir.Graph, n *ir.Node) (sp []int64, ok bool) {
	if n.OpType != "Pad" || n.Domain != "" || len(n.Inputs) < 1 || n.Inputs[0] == "" || len(n.Outputs) != 1 {
		return nil, false
	}
	if n.String("mode", "constant") != "constant" {
		return nil, false
	}
	var pads []int64
	if n.Version > 0 && n.Version < 11 {
		pads = n.Ints("pads", nil)
		if n.Float("value", 0) != 0 {
			return nil, false
		}
	} else {
		t, ok := g.Initializers[n.Input(1)]
		if !ok || n.Input(3) != "" {
			return nil, false
		}
		v, err := t.Int64s()
		if err != nil {
			return nil, false
		}
		pads = v
		if cv := n.Input(2); cv != "" {
			c, ok := g.Initializers[cv]
			if !ok || c.Len() != 1 {
				return nil, false
			}
			f, err := c.Float64s()
			if err != nil || f[0] != 0 {
				return nil, false
			}
		}
	}
	r := len(pads) / 2
	if len(pads)%2 != 0 || r < 3 {
		return nil, false
	}
	for i, p := range pads {
		if p < 0 || (i%r < 2 && p != 0) {
			return nil, false
		}
	}
	sp = append(append(sp, pads[2:r]...), pads[r+2:]...)
	return sp, true
}

// plainPool reports whether an AveragePool over nd spatial axes has no
// pads of its own, no auto_pad and floor mode, so that a Pad's pads can
// become its own.
func plainPool(n *ir.Node, nd int) bool {
	if n.String("auto_pad", "NOTSET") != "NOTSET" || n.Int("ceil_mode", 0) != 0 || len(n.Ints("kernel_shape", nil)) != nd {
		return false
	}
	for _, p := range n.Ints("pads", nil) {
		if p != 0 {
			return false
		}
	}
	return true
}
