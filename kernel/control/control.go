// Package control implements ONNX's control-flow operators If, Loop and
// Scan on top of kernel.SubgraphRunner.
//
// Tensor and sequence values flow through bodies (SequenceMap maps a body
// over sequences); optional values are outside vouch's scope. Bodies run one
// iteration at a time in order, so results are deterministic whenever the
// bodies' kernels are. Loop and Scan outputs are fresh tensors; the body
// outputs they are assembled from are copied, never aliased or modified.
package control

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{
		"If":   {Run: runIf, Infer: inferIf},
		"Loop": {Run: runLoop, Infer: inferLoop},
		"Scan": {Run: runScan, Infer: inferScan},
		// SequenceMap is a function op in ONNX; vouch runs it directly.
		"SequenceMap": {Run: runSequenceMap, Infer: inferSequenceMap},
	}
}

// graphAttr returns the graph attribute name of n, or an error.
func graphAttr(n *ir.Node, name string) (*ir.Graph, error) {
	a, ok := n.Attrs[name]
	if !ok || a.G == nil {
		return nil, fmt.Errorf("%s: missing graph attribute %q", n.OpType, name)
	}
	return a.G, nil
}

// scalarBool reads a one-element bool tensor.
func scalarBool(t *tensor.Tensor, what string) (bool, error) {
	if t == nil {
		return false, fmt.Errorf("%s is missing", what)
	}
	d, ok := t.Data.([]bool)
	if !ok {
		return false, fmt.Errorf("%s must be bool, got %v", what, t.DType)
	}
	if len(d) != 1 {
		return false, fmt.Errorf("%s must have one element, got shape %s", what, tensor.ShapeString(t.Shape))
	}
	return d[0], nil
}

func runIf(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if c == nil || c.Sub == nil {
		return nil, fmt.Errorf("If: no subgraph runner")
	}
	cond, err := scalarBool(kernel.Input(in, 0), "If condition")
	if err != nil {
		return nil, err
	}
	branch := "else_branch"
	if cond {
		branch = "then_branch"
	}
	g, err := graphAttr(n, branch)
	if err != nil {
		return nil, err
	}
	if len(g.Inputs) != 0 {
		return nil, fmt.Errorf("If: %s must take no inputs, has %d", branch, len(g.Inputs))
	}
	outs, err := c.Sub.RunSubgraph(g, nil)
	if err != nil {
		return nil, fmt.Errorf("If: %s: %w", branch, err)
	}
	if len(outs) < len(n.Outputs) {
		return nil, fmt.Errorf("If: %s produced %d outputs, node has %d", branch, len(outs), len(n.Outputs))
	}
	return outs, nil
}

// inferIf types each output as the union of the two branches' declared
// output types: a dimension stays known only where both branches agree.
func inferIf(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	th, err := graphAttr(n, "then_branch")
	if err != nil {
		return nil, err
	}
	el, err := graphAttr(n, "else_branch")
	if err != nil {
		return nil, err
	}
	if len(th.Outputs) != len(el.Outputs) {
		return nil, fmt.Errorf("If: then_branch has %d outputs, else_branch %d", len(th.Outputs), len(el.Outputs))
	}
	out := make([]ir.Type, len(th.Outputs))
	for i := range out {
		a, b := th.Outputs[i].Type, el.Outputs[i].Type
		if a.DType != tensor.Undefined && b.DType != tensor.Undefined && a.DType != b.DType {
			return nil, fmt.Errorf("If: output %d is %v in then_branch, %v in else_branch", i, a.DType, b.DType)
		}
		out[i] = unionType(a, b)
	}
	return out, nil
}

func unionType(a, b ir.Type) ir.Type {
	dt := a.DType
	if dt == tensor.Undefined {
		dt = b.DType
	}
	if !a.RankKnown || !b.RankKnown || len(a.Shape) != len(b.Shape) {
		return ir.Type{DType: dt}
	}
	t := ir.Type{DType: dt, RankKnown: true, Shape: make([]ir.Dim, len(a.Shape))}
	for i := range a.Shape {
		if a.Shape[i] == b.Shape[i] && (a.Shape[i].Known() || a.Shape[i].Param != "") {
			t.Shape[i] = a.Shape[i]
		} else {
			t.Shape[i] = ir.Unknown
		}
	}
	return t
}

// declaredType is a subgraph value's declared type, with fallback's dtype
// where the declaration has none.
func declaredType(v *ir.Value, fallback tensor.DType) ir.Type {
	t := v.Type
	if t.DType == tensor.Undefined {
		t.DType = fallback
	}
	if t.RankKnown {
		t.Shape = append([]ir.Dim(nil), t.Shape...)
	}
	return t
}

// stack builds a tensor of shape [len(items)] + elem shape (or, with axis,
// the new dimension inserted at axis) from per-iteration tensors that all
// share one shape and dtype. reverse places item t at position len-1-t.
func stack(items []*tensor.Tensor, axis int, reverse bool, what string) (*tensor.Tensor, error) {
	first := items[0]
	for i, it := range items {
		if it.DType != first.DType || !sameShape(it.Shape, first.Shape) {
			return nil, fmt.Errorf("%s: iteration %d produced %v%s, iteration 0 produced %v%s", what, i, it.DType, tensor.ShapeString(it.Shape), first.DType, tensor.ShapeString(first.Shape))
		}
	}
	es := first.Shape
	if axis < 0 || axis > len(es) {
		return nil, fmt.Errorf("%s: axis %d out of range for rank %d", what, axis, len(es)+1)
	}
	shape := make([]int, 0, len(es)+1)
	shape = append(shape, es[:axis]...)
	shape = append(shape, len(items))
	shape = append(shape, es[axis:]...)
	out := tensor.New(first.DType, shape...)
	outer := tensor.NumElems(es[:axis])
	inner := tensor.NumElems(es[axis:])
	L := len(items)
	for t, it := range items {
		pos := t
		if reverse {
			pos = L - 1 - t
		}
		for o := 0; o < outer; o++ {
			if err := copyElems(out.Data, (o*L+pos)*inner, it.Data, o*inner, inner); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// slice returns x's index i along axis, as a tensor with that axis removed.
func slice(x *tensor.Tensor, axis, i int) (*tensor.Tensor, error) {
	shape := make([]int, 0, len(x.Shape)-1)
	shape = append(shape, x.Shape[:axis]...)
	shape = append(shape, x.Shape[axis+1:]...)
	out := tensor.New(x.DType, shape...)
	outer := tensor.NumElems(x.Shape[:axis])
	inner := tensor.NumElems(x.Shape[axis+1:])
	L := x.Shape[axis]
	for o := 0; o < outer; o++ {
		if err := copyElems(out.Data, o*inner, x.Data, (o*L+i)*inner, inner); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func cp[T any](dst []T, doff int, src any, soff, n int) error {
	s, ok := src.([]T)
	if !ok {
		return fmt.Errorf("element types differ")
	}
	copy(dst[doff:doff+n], s[soff:soff+n])
	return nil
}

// copyElems copies n elements from src[soff:] to dst[doff:]; both are
// tensor data slices of the same element type.
func copyElems(dst any, doff int, src any, soff, n int) error {
	switch d := dst.(type) {
	case []float32:
		return cp(d, doff, src, soff, n)
	case []float64:
		return cp(d, doff, src, soff, n)
	case []tensor.Half:
		return cp(d, doff, src, soff, n)
	case []tensor.BHalf:
		return cp(d, doff, src, soff, n)
	case []int8:
		return cp(d, doff, src, soff, n)
	case []int16:
		return cp(d, doff, src, soff, n)
	case []int32:
		return cp(d, doff, src, soff, n)
	case []int64:
		return cp(d, doff, src, soff, n)
	case []uint8:
		return cp(d, doff, src, soff, n)
	case []uint16:
		return cp(d, doff, src, soff, n)
	case []uint32:
		return cp(d, doff, src, soff, n)
	case []uint64:
		return cp(d, doff, src, soff, n)
	case []bool:
		return cp(d, doff, src, soff, n)
	case []string:
		return cp(d, doff, src, soff, n)
	}
	return fmt.Errorf("unsupported element type %T", dst)
}
