package control

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Scan runs its body once per element of the scan inputs' sequence axis.
// Body inputs are (N states, M scan-input slices), body outputs (N states,
// K scan-output slices). Opset 9 and later: the node's inputs are the N
// initial states and M scan inputs, with per-input axes and directions.
// Opset 8: the first input is the optional sequence_lens, and every input
// has a leading batch axis that is scanned independently; scan inputs are
// scanned along axis 1 and short sequences' scan outputs are zero-padded.
func runScan(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if c == nil || c.Sub == nil {
		return nil, fmt.Errorf("Scan: no subgraph runner")
	}
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	if n.Version > 0 && n.Version < 9 {
		return runScan8(c, n, body, in)
	}
	m := int(n.Int("num_scan_inputs", 0))
	if m < 1 || m > len(in) {
		return nil, fmt.Errorf("Scan: num_scan_inputs is %d, node has %d inputs", m, len(in))
	}
	nState := len(in) - m
	nScan := len(body.Outputs) - nState
	if len(body.Inputs) != nState+m || nScan < 0 {
		return nil, fmt.Errorf("Scan: body has %d inputs and %d outputs, want %d inputs and at least %d outputs", len(body.Inputs), len(body.Outputs), nState+m, nState)
	}
	for i, t := range in {
		if t == nil {
			return nil, fmt.Errorf("Scan: input %d is missing", i)
		}
	}
	scans := in[nState:]
	axes, err := attrList(n, "scan_input_axes", m, 0)
	if err != nil {
		return nil, err
	}
	dirs, err := attrList(n, "scan_input_directions", m, 0)
	if err != nil {
		return nil, err
	}
	outAxes, err := attrList(n, "scan_output_axes", nScan, 0)
	if err != nil {
		return nil, err
	}
	outDirs, err := attrList(n, "scan_output_directions", nScan, 0)
	if err != nil {
		return nil, err
	}
	ax := make([]int, m)
	L := -1
	for j, x := range scans {
		if ax[j], err = kernel.NormAxis(axes[j], x.Rank()); err != nil {
			return nil, fmt.Errorf("Scan: scan input %d: %w", j, err)
		}
		if l := x.Shape[ax[j]]; L < 0 {
			L = l
		} else if l != L {
			return nil, fmt.Errorf("Scan: scan input %d has sequence length %d, scan input 0 has %d", j, l, L)
		}
	}
	states, per, err := scanCore(c, body, in[:nState], scans, ax, dirs, L)
	if err != nil {
		return nil, err
	}
	res := append([]*tensor.Tensor{}, states...)
	for k, items := range per {
		what := fmt.Sprintf("Scan output %d", k)
		if len(items) == 0 {
			t, err := emptyStack(body.Outputs[nState+k], what)
			if err != nil {
				return nil, err
			}
			res = append(res, t)
			continue
		}
		a, err := kernel.NormAxis(outAxes[k], items[0].Rank()+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		t, err := stack(items, a, outDirs[k] == 1, what)
		if err != nil {
			return nil, err
		}
		res = append(res, t)
	}
	return res, nil
}

// attrList reads an ints attribute of length n (def-filled when absent).
func attrList(n *ir.Node, name string, want int, def int64) ([]int64, error) {
	v := n.Ints(name, nil)
	if v == nil {
		v = make([]int64, want)
		for i := range v {
			v[i] = def
		}
		return v, nil
	}
	if len(v) != want {
		return nil, fmt.Errorf("Scan: attribute %s has %d values, want %d", name, len(v), want)
	}
	return v, nil
}

// scanCore runs the body L times. Iteration t reads element t of each scan
// input along ax[j] (element L-1-t where dirs[j] is 1). It returns the final
// states and, per scan output, the per-iteration values in iteration order.
func scanCore(c *kernel.Ctx, body *ir.Graph, init, scans []*tensor.Tensor, ax []int, dirs []int64, L int) ([]*tensor.Tensor, [][]*tensor.Tensor, error) {
	nState := len(init)
	nScan := len(body.Outputs) - nState
	states := append([]*tensor.Tensor{}, init...)
	per := make([][]*tensor.Tensor, nScan)
	args := make([]*tensor.Tensor, nState+len(scans))
	for t := 0; t < L; t++ {
		copy(args, states)
		for j, x := range scans {
			idx := t
			if dirs[j] == 1 {
				idx = L - 1 - t
			}
			s, err := slice(x, ax[j], idx)
			if err != nil {
				return nil, nil, err
			}
			args[nState+j] = s
		}
		outs, err := c.Sub.RunSubgraph(body, args)
		if err != nil {
			return nil, nil, fmt.Errorf("Scan: iteration %d: %w", t, err)
		}
		if len(outs) != nState+nScan {
			return nil, nil, fmt.Errorf("Scan: iteration %d: body produced %d outputs, want %d", t, len(outs), nState+nScan)
		}
		copy(states, outs[:nState])
		for k := range per {
			per[k] = append(per[k], outs[nState+k])
		}
	}
	return states, per, nil
}

func runScan8(c *kernel.Ctx, n *ir.Node, body *ir.Graph, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	m := int(n.Int("num_scan_inputs", 0))
	if m < 1 || m > len(in)-1 {
		return nil, fmt.Errorf("Scan: num_scan_inputs is %d, node has %d inputs after sequence_lens", m, len(in)-1)
	}
	nState := len(in) - 1 - m
	nScan := len(body.Outputs) - nState
	if len(body.Inputs) != nState+m || nScan < 0 {
		return nil, fmt.Errorf("Scan: body has %d inputs and %d outputs, want %d inputs and at least %d outputs", len(body.Inputs), len(body.Outputs), nState+m, nState)
	}
	ins := in[1:]
	for i, t := range ins {
		if t == nil {
			return nil, fmt.Errorf("Scan: input %d is missing", i+1)
		}
		if t.Rank() < 1 {
			return nil, fmt.Errorf("Scan: input %d must have a batch axis, got a scalar", i+1)
		}
	}
	dirs, err := attrList(n, "directions", m, 0)
	if err != nil {
		return nil, err
	}
	B := ins[0].Shape[0]
	L := -1
	for j, x := range ins {
		if x.Shape[0] != B {
			return nil, fmt.Errorf("Scan: input %d has batch size %d, input 1 has %d", j+1, x.Shape[0], B)
		}
		if j >= nState {
			if x.Rank() < 2 {
				return nil, fmt.Errorf("Scan: scan input %d must have rank >= 2 (batch, sequence), got %s", j-nState, tensor.ShapeString(x.Shape))
			}
			if L < 0 {
				L = x.Shape[1]
			} else if x.Shape[1] != L {
				return nil, fmt.Errorf("Scan: scan input %d has sequence length %d, scan input 0 has %d", j-nState, x.Shape[1], L)
			}
		}
	}
	lens := make([]int64, B)
	for b := range lens {
		lens[b] = int64(L)
	}
	if sl := in[0]; sl != nil {
		v, err := sl.Int64s()
		if err != nil || !sl.DType.IsInt() || len(v) != B {
			return nil, fmt.Errorf("Scan: sequence_lens must be %d integers, got %v%s", B, sl.DType, tensor.ShapeString(sl.Shape))
		}
		for b, l := range v {
			if l < 0 || l > int64(L) {
				return nil, fmt.Errorf("Scan: sequence_lens[%d] is %d, want 0..%d", b, l, L)
			}
		}
		lens = v
	}
	ax := make([]int, m)
	finals := make([][]*tensor.Tensor, nState)
	outs := make([][]*tensor.Tensor, nScan)
	for b := 0; b < B; b++ {
		sub := make([]*tensor.Tensor, len(ins))
		for j, x := range ins {
			if sub[j], err = slice(x, 0, b); err != nil {
				return nil, err
			}
		}
		// A shorter sequence scans only its first lens[b] elements; a
		// reverse direction starts from its last valid element.
		scans := sub[nState:]
		lb := int(lens[b])
		if lb < L {
			for j := range scans {
				if scans[j], err = prefix(scans[j], lb); err != nil {
					return nil, err
				}
			}
		}
		states, per, err := scanCore(c, body, sub[:nState], scans, ax, dirs, lb)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", b, err)
		}
		for i, s := range states {
			finals[i] = append(finals[i], s)
		}
		for k, items := range per {
			what := fmt.Sprintf("Scan output %d", k)
			var st *tensor.Tensor
			if len(items) == 0 {
				if st, err = emptyStack(body.Outputs[nState+k], what); err != nil {
					return nil, err
				}
				if L > 0 {
					return nil, fmt.Errorf("%s: batch %d has sequence length 0, so its element shape is unknown", what, b)
				}
			} else {
				for len(items) < L {
					items = append(items, tensor.New(items[0].DType, items[0].Shape...))
				}
				if st, err = stack(items, 0, false, what); err != nil {
					return nil, err
				}
			}
			outs[k] = append(outs[k], st)
		}
	}
	var res []*tensor.Tensor
	for i, items := range finals {
		if B == 0 {
			return nil, fmt.Errorf("Scan: batch size 0 is not supported")
		}
		t, err := stack(items, 0, false, fmt.Sprintf("Scan state %d", i))
		if err != nil {
			return nil, err
		}
		res = append(res, t)
	}
	for k, items := range outs {
		if B == 0 {
			return nil, fmt.Errorf("Scan: batch size 0 is not supported")
		}
		t, err := stack(items, 0, false, fmt.Sprintf("Scan output %d", k))
		if err != nil {
			return nil, err
		}
		res = append(res, t)
	}
	return res, nil
}

// prefix returns the first l elements of x along axis 0.
func prefix(x *tensor.Tensor, l int) (*tensor.Tensor, error) {
	shape := append([]int{l}, x.Shape[1:]...)
	out := tensor.New(x.DType, shape...)
	if err := copyElems(out.Data, 0, x.Data, 0, out.Len()); err != nil {
		return nil, err
	}
	return out, nil
}

// inferScan types the states from the body's declared outputs (falling back
// to the initial states' types) and the scan outputs as the body's declared
// output with the sequence dimension inserted (opset 8: after the batch
// dimension).
func inferScan(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	body, err := graphAttr(n, "body")
	if err != nil {
		return nil, err
	}
	m := int(n.Int("num_scan_inputs", 0))
	v8 := n.Version > 0 && n.Version < 9
	first := 0
	if v8 {
		first = 1
	}
	if m < 1 || first+m > len(in) {
		return nil, fmt.Errorf("Scan: num_scan_inputs is %d, node has %d inputs", m, len(in))
	}
	nState := len(in) - first - m
	nScan := len(body.Outputs) - nState
	if nScan < 0 {
		return nil, fmt.Errorf("Scan: body has %d outputs, want at least %d", len(body.Outputs), nState)
	}
	// The sequence length and (opset 8) batch size, where known.
	seq, batch := ir.Unknown, ir.Unknown
	x0 := in[first+nState].Type
	axis := 0
	if v8 {
		axis = 1
	} else if a := n.Ints("scan_input_axes", nil); len(a) > 0 {
		if x0.RankKnown {
			if axis, err = kernel.NormAxis(a[0], len(x0.Shape)); err != nil {
				return nil, fmt.Errorf("Scan: scan input 0: %w", err)
			}
		} else {
			axis = -1
		}
	}
	if x0.RankKnown && axis >= 0 && axis < len(x0.Shape) {
		seq = x0.Shape[axis]
		if v8 && len(x0.Shape) > 0 {
			batch = x0.Shape[0]
		}
	}
	outAxes := n.Ints("scan_output_axes", nil)
	out := make([]ir.Type, 0, nState+nScan)
	for i := 0; i < nState; i++ {
		init := in[first+i].Type
		t := declaredType(body.Outputs[i], init.DType)
		if v8 && t.RankKnown {
			t.Shape = append([]ir.Dim{batch}, t.Shape...)
		}
		if !t.RankKnown && init.RankKnown {
			t = init
		}
		out = append(out, t)
	}
	for k := 0; k < nScan; k++ {
		t := declaredType(body.Outputs[nState+k], tensor.Undefined)
		if t.RankKnown {
			a := 0
			if k < len(outAxes) {
				if a, err = kernel.NormAxis(outAxes[k], len(t.Shape)+1); err != nil {
					return nil, fmt.Errorf("Scan: scan output %d: %w", k, err)
				}
			}
			sh := append([]ir.Dim{}, t.Shape[:a]...)
			sh = append(sh, seq)
			sh = append(sh, t.Shape[a:]...)
			if v8 {
				sh = append([]ir.Dim{batch}, sh...)
			}
			t.Shape = sh
		}
		out = append(out, t)
	}
	return out, nil
}
