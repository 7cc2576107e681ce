package tensor

import (
	"fmt"
	"math"
	"strconv"
)

// Float64s returns t's elements converted to float64 (bools as 0/1). It
// returns an error for strings.
func (t *Tensor) Float64s() ([]float64, error) {
	out := make([]float64, t.Len())
	switch d := t.Data.(type) {
	case []float64:
		copy(out, d)
	case []float32:
		for i, v := range d {
			out[i] = float64(v)
		}
	case []Half:
		for i, v := range d {
			out[i] = float64(v.Float32())
		}
	case []BHalf:
		for i, v := range d {
			out[i] = float64(v.Float32())
		}
	case []int8:
		convInto(out, d)
	case []int16:
		convInto(out, d)
	case []int32:
		convInto(out, d)
	case []int64:
		convInto(out, d)
	case []uint8:
		convInto(out, d)
	case []uint16:
		convInto(out, d)
	case []uint32:
		convInto(out, d)
	case []uint64:
		convInto(out, d)
	case []bool:
		for i, v := range d {
			if v {
				out[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("tensor: cannot read %v as numbers", t.DType)
	}
	return out, nil
}

func convInto[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64](out []float64, in []T) {
	for i, v := range in {
		out[i] = float64(v)
	}
}

// Int64s returns t's elements as int64 for an integer or bool tensor (used
// for shape-like inputs: axes, pads, indices). Floats are refused.
func (t *Tensor) Int64s() ([]int64, error) {
	out := make([]int64, t.Len())
	switch d := t.Data.(type) {
	case []int64:
		copy(out, d)
	case []int32:
		intsInto(out, d)
	case []int16:
		intsInto(out, d)
	case []int8:
		intsInto(out, d)
	case []uint8:
		intsInto(out, d)
	case []uint16:
		intsInto(out, d)
	case []uint32:
		intsInto(out, d)
	case []uint64:
		intsInto(out, d)
	case []bool:
		for i, v := range d {
			if v {
				out[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("tensor: expected an integer tensor, got %v", t.DType)
	}
	return out, nil
}

func intsInto[T int8 | int16 | int32 | uint8 | uint16 | uint32 | uint64](out []int64, in []T) {
	for i, v := range in {
		out[i] = int64(v)
	}
}

// FromFloat64s builds a tensor of type dt from float64 values, converting
// each as ONNX's Cast does from double: floats round to nearest, integers
// truncate toward zero (saturating is not ONNX semantics; out-of-range is
// implementation-defined and here wraps like a Go conversion of int64), bools
// are v != 0, strings use the shortest representation.
func FromFloat64s(dt DType, shape []int, vals []float64) *Tensor {
	t := New(dt, shape...)
	switch d := t.Data.(type) {
	case []float64:
		copy(d, vals)
	case []float32:
		for i, v := range vals {
			d[i] = float32(v)
		}
	case []Half:
		for i, v := range vals {
			d[i] = ToHalf(float32(v))
		}
	case []BHalf:
		for i, v := range vals {
			d[i] = ToBHalf(float32(v))
		}
	case []int8:
		for i, v := range vals {
			d[i] = int8(toInt64(v))
		}
	case []int16:
		for i, v := range vals {
			d[i] = int16(toInt64(v))
		}
	case []int32:
		for i, v := range vals {
			d[i] = int32(toInt64(v))
		}
	case []int64:
		for i, v := range vals {
			d[i] = toInt64(v)
		}
	case []uint8:
		for i, v := range vals {
			d[i] = uint8(toInt64(v))
		}
	case []uint16:
		for i, v := range vals {
			d[i] = uint16(toInt64(v))
		}
	case []uint32:
		for i, v := range vals {
			d[i] = uint32(toInt64(v))
		}
	case []uint64:
		for i, v := range vals {
			if v >= 1<<63 {
				d[i] = uint64(v)
			} else {
				d[i] = uint64(toInt64(v))
			}
		}
	case []bool:
		for i, v := range vals {
			d[i] = v != 0
		}
	case []string:
		for i, v := range vals {
			d[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return t
}

func toInt64(v float64) int64 {
	if math.IsNaN(v) {
		return 0
	}
	if v >= 9.223372036854775807e18 {
		return math.MaxInt64
	}
	if v <= -9.223372036854775808e18 {
		return math.MinInt64
	}
	return int64(v)
}

// FromInt64s builds an Int64 tensor.
func FromInt64s(shape []int, vals []int64) *Tensor {
	return From(append([]int64{}, vals...), shape...)
}
