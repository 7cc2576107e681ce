package reduce

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// kind names one reduction.
type kind int

const (
	kSum kind = iota
	kSumSquare
	kL1
	kL2
	kLogSum
	kLogSumExp
	kMean
	kProd
	kMax
	kMin
)

var reductions = map[string]kind{
	"ReduceSum":       kSum,
	"ReduceSumSquare": kSumSquare,
	"ReduceL1":        kL1,
	"ReduceL2":        kL2,
	"ReduceLogSum":    kLogSum,
	"ReduceLogSumExp": kLogSumExp,
	"ReduceMean":      kMean,
	"ReduceProd":      kProd,
	"ReduceMax":       kMax,
	"ReduceMin":       kMin,
}

// floatMath is the arithmetic a float kernel of element type T uses:
// vmath's for float32, math's for float64.
type floatMath[T kernel.Float] struct {
	fma  func(a, b, c T) T
	exp  func(T) T
	log  func(T) T
	sqrt func(T) T
}

var f32 = floatMath[float32]{
	fma:  vmath.FMA32,
	exp:  vmath.Exp32,
	log:  vmath.Log32,
	sqrt: func(x float32) float32 { return float32(math.Sqrt(float64(x))) }, // correctly rounded
}

var f64 = floatMath[float64]{fma: math.FMA, exp: math.Exp, log: math.Log, sqrt: math.Sqrt}

func runReduce(name string, k kind) kernel.RunFunc {
	return func(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x := kernel.Input(in, 0)
		if x == nil {
			return nil, fmt.Errorf("reduce: %s needs an input", name)
		}
		if err := checkReduceDType(name, x.DType); err != nil {
			return nil, err
		}
		axes, err := nodeAxes(n, in)
		if err != nil {
			return nil, err
		}
		p, err := planReduce(n, axes, len(x.Shape))
		if err != nil {
			return nil, err
		}
		if p.noop {
			return []*tensor.Tensor{x.Clone()}, nil
		}
		out, err := reduceTensor(k, x, p)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{out}, nil
	}
}

// reduceTensor applies reduction k to x as planned.
func reduceTensor(k kind, x *tensor.Tensor, p reducePlan) (*tensor.Tensor, error) {
	shape := x.Shape
	os := p.outShape(shape)
	var data any
	switch d := x.Data.(type) {
	case []float32:
		data = reduceFloat(k, d, f32, p, shape)
	case []float64:
		data = reduceFloat(k, d, f64, p, shape)
	case []tensor.Half:
		xs := make([]float32, len(d))
		for i, v := range d {
			xs[i] = v.Float32()
		}
		r := reduceFloat(k, xs, f32, p, shape)
		o := make([]tensor.Half, len(r))
		for i, v := range r {
			o[i] = tensor.ToHalf(v)
		}
		data = o
	case []tensor.BHalf:
		xs := make([]float32, len(d))
		for i, v := range d {
			xs[i] = v.Float32()
		}
		r := reduceFloat(k, xs, f32, p, shape)
		o := make([]tensor.BHalf, len(r))
		for i, v := range r {
			o[i] = tensor.ToBHalf(v)
		}
		data = o
	case []int8:
		data = reduceInt(k, d, p, shape)
	case []int16:
		data = reduceInt(k, d, p, shape)
	case []int32:
		data = reduceInt(k, d, p, shape)
	case []int64:
		data = reduceInt(k, d, p, shape)
	case []uint8:
		data = reduceInt(k, d, p, shape)
	case []uint16:
		data = reduceInt(k, d, p, shape)
	case []uint32:
		data = reduceInt(k, d, p, shape)
	case []uint64:
		data = reduceInt(k, d, p, shape)
	case []bool:
		data = reduceBool(k, d, p, shape)
	default:
		return nil, fmt.Errorf("reduce: unsupported element type %v", x.DType)
	}
	return &tensor.Tensor{DType: x.DType, Shape: os, Data: data}, nil
}

// reduceFloat folds x sequentially, in input order, into each output.
func reduceFloat[T kernel.Float](k kind, x []T, m floatMath[T], p reducePlan, shape []int) []T {
	out := make([]T, tensor.NumElems(p.outShape(shape)))
	inf := T(math.Inf(1))
	switch k {
	case kProd:
		fill(out, 1)
	case kMax:
		fill(out, -inf)
	case kMin:
		fill(out, inf)
	case kLogSumExp:
		// First pass: the maximum, for stability.
		mx := make([]T, len(out))
		fill(mx, -inf)
		p.walk(shape, func(i, o int) {
			if v := x[i]; v > mx[o] || v != v {
				mx[o] = v
			}
		})
		p.walk(shape, func(i, o int) {
			if c := mx[o]; c-c == 0 { // finite maximum
				out[o] += m.exp(x[i] - c)
			}
		})
		for o, c := range mx {
			if c-c != 0 { // -inf (empty or all -inf), +inf or NaN
				out[o] = c
				continue
			}
			out[o] = m.log(out[o]) + c
		}
		return out
	}
	switch k {
	case kSum, kMean, kLogSum:
		p.walk(shape, func(i, o int) { out[o] += x[i] })
	case kSumSquare, kL2:
		p.walk(shape, func(i, o int) { out[o] = m.fma(x[i], x[i], out[o]) })
	case kL1:
		p.walk(shape, func(i, o int) { out[o] += T(math.Abs(float64(x[i]))) })
	case kProd:
		p.walk(shape, func(i, o int) { out[o] *= x[i] })
	case kMax:
		p.walk(shape, func(i, o int) {
			if v := x[i]; v > out[o] || v != v {
				out[o] = v
			}
		})
	case kMin:
		p.walk(shape, func(i, o int) {
			if v := x[i]; v < out[o] || v != v {
				out[o] = v
			}
		})
	}
	switch k {
	case kMean:
		cnt := T(p.count(shape))
		for o := range out {
			out[o] /= cnt
		}
	case kL2:
		for o := range out {
			out[o] = m.sqrt(out[o])
		}
	case kLogSum:
		for o := range out {
			out[o] = m.log(out[o])
		}
	}
	return out
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// intLimits returns T's smallest and largest values.
func intLimits[T kernel.Integer]() (lo, hi T) {
	if T(0)-1 > 0 {
		return 0, ^T(0)
	}
	var z T
	bits := int(unsafe.Sizeof(z)) * 8
	for i := 0; i < bits-1; i++ {
		hi = hi<<1 | 1
	}
	return -hi - 1, hi
}

// reduceInt reduces integers in their own type (wrapping); ReduceMean then
// divides, truncating toward zero. L2, LogSum and LogSumExp go through
// float64 and truncate toward zero, as Cast does.
func reduceInt[T kernel.Integer](k kind, x []T, p reducePlan, shape []int) []T {
	switch k {
	case kL2, kLogSum, kLogSumExp:
		xs := make([]float64, len(x))
		for i, v := range x {
			xs[i] = float64(v)
		}
		r := reduceFloat(k, xs, f64, p, shape)
		return tensor.FromFloat64s(tensor.DTypeOf([]T(nil)), []int{len(r)}, r).Data.([]T)
	}
	out := make([]T, tensor.NumElems(p.outShape(shape)))
	lo, hi := intLimits[T]()
	switch k {
	case kSum, kMean:
		p.walk(shape, func(i, o int) { out[o] += x[i] })
	case kSumSquare:
		p.walk(shape, func(i, o int) { out[o] += x[i] * x[i] })
	case kL1:
		p.walk(shape, func(i, o int) {
			v := x[i]
			if v < 0 {
				v = -v
			}
			out[o] += v
		})
	case kProd:
		fill(out, 1)
		p.walk(shape, func(i, o int) { out[o] *= x[i] })
	case kMax:
		fill(out, lo)
		p.walk(shape, func(i, o int) { out[o] = max(out[o], x[i]) })
	case kMin:
		fill(out, hi)
		p.walk(shape, func(i, o int) { out[o] = min(out[o], x[i]) })
	}
	if cnt := p.count(shape); k == kMean && cnt != 0 {
		// Divide in 64 bits: the count need not fit in T.
		unsigned := T(0)-1 > 0
		for o, v := range out {
			if unsigned {
				out[o] = T(uint64(v) / uint64(cnt))
			} else {
				out[o] = T(int64(v) / int64(cnt))
			}
		}
	}
	return out
}

// reduceBool implements ReduceMax (any) and ReduceMin (all) of booleans.
func reduceBool(k kind, x []bool, p reducePlan, shape []int) []bool {
	out := make([]bool, tensor.NumElems(p.outShape(shape)))
	if k == kMin {
		fill(out, true)
		p.walk(shape, func(i, o int) { out[o] = out[o] && x[i] })
		return out
	}
	p.walk(shape, func(i, o int) { out[o] = out[o] || x[i] })
	return out
}
