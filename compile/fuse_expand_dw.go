package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// fuseExpandDepthwise merges a float32 1x1 convolution (the expansion of
// a MobileNet-style block) with the depthwise 3x3 convolution that is its
// only reader into one "vouch" ExpandDepthwise layer (see package fused):
// its kernel computes the expanded rows a few at a time, just before the
// depthwise rows that need them, so the expanded tensor (the block's
// widest) never leaves the cache. Each part may be a plain Conv or a
// Fused Conv whose only epilogue is a clamp (Relu, Clip); the layer does
// the two parts' operations in their order, so the bits are unchanged.
func fuseExpandDepthwise(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	c, u := consumers(g), uses(g)
	for _, a := range g.Nodes {
		if removed[a] || !clampConv(a) || len(a.Outputs) != 1 {
			continue
		}
		w1, ok := g.Initializers[a.Input(1)]
		if !ok || w1.DType != tensor.Float32 || len(w1.Shape) != 4 || w1.Shape[2] != 1 || w1.Shape[3] != 1 ||
			!convAttrsAre(a, 1, 1, 0) || a.Int("group", 1) != 1 {
			continue
		}
		b := soleConsumer(g, c, u, a.Outputs[0])
		if b == nil || removed[b] || !clampConv(b) || b.Inputs[0] != a.Outputs[0] {
			continue
		}
		w2, ok := g.Initializers[b.Input(1)]
		e := w1.Shape[0]
		if !ok || w2.DType != tensor.Float32 || len(w2.Shape) != 4 || w2.Shape[0] != e || w2.Shape[1] != 1 ||
			w2.Shape[2] != 3 || w2.Shape[3] != 3 || b.Int("group", 1) != int64(e) {
			continue
		}
		st := b.Ints("strides", []int64{1, 1})
		if len(st) != 2 || st[0] != st[1] || (st[0] != 1 && st[0] != 2) || !convAttrsAre(b, 3, st[0], 1) {
			continue
		}
		if !constInputs(g, a) || !constInputs(g, b) || !worthExpandDW(g, a, b, e, st[0]) {
			continue
		}
		f := fused.ExpandDepthwiseNode(a, b)
		origin := append(append([]string{}, s.origin[a.Name]...), s.origin[b.Name]...)
		removed[b] = true
		*a = *f
		s.origin[a.Name] = origin
		s.fused("fused", map[string]any{"layer": a.Name, "from": origin, "kind": "expand+depthwise"})
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

// worthExpandDW reports whether the fused layer pays: the expanded tensor
// (e channels at the input's static size) is larger than a core's L2
// cache (below, the two layers run apart as fast), and the depthwise
// output rows are at least a vector (8) wide, which its kernel needs.
func worthExpandDW(g *ir.Graph, a, b *ir.Node, e int, stride int64) bool {
	t, ok := g.Types[a.Inputs[0]]
	if !ok || len(t.Shape) != 4 || t.Shape[2].Value <= 0 || t.Shape[3].Value <= 0 {
		return false
	}
	h, w := t.Shape[2].Value, t.Shape[3].Value
	p := b.Ints("pads", []int64{0, 0, 0, 0})
	ow := (w+p[1]+p[3]-3)/stride + 1
	return int64(e)*h*w*4 >= 1<<20 && ow >= 8 && p[1] == 1
}

// clampConv reports whether n is a Conv, or a Fused Conv with no Add and
// at most a Relu, Clip, SiLU or HardSigmoidMul (the last two run as the
// parts' epilogue Acts).
func clampConv(n *ir.Node) bool {
	switch {
	case n.Domain == "" && n.OpType == "Conv":
		return true
	case n.Domain == fusedDomain && n.OpType == fused.OpFused:
		l, _ := fused.LayerOf(n)
		switch l.Activation {
		case "Relu", "Clip", fused.SiLU, fused.HardSigmoidMul:
		default:
			return false
		}
		return l.Base == "Conv" && l.BaseInputs > 0 && l.Adds == 0
	}
	return false
}

// convAttrsAre reports whether a 2-D Conv's attributes are a k x k
// kernel, stride s, dilation 1 and every pad at most maxPad (explicit
// pads only: no auto_pad).
func convAttrsAre(n *ir.Node, k, s, maxPad int64) bool {
	if ap := n.String("auto_pad", "NOTSET"); ap != "NOTSET" && ap != "" {
		return false
	}
	if ks := n.Ints("kernel_shape", nil); ks != nil && (len(ks) != 2 || ks[0] != k || ks[1] != k) {
		return false
	}
	for _, d := range n.Ints("dilations", []int64{1, 1}) {
		if d != 1 {
			return false
		}
	}
	st := n.Ints("strides", []int64{1, 1})
	if len(st) != 2 || st[0] != s || st[1] != s {
		return false
	}
	p := n.Ints("pads", []int64{0, 0, 0, 0})
	if len(p) != 4 {
		return false
	}
	for _, v := range p {
		if v < 0 || v > maxPad {
			return false
		}
	}
	return true
}

// constInputs reports whether every input of n but the first is an
// initializer (or absent).
func constInputs(g *ir.Graph, n *ir.Node) bool {
	for _, in := range n.Inputs[1:] {
		if _, ok := g.Initializers[in]; in != "" && !ok {
			return false
		}
	}
	return true
}
