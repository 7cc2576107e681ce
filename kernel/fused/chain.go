package fused

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// A Chain layer (domain "vouch", e.g. op type "Attention") runs a fixed
// sequence of ONNX nodes, held in its "body" graph attribute, as one layer:
// the body's inputs are the layer's inputs, its single output the layer's
// output. It performs exactly the operations of the nodes it replaced,
// through the same kernels, so its bits are theirs.
func chainOps(base *kernel.Registry) kernel.Table {
	c := &chainOp{reg: base}
	cc := &convChainOp{c: c}
	return kernel.Table{
		"Attention": {Run: c.run, Infer: c.infer, Into: c.into},
		ConvChain:   {Run: c.run, Infer: c.infer, Into: cc.into},
	}
}

type chainOp struct {
	reg *kernel.Registry
}

func body(n *ir.Node) (*ir.Graph, error) {
	a, ok := n.Attrs["body"]
	if !ok || a.G == nil {
		return nil, fmt.Errorf("%s layer has no body", n.OpType)
	}
	if len(a.G.Inputs) != len(n.Inputs) || len(a.G.Outputs) != 1 {
		return nil, fmt.Errorf("%s layer: body takes %d inputs and gives %d outputs, layer has %d inputs", n.OpType, len(a.G.Inputs), len(a.G.Outputs), len(n.Inputs))
	}
	return a.G, nil
}

func (c *chainOp) run(ctx *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g, err := body(n)
	if err != nil {
		return nil, err
	}
	if ctx.Sub == nil {
		return nil, fmt.Errorf("%s layer: no subgraph runner", n.OpType)
	}
	return ctx.Sub.RunSubgraph(g, in)
}

func (c *chainOp) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	g, err := body(n)
	if err != nil {
		return nil, err
	}
	sub := *g // infer on a copy: the body is shared by every executor
	sub.Types = map[string]ir.Type{}
	sub.Inputs = make([]*ir.Value, len(g.Inputs))
	for i, v := range g.Inputs {
		sub.Inputs[i] = &ir.Value{Name: v.Name, Type: in[i].Type}
	}
	if err := ir.Infer(&sub, c.reg, nil); err != nil {
		return nil, err
	}
	return []ir.Type{sub.Types[g.Outputs[0].Name]}, nil
}
