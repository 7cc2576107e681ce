package elementwise

import (
	"cmp"
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// compare runs Equal, Greater, GreaterOrEqual, Less or LessOrEqual. NaN
// compares false (unequal and unordered), as in IEEE 754.
func compare(op string) kernel.RunFunc {
	return func(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(op, in, 2); err != nil {
			return nil, err
		}
		a, b := in[0], in[1]
		if err := sameType(op, a, b); err != nil {
			return nil, err
		}
		b, err := legacy(n, a, b)
		if err != nil {
			return nil, err
		}
		shape, err := bshape(a, b)
		if err != nil {
			return nil, err
		}
		if isHalf(a.DType) {
			a, b = widen(a), widen(b)
		}
		var data []bool
		switch x := a.Data.(type) {
		case []float32:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]float32))
		case []float64:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]float64))
		case []int8:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]int8))
		case []int16:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]int16))
		case []int32:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]int32))
		case []int64:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]int64))
		case []uint8:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]uint8))
		case []uint16:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]uint16))
		case []uint32:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]uint32))
		case []uint64:
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]uint64))
		case []string:
			if op != "Equal" {
				return nil, fmt.Errorf("elementwise: %s does not support string", op)
			}
			data, err = cmpT(op, shape, a.Shape, b.Shape, x, b.Data.([]string))
		case []bool:
			if op != "Equal" {
				return nil, fmt.Errorf("elementwise: %s does not support bool", op)
			}
			data = run2(shape, a.Shape, b.Shape, x, b.Data.([]bool), elem(func(x, y bool) bool { return x == y }))
		default:
			return nil, fmt.Errorf("elementwise: %s does not support %v", op, a.DType)
		}
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{wrap(tensor.Bool, shape, data)}, nil
	}
}

func cmpT[T cmp.Ordered](op string, out, as, bs []int, a, b []T) ([]bool, error) {
	var f func(x, y T) bool
	switch op {
	case "Equal":
		f = func(x, y T) bool { return x == y }
	case "Greater":
		f = func(x, y T) bool { return x > y }
	case "GreaterOrEqual":
		f = func(x, y T) bool { return x >= y }
	case "Less":
		f = func(x, y T) bool { return x < y }
	case "LessOrEqual":
		f = func(x, y T) bool { return x <= y }
	default:
		return nil, fmt.Errorf("elementwise: unknown comparison %s", op)
	}
	return run2(out, as, bs, a, b, elem(f)), nil
}

// logic runs And, Or or Xor on bool tensors.
func logic(op string) kernel.RunFunc {
	return func(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(op, in, 2); err != nil {
			return nil, err
		}
		a, b := in[0], in[1]
		x, ok1 := a.Data.([]bool)
		y, ok2 := b.Data.([]bool)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("elementwise: %s needs bool inputs, got %v and %v", op, a.DType, b.DType)
		}
		b, err := legacy(n, a, b)
		if err != nil {
			return nil, err
		}
		shape, err := bshape(a, b)
		if err != nil {
			return nil, err
		}
		var f func(x, y bool) bool
		switch op {
		case "And":
			f = func(x, y bool) bool { return x && y }
		case "Or":
			f = func(x, y bool) bool { return x || y }
		default:
			f = func(x, y bool) bool { return x != y }
		}
		return []*tensor.Tensor{wrap(tensor.Bool, shape, run2(shape, a.Shape, b.Shape, x, y, elem(f)))}, nil
	}
}

func runNot(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("Not", in, 1); err != nil {
		return nil, err
	}
	x, ok := in[0].Data.([]bool)
	if !ok {
		return nil, fmt.Errorf("elementwise: Not needs a bool input, got %v", in[0].DType)
	}
	out := make([]bool, len(x))
	for i, v := range x {
		out[i] = !v
	}
	return []*tensor.Tensor{wrap(tensor.Bool, in[0].Shape, out)}, nil
}

// runWhere implements Where(condition, X, Y) with three-way broadcasting.
func runWhere(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("Where", in, 3); err != nil {
		return nil, err
	}
	c, x, y := in[0], in[1], in[2]
	cond, ok := c.Data.([]bool)
	if !ok {
		return nil, fmt.Errorf("elementwise: Where: condition must be bool, got %v", c.DType)
	}
	if err := sameType("Where", x, y); err != nil {
		return nil, err
	}
	shape, err := bshape(c, x, y)
	if err != nil {
		return nil, err
	}
	p := newPlan(shape, c.Shape, x.Shape, y.Shape)
	var data any
	switch xv := x.Data.(type) {
	case []float32:
		data = where(p, cond, xv, y.Data.([]float32))
	case []float64:
		data = where(p, cond, xv, y.Data.([]float64))
	case []tensor.Half:
		data = where(p, cond, xv, y.Data.([]tensor.Half))
	case []tensor.BHalf:
		data = where(p, cond, xv, y.Data.([]tensor.BHalf))
	case []int8:
		data = where(p, cond, xv, y.Data.([]int8))
	case []int16:
		data = where(p, cond, xv, y.Data.([]int16))
	case []int32:
		data = where(p, cond, xv, y.Data.([]int32))
	case []int64:
		data = where(p, cond, xv, y.Data.([]int64))
	case []uint8:
		data = where(p, cond, xv, y.Data.([]uint8))
	case []uint16:
		data = where(p, cond, xv, y.Data.([]uint16))
	case []uint32:
		data = where(p, cond, xv, y.Data.([]uint32))
	case []uint64:
		data = where(p, cond, xv, y.Data.([]uint64))
	case []bool:
		data = where(p, cond, xv, y.Data.([]bool))
	case []string:
		data = where(p, cond, xv, y.Data.([]string))
	default:
		return nil, fmt.Errorf("elementwise: Where does not support %v", x.DType)
	}
	return []*tensor.Tensor{wrap(x.DType, shape, data)}, nil
}

func where[T any](p *plan, c []bool, x, y []T) []T {
	d := make([]T, p.n)
	sc, sx, sy := p.in[0], p.in[1], p.in[2]
	p.rows(func(o int, offs []int) {
		row := d[o : o+p.inner]
		cr, xr, yr := c[offs[0]:], x[offs[1]:], y[offs[2]:]
		for i := range row {
			if cr[i*sc] {
				row[i] = xr[i*sx]
			} else {
				row[i] = yr[i*sy]
			}
		}
	})
	return d
}
