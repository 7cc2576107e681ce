package compile

import (
	"slices"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// fuseConvChain gathers each connected run of float32 2-D convolutions
// that can work on 16-channel blocks (chainConv: a Conv, or a Fused Conv
// with a residual Add and a clamp; whole blocks of channels; pads of at
// most 1) into one "vouch" ConvChain layer, when the run reads a single
// value from outside and only its last value is read outside: resnet18's
// four stages. The layer's body is those nodes, their weights moved into
// it as its initializers, each set to conv.direct; on AVX-512 the kernel
// runs the body on blocked tensors (no padded copies, no transposes
// between the convolutions), elsewhere node by node. The bits are the
// nodes' either way.
func fuseConvChain(s *state) error {
	g := s.g
	u := uses(g)
	cand := map[*ir.Node]bool{}
	producer := map[string]*ir.Node{}
	for _, n := range g.Nodes {
		if chainConv(g, n) {
			cand[n] = true
			producer[n.Outputs[0]] = n
		}
	}
	// Components: candidates joined by the values they read (the input and
	// the residual) from one another.
	parent := map[*ir.Node]*ir.Node{}
	var find func(n *ir.Node) *ir.Node
	find = func(n *ir.Node) *ir.Node {
		if p, ok := parent[n]; ok && p != n {
			r := find(p)
			parent[n] = r
			return r
		}
		return n
	}
	for _, n := range g.Nodes {
		if !cand[n] {
			continue
		}
		for _, v := range chainReads(n) {
			if p := producer[v]; p != nil {
				parent[find(n)] = find(p)
			}
		}
	}
	groups := map[*ir.Node][]*ir.Node{}
	var roots []*ir.Node
	for _, n := range g.Nodes {
		if cand[n] {
			r := find(n)
			if groups[r] == nil {
				roots = append(roots, r)
			}
			groups[r] = append(groups[r], n)
		}
	}
	removed := map[*ir.Node]bool{}
	for _, r := range roots {
		members := groups[r]
		if len(members) < 3 {
			continue
		}
		in := map[*ir.Node]bool{}
		inner := map[string]bool{}
		for _, m := range members {
			in[m] = true
			inner[m.Outputs[0]] = true
		}
		// One value read from outside, one value read outside (and not
		// inside): the run's input and output.
		var ext []string
		for _, m := range members {
			for _, v := range chainReads(m) {
				if !inner[v] && !slices.Contains(ext, v) {
					ext = append(ext, v)
				}
			}
		}
		readsInside := map[string]int{}
		for _, m := range members {
			for _, v := range m.Inputs {
				readsInside[v]++
			}
		}
		var outs []string
		for _, m := range members {
			o := m.Outputs[0]
			if u[o] > readsInside[o] || isGraphOutput(g, o) {
				outs = append(outs, o)
			}
		}
		if len(ext) != 1 || len(outs) != 1 || readsInside[outs[0]] != 0 {
			continue
		}
		body := &ir.Graph{Name: members[0].Name + "/chain", Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}
		body.Inputs = []*ir.Value{{Name: ext[0], Type: g.Types[ext[0]]}}
		body.Outputs = []*ir.Value{{Name: outs[0], Type: g.Types[outs[0]]}}
		var origin []string
		for _, m := range members {
			c := *m
			c.Inputs = append([]string{}, m.Inputs...)
			c.Attrs = map[string]*ir.Attr{}
			for k, a := range m.Attrs {
				c.Attrs[k] = a
			}
			c.Attrs[kernel.TacticAttr] = &ir.Attr{Name: kernel.TacticAttr, Kind: ir.AttrString, S: chainTactic(s, m)}
			body.Nodes = append(body.Nodes, &c)
			for _, v := range m.Inputs {
				if t, ok := g.Initializers[v]; ok {
					body.Initializers[v] = t
				}
			}
			origin = append(origin, s.origin[m.Name]...)
		}
		last := members[len(members)-1]
		layer := &ir.Node{Name: members[0].Name, OpType: fused.ConvChain, Domain: fusedDomain, Version: 1,
			Inputs: []string{ext[0]}, Outputs: []string{outs[0]},
			Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
		for _, m := range members {
			removed[m] = m != last
		}
		*last = *layer
		s.origin[layer.Name] = origin
		s.fused("fused", map[string]any{"layer": layer.Name, "from": origin, "kind": "conv chain", "convolutions": len(members)})
	}
	g.Nodes = without(g.Nodes, removed)
	// The weights now live in the chains' bodies.
	left := uses(g)
	for name := range g.Initializers {
		if left[name] == 0 && !isGraphOutput(g, name) {
			moved := false
			for _, n := range g.Nodes {
				if a, ok := n.Attrs["body"]; ok && n.OpType == fused.ConvChain && a.G != nil {
					if _, ok := a.G.Initializers[name]; ok {
						moved = true
					}
				}
			}
			if moved {
				delete(g.Initializers, name)
			}
		}
	}
	return nil
}

// chainReads is the activation values n reads: its input, and its
// residual when it has one.
func chainReads(n *ir.Node) []string {
	r := []string{n.Inputs[0]}
	if l, ok := fused.LayerOf(n); ok && l.Adds == 1 && l.BaseInputs < len(n.Inputs) {
		r = append(r, n.Inputs[l.BaseInputs])
	}
	return r
}

// chainConv reports whether n is a float32 2-D convolution a ConvChain
// runs on 16-channel blocks: a Conv, or a Fused Conv whose only Add has
// a non-constant operand (a residual) and whose activation is a Relu or a
// Clip with constant bounds; constant weights and bias; one group, or
// groups of whole blocks of 16 input and output channels (RegNetX's);
// channels in whole blocks of 16; no dilation; the same stride, 1 or 2,
// both ways; explicit pads of at most 1.
func chainConv(g *ir.Graph, n *ir.Node) bool {
	if len(n.Outputs) != 1 || len(n.Inputs) < 2 {
		return false
	}
	nb := len(n.Inputs)
	switch {
	case n.Domain == "" && n.OpType == "Conv":
	case n.Domain == fusedDomain && n.OpType == fused.OpFused && fused.BaseOf(n) == "Conv":
		l, _ := fused.LayerOf(n)
		if l.BaseInputs < 2 || l.BaseInputs > 3 || l.Adds > 1 || l.Check(len(n.Inputs)) != nil {
			return false
		}
		nb = l.BaseInputs
		if act := l.Activation; act != "" && act != "Relu" && act != "Clip" {
			return false
		}
		for _, v := range n.Inputs[nb+l.Adds:] {
			if _, ok := g.Initializers[v]; v != "" && !ok {
				return false
			}
		}
		if l.Adds == 1 {
			if _, ok := g.Initializers[n.Inputs[nb]]; ok {
				return false // a constant Add: not a residual
			}
		}
	default:
		return false
	}
	w, ok := g.Initializers[n.Inputs[1]]
	if !ok || w.DType != tensor.Float32 || len(w.Shape) != 4 || w.Shape[0]%16 != 0 || w.Shape[1]%16 != 0 {
		return false
	}
	if nb == 3 && n.Inputs[2] != "" {
		if b, ok := g.Initializers[n.Inputs[2]]; !ok || b.DType != tensor.Float32 {
			return false
		}
	}
	if gr := n.Int("group", 1); gr < 1 || int64(w.Shape[0])%(16*gr) != 0 {
		return false // groups of whole blocks of output channels (W's are Cg, checked above)
	}
	if ap := n.String("auto_pad", "NOTSET"); ap != "NOTSET" && ap != "" {
		return false
	}
	for _, d := range n.Ints("dilations", []int64{1, 1}) {
		if d != 1 {
			return false
		}
	}
	st := n.Ints("strides", []int64{1, 1})
	if len(st) != 2 || st[0] != st[1] || st[0] < 1 || st[0] > 2 {
		return false
	}
	p := n.Ints("pads", []int64{0, 0, 0, 0})
	if len(p) != 4 {
		return false
	}
	for _, v := range p {
		if v < 0 || v > 1 {
			return false
		}
	}
	return true
}

// chainTactic is the tactic a chain's body node m runs with where the
// body runs node by node (no AVX-512): the first of m's heuristic
// candidates, as if it were not chained, or conv.direct where it has
// none. The blocked path ignores it. Forcing conv.direct on every body
// node made resnet50's 1x1 convolutions over 56x56 and 28x28 planes run
// at half the GEMM's rate on an AVX2 host (2.6-3.6 ms vs ORT's 1.3 ms).
func chainTactic(s *state, m *ir.Node) string {
	op, err := s.reg.Lookup(m)
	if err != nil {
		return nn.TacticDirect
	}
	in := make([]ir.Type, len(m.Inputs))
	for i, name := range m.Inputs {
		if name != "" {
			in[i] = s.g.Types[name]
		}
	}
	if cands := tacticCands(s.g, s.reg, op, m, in); len(cands) > 0 {
		return cands[0]
	}
	return nn.TacticDirect
}
