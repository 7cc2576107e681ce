package control

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// runSequenceMap applies the body to each position of the input sequence:
// iteration i binds the i-th element of every sequence input and every
// tensor input as it is, and appends each body output to the matching
// output sequence. Iterations run in order.
func runSequenceMap(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	if c.Sub == nil {
		return nil, fmt.Errorf("SequenceMap: no subgraph runner")
	}
	if len(in) == 0 || in[0] == nil || in[0].DType != tensor.Sequence {
		return nil, fmt.Errorf("SequenceMap: the first input must be a sequence")
	}
	count := len(in[0].Elems())
	for i, t := range in {
		if t != nil && t.DType == tensor.Sequence && len(t.Elems()) != count {
			return nil, fmt.Errorf("SequenceMap: input %d has %d elements, the first has %d", i, len(t.Elems()), count)
		}
	}
	outs := make([][]*tensor.Tensor, len(n.Outputs))
	args := make([]*tensor.Tensor, len(in))
	for it := 0; it < count; it++ {
		for i, t := range in {
			if t != nil && t.DType == tensor.Sequence {
				args[i] = t.Elems()[it]
			} else {
				args[i] = t
			}
		}
		res, err := c.Sub.RunSubgraph(body, args)
		if err != nil {
			return nil, fmt.Errorf("SequenceMap: iteration %d: %w", it, err)
		}
		if len(res) != len(outs) {
			return nil, fmt.Errorf("SequenceMap: body gives %d outputs, node has %d", len(res), len(outs))
		}
		for j, r := range res {
			outs[j] = append(outs[j], r)
		}
	}
	result := make([]*tensor.Tensor, len(outs))
	for j := range outs {
		result[j] = tensor.NewSequence(outs[j])
	}
	return result, nil
}

func inferSequenceMap(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	out := make([]ir.Type, len(n.Outputs))
	for i := range out {
		out[i] = ir.Type{DType: tensor.Sequence}
	}
	return out, nil
}
