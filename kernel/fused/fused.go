// Package fused implements the compiler's fused layers (domain "vouch"):
// a base operator (Conv, Gemm, MatMul), optionally followed by an Add (a
// bias or a residual) and an activation, run as one layer.
//
// A fused layer performs exactly the floating-point operations of the
// unfused nodes, in the same order, through the same kernels: fusion changes
// how the plan is scheduled, never its bits. Tests check this.
//
// Layout of a "vouch" Fused node:
//
//	inputs:  base inputs..., [add operand], activation inputs...
//	attrs:   base         string   the base op type
//	         base_version int      the base op's opset version
//	         layout       ints     [number of base inputs, 1 if an add operand follows, number of activation inputs]
//	         activation   string   the activation op type ("" for none)
//	         act_version  int      its opset version
//	         act_<name>   any      the activation's attributes
//	         every other attribute belongs to the base op
package fused

import (
	"fmt"
	"strings"
	"sync"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Domain is the operator domain of vouch's own layers.
const Domain = "vouch"

// Ops returns the fused operators; their parts run through base.
func Ops(base *kernel.Registry) kernel.Table {
	f := &fusedOp{reg: base}
	t := kernel.Table{"Fused": {Run: f.run, Infer: f.infer, Into: f.into}}
	for k, v := range chainOps(base) {
		t[k] = v
	}
	return t
}

type fusedOp struct {
	reg   *kernel.Registry
	cache sync.Map // *ir.Node -> *entry (see into.go)
}

// parts splits a fused node into its base, add and activation nodes and
// the inputs of each.
type parts struct {
	base, add, act *ir.Node
	baseIn         []int // indices into the fused node's inputs
	addIn, actIn   []int
}

func split(n *ir.Node) (*parts, error) {
	layout := n.Ints("layout", nil)
	if len(layout) != 3 || layout[0] < 1 || layout[1] < 0 || layout[1] > 1 || layout[2] < 0 ||
		int(layout[0]+layout[1]+layout[2]) != len(n.Inputs) {
		return nil, fmt.Errorf("fused layer: bad layout %v for %d inputs", layout, len(n.Inputs))
	}
	p := &parts{}
	baseType := n.String("base", "")
	if baseType == "" {
		return nil, fmt.Errorf("fused layer: no base op")
	}
	p.base = &ir.Node{Name: n.Name + "/base", OpType: baseType, Version: n.Int("base_version", 0), Attrs: map[string]*ir.Attr{}}
	actType := n.String("activation", "")
	if actType != "" {
		p.act = &ir.Node{Name: n.Name + "/act", OpType: actType, Version: n.Int("act_version", 0), Attrs: map[string]*ir.Attr{}}
	}
	for k, a := range n.Attrs {
		switch {
		case k == "base" || k == "base_version" || k == "layout" || k == "activation" || k == "act_version":
		case strings.HasPrefix(k, "act_"):
			if p.act != nil {
				c := *a
				c.Name = strings.TrimPrefix(k, "act_")
				p.act.Attrs[c.Name] = &c
			}
		default:
			p.base.Attrs[k] = a
		}
	}
	i := 0
	for ; i < int(layout[0]); i++ {
		p.baseIn = append(p.baseIn, i)
	}
	if layout[1] == 1 {
		p.add = &ir.Node{Name: n.Name + "/add", OpType: "Add", Version: 14, Attrs: map[string]*ir.Attr{}}
		p.addIn = []int{i}
		i++
	}
	for ; i < len(n.Inputs); i++ {
		p.actIn = append(p.actIn, i)
	}
	for _, x := range []*ir.Node{p.base, p.add, p.act} {
		if x != nil {
			x.Outputs = []string{n.Name + "/" + x.OpType}
		}
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
	p, err := split(n)
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
	if p.act != nil {
		if y, err = step(p.act, append([]*tensor.Tensor{y}, pick(in, p.actIn)...)); err != nil {
			return nil, err
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
	if p.act != nil {
		if t, err = f.reg.InferNode(p.act, append([]ir.InferInput{{Present: true, Type: t[0]}}, pick(in, p.actIn)...)); err != nil {
			return nil, err
		}
	}
	return t[:1], nil
}
