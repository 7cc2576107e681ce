package compile

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
)

// fuseHardSwish gives a float32 Conv/Gemm/MatMul layer without an
// activation (a plain node, or a Fused one with its Add) the activation
// x·HardSigmoid(x) that follows it, MobileNetV3's HardSwish as PyTorch
// exports it: a HardSigmoid and a Mul that both read the layer's output,
// the Mul multiplying it by the HardSigmoid's. The layer's activation
// becomes fused.HardSigmoidMul (the HardSigmoid's attributes with it,
// the Mul's operand order in act_sigmoid_first), which the base kernel
// applies as its epilogue while each block of outputs is in cache,
// instead of an Elementwise layer's pass over the output after it. The
// operations are the two nodes', in their order: the bits are the same.
//
// It runs after precision, so that a layer the precision pass made int8
// (or float16) keeps its own epilogue and the pair stays an Elementwise
// layer.
func fuseHardSwish(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, n := range g.Nodes {
		if removed[n] || len(n.Outputs) != 1 {
			continue
		}
		var lay fused.Layer
		plain := n.Domain == "" && fusableBase[n.OpType]
		switch l, ok := fused.LayerOf(n); {
		case plain:
			lay = fused.Layer{Base: n.OpType, BaseVersion: n.Version, BaseInputs: len(n.Inputs)}
		case ok && n.OpType == fused.OpFused && l.Activation == "" && l.Check(len(n.Inputs)) == nil:
			lay = l
		default:
			continue
		}
		c, u := consumers(g), uses(g)
		hs, mul := gateAt(g, c, u, n.Outputs[0], "HardSigmoid")
		if hs == nil {
			continue
		}
		f := &ir.Node{Name: n.Name, OpType: fused.OpFused, Domain: fusedDomain, Version: 1, Inputs: n.Inputs, Attrs: map[string]*ir.Attr{}}
		for k, a := range n.Attrs {
			f.Attrs[k] = a
		}
		for k, a := range hs.Attrs {
			c := fused.ActAttr(k, a)
			f.Attrs[c.Name] = c
		}
		lay.Activation, lay.ActVersion = fused.HardSigmoidMul, hs.Version
		lay.SigmoidFirst = mul.Inputs[0] == hs.Outputs[0]
		lay.SetAttrs(f.Attrs)
		f.Outputs = []string{mul.Outputs[0]}
		origin := append(append(append([]string{}, s.origin[n.Name]...), s.origin[hs.Name]...), s.origin[mul.Name]...)
		*n = *f
		s.origin[n.Name] = origin
		removed[hs], removed[mul] = true, true
		s.fused("fused", map[string]any{"layer": n.Name, "from": origin, "kind": "activation", "activation": fused.HardSigmoidMul})
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

// gateAt finds x·gate(x) on v, gate an op of one input and no
// attributes' inputs (Sigmoid, HardSigmoid): v is read by exactly the
// gate and a Mul (and is no graph output), and the Mul multiplies v by
// the gate's output, which nothing else reads.
func gateAt(g *ir.Graph, c map[string][]*ir.Node, u map[string]int, v, gate string) (gn, mul *ir.Node) {
	if len(c[v]) != 2 || u[v] != 2 || isGraphOutput(g, v) {
		return nil, nil
	}
	for _, r := range c[v] {
		if r.Domain != "" {
			return nil, nil
		}
		switch r.OpType {
		case gate:
			gn = r
		case "Mul":
			mul = r
		}
	}
	if gn == nil || mul == nil || len(gn.Inputs) != 1 || len(gn.Outputs) != 1 || len(mul.Inputs) != 2 || len(mul.Outputs) != 1 {
		return nil, nil
	}
	if o, ok := other(mul, v); !ok || o != gn.Outputs[0] || soleConsumer(g, c, u, o) != mul {
		return nil, nil
	}
	return gn, mul
}
