package control

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Loop runs its body while the trip count (input M) and the condition
// (input cond, then the body's cond_out) allow. Body inputs are
// (iteration_num int64 scalar, cond bool scalar, N loop-carried values);
// body outputs are (cond_out, N loop-carried values, K scan outputs). The
// node's outputs are the N final loop-carried values and the K scan outputs,
// each stacked along a new leading axis.
//
// With neither M nor cond the ONNX loop never terminates; vouch refuses to
// run such a node instead of hanging.
func runLoop(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if c == nil || c.Sub == nil {
		return nil, fmt.Errorf("Loop: no subgraph runner")
	}
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	nCarried := len(in) - 2
	if nCarried < 0 {
		nCarried = 0
	}
	if len(body.Inputs) != 2+nCarried {
		return nil, fmt.Errorf("Loop: body takes %d inputs, want %d (iteration number, condition and %d loop-carried values)", len(body.Inputs), 2+nCarried, nCarried)
	}
	nScan := len(body.Outputs) - 1 - nCarried
	if nScan < 0 {
		return nil, fmt.Errorf("Loop: body has %d outputs, want at least %d (condition and %d loop-carried values)", len(body.Outputs), 1+nCarried, nCarried)
	}
	if len(n.Outputs) > nCarried+nScan {
		return nil, fmt.Errorf("Loop: node has %d outputs, body provides %d", len(n.Outputs), nCarried+nScan)
	}

	hasM := kernel.Input(in, 0) != nil
	var maxTrip int64
	if hasM {
		m := in[0]
		v, err := m.Int64s()
		if err != nil || m.DType != tensor.Int64 || len(v) != 1 {
			return nil, fmt.Errorf("Loop: M must be an int64 scalar, got %v%s", m.DType, tensor.ShapeString(m.Shape))
		}
		maxTrip = v[0]
	}
	hasCond := kernel.Input(in, 1) != nil
	cond := true
	if hasCond {
		if cond, err = scalarBool(in[1], "Loop cond"); err != nil {
			return nil, err
		}
	}
	if !hasM && !hasCond {
		return nil, fmt.Errorf("Loop: neither M nor cond is given, so the loop never terminates")
	}

	carried := make([]*tensor.Tensor, nCarried)
	for i := range carried {
		if in[2+i] == nil {
			return nil, fmt.Errorf("Loop: loop-carried input %d is missing", i)
		}
		carried[i] = in[2+i]
	}
	scans := make([][]*tensor.Tensor, nScan)
	args := make([]*tensor.Tensor, 2+nCarried)
	for i := int64(0); (!hasM || i < maxTrip) && cond; i++ {
		args[0] = tensor.Scalar(i)
		args[1] = tensor.Scalar(cond)
		copy(args[2:], carried)
		outs, err := c.Sub.RunSubgraph(body, args)
		if err != nil {
			return nil, fmt.Errorf("Loop: iteration %d: %w", i, err)
		}
		if len(outs) != 1+nCarried+nScan {
			return nil, fmt.Errorf("Loop: iteration %d: body produced %d outputs, want %d", i, len(outs), 1+nCarried+nScan)
		}
		if hasCond {
			if cond, err = scalarBool(outs[0], "Loop body cond_out"); err != nil {
				return nil, fmt.Errorf("Loop: iteration %d: %w", i, err)
			}
		}
		copy(carried, outs[1:1+nCarried])
		for k := range scans {
			scans[k] = append(scans[k], outs[1+nCarried+k])
		}
	}

	res := make([]*tensor.Tensor, 0, nCarried+nScan)
	res = append(res, carried...)
	for k, items := range scans {
		what := fmt.Sprintf("Loop scan output %d", k)
		if len(items) == 0 {
			t, err := emptyStack(body.Outputs[1+nCarried+k], what)
			if err != nil {
				return nil, err
			}
			res = append(res, t)
			continue
		}
		t, err := stack(items, 0, false, what)
		if err != nil {
			return nil, err
		}
		res = append(res, t)
	}
	return res, nil
}

// emptyStack is the value of a scan output that no iteration produced: a
// tensor with a leading 0 and the body's declared element shape (unknown
// dimensions taken as 0, since no element exists to fix them).
func emptyStack(v *ir.Value, what string) (*tensor.Tensor, error) {
	dt := v.Type.DType
	if dt == tensor.Undefined {
		return nil, fmt.Errorf("%s: no iteration ran and the body does not declare its element type", what)
	}
	shape := []int{0}
	for _, d := range v.Type.Shape {
		if d.Known() {
			shape = append(shape, int(d.Value))
		} else {
			shape = append(shape, 0)
		}
	}
	return tensor.New(dt, shape...), nil
}

// inferLoop takes the types of loop-carried outputs from the body's declared
// outputs (their shapes may change between iterations, so the initial
// values' shapes are not used), and gives scan outputs one more leading
// dimension: the trip count when M is constant and cond is absent,
// otherwise unknown.
func inferLoop(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	nCarried := max(len(in)-2, 0)
	nScan := len(body.Outputs) - 1 - nCarried
	if nScan < 0 {
		return nil, fmt.Errorf("Loop: body has %d outputs, want at least %d", len(body.Outputs), 1+nCarried)
	}
	out := make([]ir.Type, 0, nCarried+nScan)
	for i := 0; i < nCarried; i++ {
		out = append(out, declaredType(body.Outputs[1+i], in[2+i].Type.DType))
	}
	trip := ir.Unknown
	if len(in) > 0 && (len(in) < 2 || !in[1].Present) {
		if m, ok := kernel.ConstInts(in[0]); ok && len(m) == 1 {
			trip = ir.Fixed(int(max(m[0], 0)))
		}
	}
	for k := 0; k < nScan; k++ {
		t := declaredType(body.Outputs[1+nCarried+k], tensor.Undefined)
		if t.RankKnown {
			t.Shape = append([]ir.Dim{trip}, t.Shape...)
		}
		out = append(out, t)
	}
	return out, nil
}
