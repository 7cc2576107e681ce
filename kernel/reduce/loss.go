package reduce

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// lossArgs is what NegativeLogLikelihoodLoss needs, checked.
type lossArgs struct {
	n, c, d   int // batch, classes, product of the trailing dims
	target    []int64
	reduction string
	ignore    bool
	ii        int64
}

// checkLoss validates the shapes of input (N, C, d1..dk), target
// (N, d1..dk) and weight (C) and the reduction attribute.
func checkLoss(n *ir.Node, x, target, weight *tensor.Tensor) (lossArgs, error) {
	var a lossArgs
	a.reduction = n.String("reduction", "mean")
	switch a.reduction {
	case "none", "sum", "mean":
	default:
		return a, fmt.Errorf("reduce: %s reduction %q is not none, sum or mean", n.OpType, a.reduction)
	}
	if x == nil || target == nil {
		return a, fmt.Errorf("reduce: %s needs an input and a target", n.OpType)
	}
	if len(x.Shape) < 2 {
		return a, fmt.Errorf("reduce: %s input must have rank >= 2 (N, C, ...), got shape %v", n.OpType, x.Shape)
	}
	if target.DType != tensor.Int32 && target.DType != tensor.Int64 {
		return a, fmt.Errorf("reduce: %s target must be int32 or int64, got %v", n.OpType, target.DType)
	}
	want := append([]int{x.Shape[0]}, x.Shape[2:]...)
	if !sameInts(target.Shape, want) {
		return a, fmt.Errorf("reduce: %s target shape %v does not match input shape %v (want %v)", n.OpType, target.Shape, x.Shape, want)
	}
	a.n, a.c, a.d = x.Shape[0], x.Shape[1], tensor.NumElems(x.Shape[2:])
	if weight != nil {
		if len(weight.Shape) != 1 || weight.Shape[0] != a.c {
			return a, fmt.Errorf("reduce: %s weight shape %v, want [%d]", n.OpType, weight.Shape, a.c)
		}
		if weight.DType != x.DType {
			return a, fmt.Errorf("reduce: %s weight is %v, input is %v", n.OpType, weight.DType, x.DType)
		}
	}
	a.ignore = n.Has("ignore_index")
	a.ii = n.Int("ignore_index", 0)
	t, err := target.Int64s()
	if err != nil {
		return a, err
	}
	for _, v := range t {
		if (!a.ignore || v != a.ii) && (v < 0 || v >= int64(a.c)) {
			return a, fmt.Errorf("reduce: %s target %d out of range [0, %d)", n.OpType, v, a.c)
		}
	}
	a.target = t
	return a, nil
}

func sameInts(a, b []int) bool {
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

// nll computes the loss from log-probabilities x (N, C, D); w may be nil.
// Sums run sequentially in target order.
func nll[T kernel.Float](a lossArgs, x, w []T) []T {
	loss := make([]T, a.n*a.d)
	var sum, wsum T
	for i := 0; i < a.n; i++ {
		for j := 0; j < a.d; j++ {
			k := i*a.d + j
			t := a.target[k]
			if a.ignore && t == a.ii {
				continue
			}
			v := -x[(i*a.c+int(t))*a.d+j]
			wt := T(1)
			if w != nil {
				wt = w[t]
				v *= wt
			}
			loss[k] = v
			sum += v
			wsum += wt
		}
	}
	switch a.reduction {
	case "sum":
		return []T{sum}
	case "mean":
		return []T{sum / wsum}
	}
	return loss
}

// lossShape is the output shape for the reduction and target shape.
func lossShape(reduction string, target []int) []int {
	if reduction == "none" {
		return append([]int{}, target...)
	}
	return []int{}
}

// nllTensor runs nll on x of any float type.
func nllTensor(a lossArgs, x, weight *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	switch d := x.Data.(type) {
	case []float32:
		var w []float32
		if weight != nil {
			w = weight.Data.([]float32)
		}
		return tensor.From(nll(a, d, w), shape...), nil
	case []float64:
		var w []float64
		if weight != nil {
			w = weight.Data.([]float64)
		}
		return tensor.From(nll(a, d, w), shape...), nil
	case []tensor.Half, []tensor.BHalf:
		x32, err := floats32(x)
		if err != nil {
			return nil, err
		}
		var w []float32
		if weight != nil {
			if w, err = floats32(weight); err != nil {
				return nil, err
			}
		}
		return tensor.FromFloat64s(x.DType, shape, widen(nll(a, x32, w))), nil
	}
	return nil, fmt.Errorf("reduce: loss input must be float, got %v", x.DType)
}

func runNLL(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, target, weight := kernel.Input(in, 0), kernel.Input(in, 1), kernel.Input(in, 2)
	a, err := checkLoss(n, x, target, weight)
	if err != nil {
		return nil, err
	}
	out, err := nllTensor(a, x, weight, lossShape(a.reduction, target.Shape))
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func runSCE(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, target, weight := kernel.Input(in, 0), kernel.Input(in, 1), kernel.Input(in, 2)
	a, err := checkLoss(n, x, target, weight)
	if err != nil {
		return nil, err
	}
	if !x.DType.IsFloat() {
		return nil, fmt.Errorf("reduce: %s scores must be float, got %v", n.OpType, x.DType)
	}
	// log_prob: LogSoftmax over the class axis.
	lp := tensor.New(x.DType, x.Shape...)
	shape := lossShape(a.reduction, target.Shape)
	g := geom{a.n, a.c, a.d}
	var out *tensor.Tensor
	switch d := x.Data.(type) {
	case []float32:
		softmaxFloat(c.Vec(), logSoftmaxKind, d, lp.Data.([]float32), g, f32)
		out, err = nllTensor(a, lp, weight, shape)
	case []float64:
		softmaxFloat(c.Vec(), logSoftmaxKind, d, lp.Data.([]float64), g, f64)
		out, err = nllTensor(a, lp, weight, shape)
	default: // float16, bfloat16: in float32, each output rounded once
		x32, err := floats32(x)
		if err != nil {
			return nil, err
		}
		y32 := make([]float32, len(x32))
		softmaxFloat(c.Vec(), logSoftmaxKind, x32, y32, g, f32)
		var w32 []float32
		if weight != nil {
			if w32, err = floats32(weight); err != nil {
				return nil, err
			}
		}
		lp = tensor.FromFloat64s(x.DType, x.Shape, widen(y32))
		out = tensor.FromFloat64s(x.DType, shape, widen(nll(a, y32, w32)))
	}
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out, lp}, nil
}

func inferNLL(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	t, err := inferLoss(n, in)
	if err != nil {
		return nil, err
	}
	return []ir.Type{t}, nil
}

func inferSCE(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	t, err := inferLoss(n, in)
	if err != nil {
		return nil, err
	}
	return []ir.Type{t, in[0].Type}, nil
}

func inferLoss(n *ir.Node, in []ir.InferInput) (ir.Type, error) {
	if len(in) < 2 || !in[0].Present || !in[1].Present {
		return ir.Type{}, fmt.Errorf("reduce: %s needs an input and a target", n.OpType)
	}
	x, t := in[0].Type, in[1].Type
	if x.DType != tensor.Undefined && !x.DType.IsFloat() {
		return ir.Type{}, fmt.Errorf("reduce: %s input must be float, got %v", n.OpType, x.DType)
	}
	if x.RankKnown && len(x.Shape) < 2 {
		return ir.Type{}, fmt.Errorf("reduce: %s input must have rank >= 2, got %v", n.OpType, x)
	}
	if x.RankKnown && t.RankKnown && len(t.Shape) != len(x.Shape)-1 {
		return ir.Type{}, fmt.Errorf("reduce: %s target %v does not match input %v", n.OpType, t, x)
	}
	red := n.String("reduction", "mean")
	switch red {
	case "none":
		switch {
		case t.RankKnown:
			return ir.Type{DType: x.DType, Shape: t.Shape, RankKnown: true}, nil
		case x.RankKnown:
			s := append([]ir.Dim{x.Shape[0]}, x.Shape[2:]...)
			return ir.Type{DType: x.DType, Shape: s, RankKnown: true}, nil
		}
		return kernel.UnknownRank(x.DType), nil
	case "sum", "mean":
		return ir.Type{DType: x.DType, Shape: []ir.Dim{}, RankKnown: true}, nil
	}
	return ir.Type{}, fmt.Errorf("reduce: %s reduction %q is not none, sum or mean", n.OpType, red)
}

// floats32 reads a float16 or bfloat16 tensor as float32 (exactly).
func floats32(t *tensor.Tensor) ([]float32, error) {
	xs, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(xs))
	for i, v := range xs {
		out[i] = float32(v)
	}
	return out, nil
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
