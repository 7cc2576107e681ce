package elementwise

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// variadic runs Sum, Mean, Max or Min over one or more inputs with
// multidirectional broadcasting. The inputs are folded left to right in
// input order (((x0 op x1) op x2) ...), so float sums have one fixed order.
// float16 and bfloat16 are folded in float32 and rounded once at the end.
func variadic(op string) kernel.RunFunc {
	return func(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if len(in) == 0 {
			return nil, fmt.Errorf("elementwise: %s needs at least one input", op)
		}
		if err := sameType(op, in...); err != nil {
			return nil, err
		}
		dt := in[0].DType
		if (op == "Sum" || op == "Mean") && !dt.IsFloat() && !dt.IsInt() {
			return nil, fmt.Errorf("elementwise: %s does not support %v", op, dt)
		}
		acc := widen(in[0])
		if len(in) == 1 {
			acc = acc.Clone()
		}
		for _, t := range in[1:] {
			var err error
			switch op {
			case "Sum", "Mean":
				acc, err = arith2(c.Vec(), "Add", acc, widen(t))
			default:
				acc, err = minmax2(op == "Max", acc, widen(t))
			}
			if err != nil {
				return nil, err
			}
		}
		if op == "Mean" {
			k := len(in)
			switch d := acc.Data.(type) {
			case []float32:
				for i := range d {
					d[i] /= float32(k)
				}
			case []float64:
				for i := range d {
					d[i] /= float64(k)
				}
			default:
				return nil, fmt.Errorf("elementwise: Mean does not support %v", dt)
			}
		}
		return []*tensor.Tensor{narrow(acc, dt)}, nil
	}
}

// maxN and minN propagate NaN, as numpy's maximum and minimum do.
func maxN[T kernel.Number](x, y T) T {
	if x != x || y < x {
		return x
	}
	return y
}

func minN[T kernel.Number](x, y T) T {
	if x != x || y > x {
		return x
	}
	return y
}

func minmax2(isMax bool, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	shape, err := bshape(a, b)
	if err != nil {
		return nil, err
	}
	var data any
	switch x := a.Data.(type) {
	case []float32:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]float32))
	case []float64:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]float64))
	case []int8:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]int8))
	case []int16:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]int16))
	case []int32:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]int32))
	case []int64:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]int64))
	case []uint8:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]uint8))
	case []uint16:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]uint16))
	case []uint32:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]uint32))
	case []uint64:
		data = minmaxT(isMax, shape, a.Shape, b.Shape, x, b.Data.([]uint64))
	default:
		return nil, fmt.Errorf("elementwise: Max/Min do not support %v", a.DType)
	}
	return wrap(a.DType, shape, data), nil
}

func minmaxT[T kernel.Number](isMax bool, out, as, bs []int, a, b []T) []T {
	if isMax {
		return run2(out, as, bs, a, b, elem(maxN[T]))
	}
	return run2(out, as, bs, a, b, elem(minN[T]))
}

// runClip implements Clip: y = min(max(x, lo), hi), so lo > hi gives hi
// everywhere (as the spec says) and NaN stays NaN. Before opset 11 the
// bounds are the float attributes min and max; from 11 on they are the
// optional scalar inputs 1 and 2.
func runClip(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("Clip", in, 1); err != nil {
		return nil, err
	}
	x := in[0]
	dt := x.DType
	w := widen(x)
	var lo, hi *tensor.Tensor
	if n.Version > 0 && n.Version < 11 {
		if !dt.IsFloat() {
			return nil, fmt.Errorf("elementwise: Clip-%d does not support %v", n.Version, dt)
		}
		l := n.Float("min", float32(math.Inf(-1)))
		h := n.Float("max", float32(math.Inf(1)))
		lo, hi = scalarLike(w.DType, float64(l)), scalarLike(w.DType, float64(h))
	} else {
		for i, p := range []**tensor.Tensor{&lo, &hi} {
			b := kernel.Input(in, i+1)
			if b == nil {
				continue
			}
			if b.DType != dt {
				return nil, fmt.Errorf("elementwise: Clip: bound %d is %v, input is %v", i+1, b.DType, dt)
			}
			if b.Len() != 1 {
				return nil, fmt.Errorf("elementwise: Clip: bound %d must be a scalar, has shape %v", i+1, b.Shape)
			}
			*p = widen(b)
		}
	}
	var data any
	switch v := w.Data.(type) {
	case []float32:
		data = clipT(v, lo, hi)
	case []float64:
		data = clipT(v, lo, hi)
	case []int8:
		data = clipT(v, lo, hi)
	case []int16:
		data = clipT(v, lo, hi)
	case []int32:
		data = clipT(v, lo, hi)
	case []int64:
		data = clipT(v, lo, hi)
	case []uint8:
		data = clipT(v, lo, hi)
	case []uint16:
		data = clipT(v, lo, hi)
	case []uint32:
		data = clipT(v, lo, hi)
	case []uint64:
		data = clipT(v, lo, hi)
	default:
		return nil, fmt.Errorf("elementwise: Clip does not support %v", dt)
	}
	return []*tensor.Tensor{narrow(wrap(w.DType, x.Shape, data), dt)}, nil
}

func scalarLike(dt tensor.DType, v float64) *tensor.Tensor {
	return tensor.FromFloat64s(dt, nil, []float64{v})
}

func clipT[T kernel.Number](x []T, lo, hi *tensor.Tensor) []T {
	out := make([]T, len(x))
	copy(out, x)
	if lo != nil {
		l := lo.Data.([]T)[0]
		for i, v := range out {
			if v < l {
				out[i] = l
			}
		}
	}
	if hi != nil {
		h := hi.Data.([]T)[0]
		for i, v := range out {
			if v > h {
				out[i] = h
			}
		}
	}
	return out
}
