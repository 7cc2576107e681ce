package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// floatIn returns t's elements as float32 (float32, float16, bfloat16) or
// float64 (float64) data: exactly one of f32 and f64 is non-nil. Half types
// are widened exactly; f32 for a Float32 tensor aliases its data, so callers
// must not write to it.
func floatIn(t *tensor.Tensor, what string) (f32 []float32, f64 []float64, err error) {
	switch d := t.Data.(type) {
	case []float32:
		return d, nil, nil
	case []float64:
		return nil, d, nil
	case []tensor.Half:
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = v.Float32()
		}
		return out, nil, nil
	case []tensor.BHalf:
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = v.Float32()
		}
		return out, nil, nil
	}
	return nil, nil, fmt.Errorf("nn: %s must be a float tensor, got %v", what, t.DType)
}

// f32As converts float32 data of a float32/float16/bfloat16 result back to
// dt, rounding to nearest even.
func f32As(dt tensor.DType, shape []int, v []float32) *tensor.Tensor {
	switch dt {
	case tensor.Float16:
		out := make([]tensor.Half, len(v))
		for i, x := range v {
			out[i] = tensor.ToHalf(x)
		}
		return tensor.From(out, shape...)
	case tensor.BFloat16:
		out := make([]tensor.BHalf, len(v))
		for i, x := range v {
			out[i] = tensor.ToBHalf(x)
		}
		return tensor.From(out, shape...)
	}
	return tensor.From(v, shape...)
}

// isFloatType reports whether dt is one of the float types these kernels
// compute.
func isFloatType(dt tensor.DType) bool {
	switch dt {
	case tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16:
		return true
	}
	return false
}

// need checks that input i is present.
func need(in []*tensor.Tensor, n int, op string) error {
	for i := 0; i < n; i++ {
		if i >= len(in) || in[i] == nil {
			return fmt.Errorf("nn: %s: missing required input %d", op, i)
		}
	}
	return nil
}

// needT is need for shape functions.
func needT(in []ir.InferInput, n int, op string) error {
	for i := 0; i < n; i++ {
		if i >= len(in) || !in[i].Present {
			return fmt.Errorf("nn: %s: missing required input %d", op, i)
		}
	}
	return nil
}

// prod multiplies a shape's dimensions.
func prod(s []int) int {
	p := 1
	for _, d := range s {
		p *= d
	}
	return p
}

// dimsOf returns the type's dims, or nil and false when the rank is unknown.
func dimsOf(t ir.Type) ([]ir.Dim, bool) {
	if !t.RankKnown {
		return nil, false
	}
	return t.Shape, true
}

// unknownDims returns r unknown dimensions.
func unknownDims(r int) []ir.Dim {
	d := make([]ir.Dim, r)
	for i := range d {
		d[i] = ir.Unknown
	}
	return d
}

// sameDT returns an error unless all present inputs share the type of the
// first.
func sameDT(op string, ts ...*tensor.Tensor) error {
	for _, t := range ts[1:] {
		if t != nil && t.DType != ts[0].DType {
			return fmt.Errorf("nn: %s: inputs must share one element type, got %v and %v", op, ts[0].DType, t.DType)
		}
	}
	return nil
}
