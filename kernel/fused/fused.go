// Package fused implements the compiler's fused layers (domain "vouch"):
// a base operator (Conv, Gemm, MatMul), optionally followed by an Add (a
// bias or a residual) and an activation, run as one layer; chains of
// elementwise ops and attention (chain.go); a 1x1 convolution with the
// depthwise convolution that reads it (ExpandDepthwise, expand_dw.go); and
// a Mul by a per-channel scale (ChannelMul, channel_mul.go).
//
// A fused layer performs exactly the floating-point operations of the
// unfused nodes, in the same order, through the same kernels: fusion changes
// how the plan is scheduled, never its bits. Tests check this.
//
// Layout of a "vouch" Fused node:
//
//	inputs:  base inputs..., [add operand, [second add operand]], activation inputs...
//	attrs:   base         string   the base op type
//	         base_version int      the base op's opset version
//	         layout       ints     [number of base inputs, number of Adds (0, 1 or 2), number of activation inputs]
//	         activation   string   the activation op type ("" for none)
//	         act_version  int      its opset version
//	         act_<name>   any      the activation's attributes
//	         every other attribute belongs to the base op
//
// The activation "SiLU" is x·Sigmoid(x), the two ONNX nodes Sigmoid and Mul
// (opset 14) run in that order with their own kernels; act_version is the
// Sigmoid's version and act_sigmoid_first (int, default 0) is 1 when the
// Sigmoid's output was the Mul's first operand. It takes no inputs.
// "HardSigmoidMul" is x·HardSigmoid(x) (MobileNetV3's HardSwish as
// PyTorch exports it), the same way: a HardSigmoid node (its alpha and
// beta as act_alpha, act_beta; act_version its version) and the Mul, in
// the operand order act_sigmoid_first gives.
//
// With two Adds (a bias, then a residual: y = (x·W + b) + x'), each takes
// the running value as its first operand and its own operand as its
// second, in that order, before the activation.
package fused

import (
	"fmt"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// Domain is the operator domain of vouch's own layers.
const Domain = "vouch"

// Ops returns the fused operators; their parts run through base.
func Ops(base *kernel.Registry) kernel.Table {
	ew := &ewOp{reg: base}
	f := &fusedOp{reg: base, ew: ew}
	edw := &edwOp{reg: base}
	t := kernel.Table{
		"Fused":         {Run: f.run, Infer: f.infer, Into: f.into, Prepare: f.prepare},
		ExpandDepthwise: {Run: edw.run, Infer: edw.infer, Into: edw.into, Prepare: edw.prepare},
		"Elementwise":   {Run: ew.run, Infer: ew.infer, Into: ew.into, InPlace: true, Prepare: ew.prepare},
		ChannelMul:      {Run: cmulOp{}.run, Infer: cmulOp{}.infer, Into: cmulOp{}.into, InPlace: true},
	}
	for k, v := range chainOps(base) {
		t[k] = v
	}
	return t
}

type fusedOp struct {
	reg *kernel.Registry
	ew  *ewOp
}

// parts splits a fused node into its base, add and activation nodes and
// the inputs of each.
type parts struct {
	base, add, act *ir.Node
	// add2 is the second Add (layout[1] == 2), after add.
	add2 *ir.Node
	// SiLU and HardSigmoidMul: act is the Sigmoid (HardSigmoid), mul the
	// Mul (sigFirst: the gate's output is its first operand) and silu both
	// as an Elementwise layer (for Into); hsAct HardSigmoidMul's epilogue
	// Acts (hardSwishActs).
	mul          *ir.Node
	sigFirst     bool
	silu         *ir.Node
	hsAct        *[2]func(vmath.Vec, []float32, []float32)
	baseIn       []int // indices into the fused node's inputs
	addIn, actIn []int
	add2In       []int
}

func split(n *ir.Node) (*parts, error) {
	l := parseLayer(n)
	if l.Base == "" {
		return nil, fmt.Errorf("fused layer: no base op")
	}
	if err := l.Check(len(n.Inputs)); err != nil {
		return nil, err
	}
	p := &parts{}
	p.base = &ir.Node{Name: n.Name + "/base", OpType: l.Base, Version: l.BaseVersion, Attrs: map[string]*ir.Attr{}}
	switch l.Activation {
	case "":
	case SiLU, HardSigmoidMul:
		p.act = &ir.Node{Name: n.Name + "/act", OpType: gateOp(l.Activation), Version: l.ActVersion, Attrs: map[string]*ir.Attr{}}
		p.mul = &ir.Node{Name: n.Name + "/mul", OpType: "Mul", Version: 14, Attrs: map[string]*ir.Attr{}}
		p.sigFirst = l.SigmoidFirst
	default:
		p.act = &ir.Node{Name: n.Name + "/act", OpType: l.Activation, Version: l.ActVersion, Attrs: map[string]*ir.Attr{}}
	}
	for k, a := range n.Attrs {
		switch {
		case IsHeaderAttr(k):
		case strings.HasPrefix(k, ActPrefix):
			if p.act != nil && k != AttrSigmoidFirst {
				c := *a
				c.Name = strings.TrimPrefix(k, ActPrefix)
				p.act.Attrs[c.Name] = &c
			}
		default:
			p.base.Attrs[k] = a
		}
	}
	if p.mul != nil {
		p.silu = gateLayer(n.Name, p.act, p.sigFirst)
		if l.Activation == HardSigmoidMul {
			a, b := p.act.Float("alpha", 0.2), p.act.Float("beta", 0.5)
			p.hsAct = hardSwishActs(a, b, p.sigFirst)
		}
	}
	layout := []int64{int64(l.BaseInputs), int64(l.Adds), int64(l.ActInputs)}
	i := 0
	for ; i < int(layout[0]); i++ {
		p.baseIn = append(p.baseIn, i)
	}
	if layout[1] >= 1 {
		p.add = &ir.Node{Name: n.Name + "/add", OpType: "Add", Version: 14, Attrs: map[string]*ir.Attr{}}
		p.addIn = []int{i}
		i++
	}
	if layout[1] == 2 {
		p.add2 = &ir.Node{Name: n.Name + "/add2", OpType: "Add", Version: 14, Attrs: map[string]*ir.Attr{}}
		p.add2In = []int{i}
		i++
	}
	for ; i < len(n.Inputs); i++ {
		p.actIn = append(p.actIn, i)
	}
	if p.mul != nil && len(p.actIn) > 0 {
		return nil, fmt.Errorf("fused layer: %s takes no inputs, layout gives %d", l.Activation, len(p.actIn))
	}
	for _, x := range []*ir.Node{p.base, p.add, p.act, p.mul} {
		if x != nil {
			x.Outputs = []string{n.Name + "/" + x.OpType}
		}
	}
	if p.add2 != nil {
		p.add2.Outputs = []string{n.Name + "/Add2"}
	}
	return p, nil
}

func pick[T any](all []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = all[j]
	}
	return out
}

func (f *fusedOp) run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	// The parts are cached with n, so the base node is the same on every
	// call (kernels keep per-node setups, such as packed weights).
	e := f.entry(c, n)
	p, err := e.p, e.err
	if err != nil {
		return nil, err
	}
	step := func(x *ir.Node, args []*tensor.Tensor) (*tensor.Tensor, error) {
		op, err := f.reg.Lookup(x)
		if err != nil {
			return nil, err
		}
		outs, err := op.Run(c, x, args)
		if err != nil {
			return nil, fmt.Errorf("%s part: %w", x.OpType, err)
		}
		if len(outs) == 0 || outs[0] == nil {
			return nil, fmt.Errorf("%s part produced nothing", x.OpType)
		}
		return outs[0], nil
	}
	y, err := step(p.base, pick(in, p.baseIn))
	if err != nil {
		return nil, err
	}
	if p.add != nil {
		if y, err = step(p.add, []*tensor.Tensor{y, in[p.addIn[0]]}); err != nil {
			return nil, err
		}
	}
	if p.add2 != nil {
		if y, err = step(p.add2, []*tensor.Tensor{y, in[p.add2In[0]]}); err != nil {
			return nil, err
		}
	}
	if p.act != nil {
		x := y
		if y, err = step(p.act, append([]*tensor.Tensor{y}, pick(in, p.actIn)...)); err != nil {
			return nil, err
		}
		if p.mul != nil {
			if y, err = step(p.mul, siluArgs(p.sigFirst, x, y)); err != nil {
				return nil, err
			}
		}
	}
	return []*tensor.Tensor{y}, nil
}

func (f *fusedOp) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	p, err := split(n)
	if err != nil {
		return nil, err
	}
	t, err := f.reg.InferNode(p.base, pick(in, p.baseIn))
	if err != nil {
		return nil, err
	}
	if p.add != nil {
		if t, err = f.reg.InferNode(p.add, []ir.InferInput{{Present: true, Type: t[0]}, in[p.addIn[0]]}); err != nil {
			return nil, err
		}
	}
	if p.add2 != nil {
		if t, err = f.reg.InferNode(p.add2, []ir.InferInput{{Present: true, Type: t[0]}, in[p.add2In[0]]}); err != nil {
			return nil, err
		}
	}
	if p.act != nil {
		x := ir.InferInput{Present: true, Type: t[0]}
		if t, err = f.reg.InferNode(p.act, append([]ir.InferInput{x}, pick(in, p.actIn)...)); err != nil {
			return nil, err
		}
		if p.mul != nil {
			s := ir.InferInput{Present: true, Type: t[0]}
			if t, err = f.reg.InferNode(p.mul, siluArgs(p.sigFirst, x, s)); err != nil {
				return nil, err
			}
		}
	}
	return t[:1], nil
}

// SiLU is the activation name of x·Sigmoid(x).
const SiLU = "SiLU"

// siluArgs orders the Mul's operands x and Sigmoid(x) as the model did.
func siluArgs[T any](sigFirst bool, x, s T) []T {
	if sigFirst {
		return []T{s, x}
	}
	return []T{x, s}
}

// HardSigmoidMul is the activation name of x·HardSigmoid(x).
const HardSigmoidMul = "HardSigmoidMul"

// gateOp is the gate node's op type of a gated activation (SiLU or
// HardSigmoidMul).
func gateOp(act string) string {
	if act == HardSigmoidMul {
		return "HardSigmoid"
	}
	return "Sigmoid"
}

// gateLayer is x·gate(x) as an Elementwise layer: its body is the gate
// node (a copy of gate: Sigmoid or HardSigmoid with its attributes) and
// the Mul, in the model's operand order.
func gateLayer(name string, gate *ir.Node, sigFirst bool) *ir.Node {
	x, s, y := name+"/x", name+"/sigmoid", name+"/silu"
	sig := &ir.Node{Name: s, OpType: gate.OpType, Version: gate.Version, Inputs: []string{x}, Outputs: []string{s}, Attrs: map[string]*ir.Attr{}}
	for k, a := range gate.Attrs {
		sig.Attrs[k] = a
	}
	mul := &ir.Node{Name: y, OpType: "Mul", Version: 14, Inputs: siluArgs(sigFirst, x, s), Outputs: []string{y}, Attrs: map[string]*ir.Attr{}}
	g := &ir.Graph{Name: name + "/silu", Inputs: []*ir.Value{{Name: x}}, Outputs: []*ir.Value{{Name: y}},
		Nodes: []*ir.Node{sig, mul}, Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}
	return &ir.Node{Name: name + "/silu", OpType: "Elementwise", Domain: Domain, Version: 1, Inputs: []string{x}, Outputs: []string{y},
		Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: g}}}
}
