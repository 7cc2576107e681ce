package elementwise

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// The arithmetic rows are written out per operator so that the inner loops
// are plain slice loops (no call per element); the four cases are both
// inputs contiguous, a row against a scalar, a scalar against a row, and a
// broadcast scalar pair.

// addRow and divRow run on the portable twins, addRowVec and divRowVec on
// the vector ones (the same bits); rowsFor picks by the context's Vec.
func addRow[T kernel.Number](d, a, b []T, sa, sb int) { addRowOn(vmath.Vec{}, d, a, b, sa, sb) }

func addRowVec[T kernel.Number](d, a, b []T, sa, sb int) {
	addRowOn(vmath.Vector(false), d, a, b, sa, sb)
}

func addRowOn[T kernel.Number](v vmath.Vec, d, a, b []T, sa, sb int) {
	n := len(d)
	switch {
	case sa == 1 && sb == 1:
		if d32, ok := any(d).([]float32); ok {
			// The same float32 additions, eight at a time (a residual).
			v.Add32s(d32, any(a).([]float32)[:n], any(b).([]float32))
			return
		}
		a, b = a[:n], b[:n]
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case sa == 1:
		s, a := b[0], a[:n]
		for i := range d {
			d[i] = a[i] + s
		}
	case sb == 1:
		s, b := a[0], b[:n]
		for i := range d {
			d[i] = s + b[i]
		}
	default:
		v := a[0] + b[0]
		for i := range d {
			d[i] = v
		}
	}
}

func subRow[T kernel.Number](d, a, b []T, sa, sb int) {
	n := len(d)
	switch {
	case sa == 1 && sb == 1:
		a, b = a[:n], b[:n]
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case sa == 1:
		s, a := b[0], a[:n]
		for i := range d {
			d[i] = a[i] - s
		}
	case sb == 1:
		s, b := a[0], b[:n]
		for i := range d {
			d[i] = s - b[i]
		}
	default:
		v := a[0] - b[0]
		for i := range d {
			d[i] = v
		}
	}
}

func mulRow[T kernel.Number](d, a, b []T, sa, sb int) {
	n := len(d)
	switch {
	case sa == 1 && sb == 1:
		a, b = a[:n], b[:n]
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case sa == 1:
		s, a := b[0], a[:n]
		for i := range d {
			d[i] = a[i] * s
		}
	case sb == 1:
		s, b := a[0], b[:n]
		for i := range d {
			d[i] = s * b[i]
		}
	default:
		v := a[0] * b[0]
		for i := range d {
			d[i] = v
		}
	}
}

// divRow divides; integer division truncates toward zero (as in C). The
// caller has checked integer divisors for zero.
func divRow[T kernel.Number](d, a, b []T, sa, sb int) { divRowOn(vmath.Vec{}, d, a, b, sa, sb) }

func divRowVec[T kernel.Number](d, a, b []T, sa, sb int) {
	divRowOn(vmath.Vector(false), d, a, b, sa, sb)
}

func divRowOn[T kernel.Number](v vmath.Vec, d, a, b []T, sa, sb int) {
	n := len(d)
	switch {
	case sa == 1 && sb == 1:
		a, b = a[:n], b[:n]
		for i := range d {
			d[i] = a[i] / b[i]
		}
	case sa == 1:
		s, a := b[0], a[:n]
		if d32, ok := any(d).([]float32); ok {
			// The same correctly rounded divisions, eight at a time (an
			// attention layer's scale).
			v.DivScalar32s(d32, any(a).([]float32), any(s).(float32))
			return
		}
		for i := range d {
			d[i] = a[i] / s
		}
	case sb == 1:
		s, b := a[0], b[:n]
		for i := range d {
			d[i] = s / b[i]
		}
	default:
		v := a[0] / b[0]
		for i := range d {
			d[i] = v
		}
	}
}

// arith runs Add, Sub, Mul or Div.
func arith(op string) kernel.RunFunc {
	return func(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(op, in, 2); err != nil {
			return nil, err
		}
		if err := sameType(op, in[0], in[1]); err != nil {
			return nil, err
		}
		b, err := legacy(n, in[0], in[1])
		if err != nil {
			return nil, err
		}
		out, err := arith2(c.Vec(), op, in[0], b)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{out}, nil
	}
}

func arith2(v vmath.Vec, op string, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	dt := a.DType
	if isHalf(dt) {
		r, err := arith2(v, op, widen(a), widen(b))
		if err != nil {
			return nil, err
		}
		return narrow(r, dt), nil
	}
	shape, err := bshape(a, b)
	if err != nil {
		return nil, err
	}
	var data any
	switch x := a.Data.(type) {
	case []float32:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]float32))
	case []float64:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]float64))
	case []int8:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]int8))
	case []int16:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]int16))
	case []int32:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]int32))
	case []int64:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]int64))
	case []uint8:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]uint8))
	case []uint16:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]uint16))
	case []uint32:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]uint32))
	case []uint64:
		data, err = arithT(v, op, shape, a.Shape, b.Shape, x, b.Data.([]uint64))
	default:
		return nil, fmt.Errorf("elementwise: %s does not support %v", op, dt)
	}
	if err != nil {
		return nil, err
	}
	return wrap(dt, shape, data), nil
}

// rowsFor returns the row function of the portable or of the vector path.
func rowsFor[T kernel.Number](v vmath.Vec, portable, vector rowFn[T, T, T]) rowFn[T, T, T] {
	if v.Portable() {
		return portable
	}
	return vector
}

func arithT[T kernel.Number](v vmath.Vec, op string, out, as, bs []int, a, b []T) ([]T, error) {
	var row rowFn[T, T, T]
	switch op {
	case "Add":
		row = rowsFor(v, addRow[T], addRowVec[T])
	case "Sub":
		row = subRow[T]
	case "Mul":
		row = mulRow[T]
	case "Div":
		if !isFloatT[T]() {
			for _, v := range b {
				if v == 0 {
					return nil, fmt.Errorf("elementwise: Div: integer division by zero")
				}
			}
		}
		row = rowsFor(v, divRow[T], divRowVec[T])
	default:
		return nil, fmt.Errorf("elementwise: unknown arithmetic op %s", op)
	}
	return run2(out, as, bs, a, b, row), nil
}

func isFloatT[T any]() bool {
	var z T
	switch any(z).(type) {
	case float32, float64:
		return true
	}
	return false
}

// runMod implements Mod. With fmod=0 (integers) the remainder takes the
// divisor's sign, as Python's %; with fmod=1 it takes the dividend's, as C's
// fmod. Float inputs with fmod=0 follow the divisor's sign too.
func runMod(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("Mod", in, 2); err != nil {
		return nil, err
	}
	if err := sameType("Mod", in[0], in[1]); err != nil {
		return nil, err
	}
	fmod := n.Int("fmod", 0)
	if fmod != 0 && fmod != 1 {
		return nil, fmt.Errorf("elementwise: Mod: fmod must be 0 or 1, got %d", fmod)
	}
	out, err := mod2(in[0], in[1], fmod == 1)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

func mod2(a, b *tensor.Tensor, fmod bool) (*tensor.Tensor, error) {
	dt := a.DType
	if isHalf(dt) {
		r, err := mod2(widen(a), widen(b), fmod)
		if err != nil {
			return nil, err
		}
		return narrow(r, dt), nil
	}
	shape, err := bshape(a, b)
	if err != nil {
		return nil, err
	}
	var data any
	switch x := a.Data.(type) {
	case []float32:
		data = modFloat(shape, a.Shape, b.Shape, x, b.Data.([]float32), fmod)
	case []float64:
		data = modFloat(shape, a.Shape, b.Shape, x, b.Data.([]float64), fmod)
	case []int8:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]int8), fmod)
	case []int16:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]int16), fmod)
	case []int32:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]int32), fmod)
	case []int64:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]int64), fmod)
	case []uint8:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]uint8), fmod)
	case []uint16:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]uint16), fmod)
	case []uint32:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]uint32), fmod)
	case []uint64:
		data, err = modInt(shape, a.Shape, b.Shape, x, b.Data.([]uint64), fmod)
	default:
		return nil, fmt.Errorf("elementwise: Mod does not support %v", dt)
	}
	if err != nil {
		return nil, err
	}
	return wrap(dt, shape, data), nil
}

// modFloat uses math.Mod, which is exact (so computing float32 in float64
// and rounding back gives the exact float32 remainder).
func modFloat[T kernel.Float](out, as, bs []int, a, b []T, fmod bool) []T {
	return run2(out, as, bs, a, b, elem(func(x, y T) T {
		r := math.Mod(float64(x), float64(y))
		if !fmod && r != 0 && (r < 0) != (y < 0) {
			r += float64(y)
		}
		return T(r)
	}))
}

func modInt[T kernel.Integer](out, as, bs []int, a, b []T, fmod bool) ([]T, error) {
	for _, v := range b {
		if v == 0 {
			return nil, fmt.Errorf("elementwise: Mod: integer division by zero")
		}
	}
	return run2(out, as, bs, a, b, elem(func(x, y T) T {
		r := x % y // Go defines MinInt % -1 as 0: no trap
		if !fmod && r != 0 && (r < 0) != (y < 0) {
			r += y
		}
		return r
	})), nil
}

// runBitShift implements BitShift on unsigned integers; shifting by the
// bit width or more gives 0.
func runBitShift(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("BitShift", in, 2); err != nil {
		return nil, err
	}
	if err := sameType("BitShift", in[0], in[1]); err != nil {
		return nil, err
	}
	var left bool
	switch dir := n.String("direction", ""); dir {
	case "LEFT":
		left = true
	case "RIGHT":
	default:
		return nil, fmt.Errorf("elementwise: BitShift: direction must be LEFT or RIGHT, got %q", dir)
	}
	a, b := in[0], in[1]
	shape, err := bshape(a, b)
	if err != nil {
		return nil, err
	}
	var data any
	switch x := a.Data.(type) {
	case []uint8:
		data = shiftT(shape, a.Shape, b.Shape, x, b.Data.([]uint8), left)
	case []uint16:
		data = shiftT(shape, a.Shape, b.Shape, x, b.Data.([]uint16), left)
	case []uint32:
		data = shiftT(shape, a.Shape, b.Shape, x, b.Data.([]uint32), left)
	case []uint64:
		data = shiftT(shape, a.Shape, b.Shape, x, b.Data.([]uint64), left)
	default:
		return nil, fmt.Errorf("elementwise: BitShift needs an unsigned integer type, got %v", a.DType)
	}
	return []*tensor.Tensor{wrap(a.DType, shape, data)}, nil
}

func shiftT[T uint8 | uint16 | uint32 | uint64](out, as, bs []int, a, b []T, left bool) []T {
	if left {
		return run2(out, as, bs, a, b, elem(func(x, y T) T { return x << y }))
	}
	return run2(out, as, bs, a, b, elem(func(x, y T) T { return x >> y }))
}

// runPow implements Pow. The exponent may have a different numeric type
// (opset 12+); the result has the base's type. Floats are computed with
// math.Pow in float64 and rounded once to the base type: vmath has no pow,
// and Pow is not on a fast path. (math.Pow calls math.Exp and math.Log,
// which have assembly versions on amd64; they agree with the portable code
// to within a float64 ulp, far below float32 rounding, but this is the one
// float32 kernel here whose bit-exactness across platforms rests on that.)
// Integer bases with integer exponents are exact (wrapping on overflow).
func runPow(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("Pow", in, 2); err != nil {
		return nil, err
	}
	a, b := in[0], in[1]
	b, err := legacy(n, a, b)
	if err != nil {
		return nil, err
	}
	shape, err := bshape(a, b)
	if err != nil {
		return nil, err
	}
	if b.DType == tensor.String || b.DType == tensor.Bool {
		return nil, fmt.Errorf("elementwise: Pow: exponent type %v is not numeric", b.DType)
	}
	dt := a.DType
	if isHalf(dt) {
		a = widen(a)
	}
	var data any
	if b.DType.IsInt() && (a.DType == tensor.Int32 || a.DType == tensor.Int64) {
		e, err := b.Int64s()
		if err != nil {
			return nil, err
		}
		switch x := a.Data.(type) {
		case []int32:
			data = run2(shape, a.Shape, b.Shape, x, e, elem(powInt[int32]))
		case []int64:
			data = run2(shape, a.Shape, b.Shape, x, e, elem(powInt[int64]))
		}
	} else {
		e, err := b.Float64s()
		if err != nil {
			return nil, err
		}
		switch x := a.Data.(type) {
		case []float32:
			data = run2(shape, a.Shape, b.Shape, x, e, elem(func(x float32, y float64) float32 {
				return float32(math.Pow(float64(x), y))
			}))
		case []float64:
			data = run2(shape, a.Shape, b.Shape, x, e, elem(math.Pow))
		case []int32:
			data = run2(shape, a.Shape, b.Shape, x, e, elem(func(x int32, y float64) int32 {
				return int32(truncInt(math.Pow(float64(x), y)))
			}))
		case []int64:
			data = run2(shape, a.Shape, b.Shape, x, e, elem(func(x int64, y float64) int64 {
				return truncInt(math.Pow(float64(x), y))
			}))
		default:
			return nil, fmt.Errorf("elementwise: Pow does not support base type %v", dt)
		}
	}
	out := wrap(a.DType, shape, data)
	if isHalf(dt) {
		out = narrow(out, dt)
	}
	return []*tensor.Tensor{out}, nil
}

// powInt is x**y by squaring, wrapping on overflow; negative exponents give
// the truncated reciprocal (0 except for bases 1 and -1).
func powInt[T int32 | int64](x T, y int64) T {
	if y < 0 {
		switch x {
		case 1:
			return 1
		case -1:
			if y%2 == 0 {
				return 1
			}
			return -1
		}
		return 0
	}
	r := T(1)
	for y > 0 {
		if y&1 == 1 {
			r *= x
		}
		x *= x
		y >>= 1
	}
	return r
}

// truncInt converts a float to int64 toward zero; NaN gives 0 and values
// beyond the range saturate, so the result never depends on the platform.
func truncInt(v float64) int64 {
	switch {
	case v != v:
		return 0
	case v >= 9.223372036854775807e18:
		return math.MaxInt64
	case v <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(v)
}

// runPRelu implements PRelu: slope broadcasts to X (unidirectionally).
func runPRelu(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if err := need("PRelu", in, 2); err != nil {
		return nil, err
	}
	x, s := in[0], in[1]
	if err := sameType("PRelu", x, s); err != nil {
		return nil, err
	}
	if n.Version > 0 && n.Version < 7 && len(s.Shape) == 1 && s.Shape[0] > 1 && len(x.Shape) >= 2 && x.Shape[1] == s.Shape[0] {
		// Before opset 7 a 1-D slope holds one value per channel (axis 1).
		cs := make([]int, len(x.Shape)-1)
		for i := range cs {
			cs[i] = 1
		}
		cs[0] = s.Shape[0]
		s = s.Reshaped(cs...)
	}
	shape, err := bshape(x, s)
	if err != nil {
		return nil, err
	}
	if tensor.ShapeString(shape) != tensor.ShapeString(x.Shape) {
		return nil, fmt.Errorf("elementwise: PRelu: slope of shape %v does not broadcast to X's shape %v", s.Shape, x.Shape)
	}
	dt := x.DType
	if isHalf(dt) {
		x, s = widen(x), widen(s)
	}
	var data any
	switch a := x.Data.(type) {
	case []float32:
		data = run2(shape, x.Shape, s.Shape, a, s.Data.([]float32), elem(prelu[float32]))
	case []float64:
		data = run2(shape, x.Shape, s.Shape, a, s.Data.([]float64), elem(prelu[float64]))
	case []int32:
		data = run2(shape, x.Shape, s.Shape, a, s.Data.([]int32), elem(prelu[int32]))
	case []int64:
		data = run2(shape, x.Shape, s.Shape, a, s.Data.([]int64), elem(prelu[int64]))
	case []uint32:
		data = run2(shape, x.Shape, s.Shape, a, s.Data.([]uint32), elem(prelu[uint32]))
	case []uint64:
		data = run2(shape, x.Shape, s.Shape, a, s.Data.([]uint64), elem(prelu[uint64]))
	default:
		return nil, fmt.Errorf("elementwise: PRelu does not support %v", dt)
	}
	out := wrap(x.DType, shape, data)
	if isHalf(dt) {
		out = narrow(out, dt)
	}
	return []*tensor.Tensor{out}, nil
}

func prelu[T kernel.Number](x, s T) T {
	if x < 0 {
		return x * s
	}
	return x
}
