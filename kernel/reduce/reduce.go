// Package reduce implements ONNX's reductions (ReduceSum and friends),
// Softmax, LogSoftmax, Hardmax and the loss operators.
//
// Order of accumulation, which fixes every result bit for bit:
//   - A reduction visits the elements of each output in row-major order of
//     the reduced indices (the order they have in the input) and folds them
//     sequentially into one accumulator. float32 inputs accumulate in
//     float32, float16 and bfloat16 in float32 (rounded once at the end),
//     float64 in float64 and integers in their own type (wrapping on
//     overflow). Squares are accumulated with one fused multiply-add
//     (acc = FMA(x, x, acc)). ReduceMean divides once, at the end.
//     ReduceLogSumExp first finds the maximum m, then sums exp(x-m) in the
//     same order and returns log(sum)+m.
//   - Softmax and LogSoftmax find the maximum along the axis, sum exp(x-max)
//     sequentially in index order, then divide (Softmax) or subtract the
//     logarithm of the sum (LogSoftmax).
//   - The losses sum the per-element losses (and, for mean, the weights)
//     sequentially in row-major order of the target.
//
// float32 exp and log are vmath's (Exp32, Log32); float64 kernels use math.
package reduce

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Ops returns the operators of this package.
func Ops() kernel.Table {
	t := kernel.Table{}
	for name, k := range reductions {
		t[name] = &kernel.Op{Run: runReduce(name, k), Infer: inferReduce(name)}
	}
	t["Softmax"] = &kernel.Op{Run: runSoftmax(softmaxKind), Infer: inferSoftmax}
	t["LogSoftmax"] = &kernel.Op{Run: runSoftmax(logSoftmaxKind), Infer: inferSoftmax}
	t["Hardmax"] = &kernel.Op{Run: runSoftmax(hardmaxKind), Infer: inferSoftmax}
	t["NegativeLogLikelihoodLoss"] = &kernel.Op{Run: runNLL, Infer: inferNLL}
	t["SoftmaxCrossEntropyLoss"] = &kernel.Op{Run: runSCE, Infer: inferSCE}
	addInto(t)
	return t
}

// axesFromInput reports whether the node takes its axes as an input (the
// second) rather than as an attribute: ReduceSum from opset 13, the other
// reductions from opset 18.
func axesFromInput(n *ir.Node) bool {
	if n.OpType == "ReduceSum" {
		return n.Version >= 13
	}
	return n.Version >= 18
}

// reducePlan is the resolved form of a reduction's axes attributes.
type reducePlan struct {
	noop    bool   // identity: empty axes with noop_with_empty_axes
	reduced []bool // per input dimension
	keep    bool
}

// planReduce resolves axes (nil or empty: all, unless noop) for an input of
// the given rank.
func planReduce(n *ir.Node, axes []int64, rank int) (reducePlan, error) {
	p := reducePlan{keep: n.Int("keepdims", 1) != 0, reduced: make([]bool, rank)}
	if len(axes) == 0 {
		if axesFromInput(n) && n.Int("noop_with_empty_axes", 0) != 0 {
			p.noop = true
			return p, nil
		}
		for i := range p.reduced {
			p.reduced[i] = true
		}
		return p, nil
	}
	for _, a := range axes {
		ax, err := kernel.NormAxis(a, rank)
		if err != nil {
			return p, fmt.Errorf("reduce: axes %v: %w", axes, err)
		}
		if p.reduced[ax] {
			return p, fmt.Errorf("reduce: axes %v name axis %d twice", axes, ax)
		}
		p.reduced[ax] = true
	}
	return p, nil
}

// nodeAxes returns the axes of a reduction node: its attribute, or its
// second input when the opset takes axes as an input.
func nodeAxes(n *ir.Node, in []*tensor.Tensor) ([]int64, error) {
	if !axesFromInput(n) {
		return n.Ints("axes", nil), nil
	}
	a := kernel.Input(in, 1)
	if a == nil {
		return nil, nil
	}
	if a.DType != tensor.Int64 {
		return nil, fmt.Errorf("reduce: axes must be int64, got %v", a.DType)
	}
	if len(a.Shape) > 1 {
		return nil, fmt.Errorf("reduce: axes must be 1-D, got shape %v", a.Shape)
	}
	return a.Int64s()
}

// outShape is the shape of the reduction's result.
func (p reducePlan) outShape(in []int) []int {
	var out []int
	for i, d := range in {
		switch {
		case !p.reduced[i]:
			out = append(out, d)
		case p.keep:
			out = append(out, 1)
		}
	}
	if out == nil {
		out = []int{}
	}
	return out
}

// walk calls f(i, o) for every input element i, in row-major order, with
// the flat offset o of the output element it reduces into.
func (p reducePlan) walk(shape []int, f func(i, o int)) {
	n := tensor.NumElems(shape)
	if n == 0 {
		return
	}
	// Output strides over the input's dimensions: 0 on reduced axes.
	ost := make([]int, len(shape))
	s := 1
	for d := len(shape) - 1; d >= 0; d-- {
		if !p.reduced[d] {
			ost[d] = s
			s *= shape[d]
		}
	}
	idx := make([]int, len(shape))
	o := 0
	for i := 0; i < n; i++ {
		f(i, o)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			o += ost[d]
			if idx[d] < shape[d] {
				break
			}
			o -= ost[d] * shape[d]
			idx[d] = 0
		}
	}
}

// count is how many input elements reduce into each output element.
func (p reducePlan) count(shape []int) int {
	c := 1
	for i, d := range shape {
		if p.reduced[i] {
			c *= d
		}
	}
	return c
}

func inferReduce(name string) kernel.InferFunc {
	return func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
		if len(in) == 0 || !in[0].Present {
			return nil, fmt.Errorf("reduce: %s needs an input", name)
		}
		x := in[0].Type
		if x.DType != tensor.Undefined {
			if err := checkReduceDType(name, x.DType); err != nil {
				return nil, err
			}
		}
		keep := n.Int("keepdims", 1) != 0
		var axes []int64
		if axesFromInput(n) && len(in) > 1 && in[1].Present {
			v, ok := kernel.ConstInts(in[1])
			if !ok {
				// Axes known only at run time.
				if keep && x.RankKnown {
					s := make([]ir.Dim, len(x.Shape))
					for i := range s {
						s[i] = ir.Unknown
					}
					return []ir.Type{{DType: x.DType, Shape: s, RankKnown: true}}, nil
				}
				return []ir.Type{kernel.UnknownRank(x.DType)}, nil
			}
			axes = v
		} else if !axesFromInput(n) {
			axes = n.Ints("axes", nil)
		}
		if len(axes) == 0 && axesFromInput(n) && n.Int("noop_with_empty_axes", 0) != 0 {
			return []ir.Type{x}, nil
		}
		if !x.RankKnown {
			if !keep && len(axes) == 0 {
				return []ir.Type{{DType: x.DType, Shape: []ir.Dim{}, RankKnown: true}}, nil
			}
			return []ir.Type{kernel.UnknownRank(x.DType)}, nil
		}
		p, err := planReduce(n, axes, len(x.Shape))
		if err != nil {
			return nil, err
		}
		out := []ir.Dim{}
		for i, d := range x.Shape {
			switch {
			case !p.reduced[i]:
				out = append(out, d)
			case p.keep:
				out = append(out, ir.Fixed(1))
			}
		}
		return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
	}
}

// checkReduceDType refuses element types no reduction accepts: strings,
// and bool except for ReduceMax/ReduceMin.
func checkReduceDType(name string, dt tensor.DType) error {
	switch {
	case dt == tensor.String:
		return fmt.Errorf("reduce: %s does not accept %v input", name, dt)
	case dt == tensor.Bool && name != "ReduceMax" && name != "ReduceMin":
		return fmt.Errorf("reduce: %s does not accept %v input", name, dt)
	case !dt.Supported():
		return fmt.Errorf("reduce: %s does not accept %v input", name, dt)
	}
	return nil
}
