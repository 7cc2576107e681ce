package shape

import (
	"fmt"

	"github.com/vouchml/vouch/tensor"
)

// elems is the type-agnostic view of a tensor's data that data-movement
// kernels use: they compute source offsets as plain ints and let one
// generic implementation per element type move the elements.
type elems interface {
	// take returns a new slice with out[i] = s[idx[i]], or the fill value
	// (the zero value when fill is nil) where idx[i] < 0.
	take(idx []int, fill any) any
	// copyTo copies n elements from s[sOff:] into dst[dOff:]; dst has the
	// same slice type as s.
	copyTo(dst any, dOff, sOff, n int)
	// put sets dst[idx[i]] = s[i] for every i; dst has the same slice type.
	put(dst any, idx []int)
	// at returns element i as a one-element slice of the same type.
	at(i int) any
	// strided returns a new slice of NumElems(shape) elements: the element
	// at multi-index ix is s[base + sum(ix[d]*st[d])] (row-major walk).
	strided(shape, st []int, base int) any
}

type sl[T any] []T

func (s sl[T]) take(idx []int, fill any) any {
	var f T
	if fill != nil {
		f = fill.([]T)[0]
	}
	out := make([]T, len(idx))
	for i, j := range idx {
		if j < 0 {
			out[i] = f
		} else {
			out[i] = s[j]
		}
	}
	return out
}

func (s sl[T]) copyTo(dst any, dOff, sOff, n int) {
	copy(dst.([]T)[dOff:dOff+n], s[sOff:sOff+n])
}

func (s sl[T]) put(dst any, idx []int) {
	d := dst.([]T)
	for i, j := range idx {
		d[j] = s[i]
	}
}

func (s sl[T]) at(i int) any { return []T{s[i]} }

func (s sl[T]) strided(shape, st []int, base int) any {
	n := tensor.NumElems(shape)
	out := make([]T, n)
	if n == 0 {
		return out
	}
	r := len(shape)
	if r == 0 {
		out[0] = s[base]
		return out
	}
	last, lst := shape[r-1], st[r-1]
	ix := make([]int, r)
	off := base
	for p := 0; p < n; p += last {
		o := off
		for j := 0; j < last; j++ {
			out[p+j] = s[o]
			o += lst
		}
		// Advance the outer dimensions' odometer.
		for d := r - 2; d >= 0; d-- {
			ix[d]++
			off += st[d]
			if ix[d] < shape[d] {
				break
			}
			off -= st[d] * shape[d]
			ix[d] = 0
		}
	}
	return out
}

// stridedView builds a tensor of shape whose element at ix is t's element
// at base + sum(ix[d]*st[d]).
func stridedView(t *tensor.Tensor, shape, st []int, base int) *tensor.Tensor {
	return &tensor.Tensor{DType: t.DType, Shape: append([]int{}, shape...), Data: wrap(t.Data).strided(shape, st, base)}
}

// wrap returns the elems view of a tensor's data slice.
func wrap(data any) elems {
	switch d := data.(type) {
	case []float32:
		return sl[float32](d)
	case []float64:
		return sl[float64](d)
	case []tensor.Half:
		return sl[tensor.Half](d)
	case []tensor.BHalf:
		return sl[tensor.BHalf](d)
	case []int8:
		return sl[int8](d)
	case []int16:
		return sl[int16](d)
	case []int32:
		return sl[int32](d)
	case []int64:
		return sl[int64](d)
	case []uint8:
		return sl[uint8](d)
	case []uint16:
		return sl[uint16](d)
	case []uint32:
		return sl[uint32](d)
	case []uint64:
		return sl[uint64](d)
	case []bool:
		return sl[bool](d)
	case []string:
		return sl[string](d)
	}
	panic(fmt.Sprintf("shape: unsupported data %T", data))
}

// gather builds a tensor of shape from t's elements at idx (fill where
// idx < 0; fill is a one-element tensor of t's type or nil for zero).
func gather(t *tensor.Tensor, idx []int, shape []int, fill *tensor.Tensor) *tensor.Tensor {
	var f any
	if fill != nil {
		f = fill.Data
	}
	return &tensor.Tensor{DType: t.DType, Shape: append([]int{}, shape...), Data: wrap(t.Data).take(idx, f)}
}

// checkIn rejects a nil or malformed input with a message naming it.
func checkIn(in []*tensor.Tensor, i int, what string) (*tensor.Tensor, error) {
	if i >= len(in) || in[i] == nil {
		return nil, fmt.Errorf("missing input %d (%s)", i, what)
	}
	if err := in[i].Check(); err != nil {
		return nil, fmt.Errorf("input %d (%s): %w", i, what, err)
	}
	return in[i], nil
}

// intsOf reads an integer tensor (shape, axes, pads, indices...).
func intsOf(t *tensor.Tensor, what string) ([]int64, error) {
	if !t.DType.IsInt() {
		return nil, fmt.Errorf("%s must be an integer tensor, got %v", what, t.DType)
	}
	return t.Int64s()
}

// scalarInt reads a one-element integer tensor.
func scalarInt(t *tensor.Tensor, what string) (int64, error) {
	v, err := intsOf(t, what)
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("%s must have one element, got shape %v", what, t.Shape)
	}
	return v[0], nil
}

// normAxes maps possibly negative axes into [0, rank) and rejects
// duplicates.
func normAxes(axes []int64, rank int) ([]int, error) {
	out := make([]int, len(axes))
	seen := make(map[int]bool, len(axes))
	for i, a := range axes {
		x := a
		if x < 0 {
			x += int64(rank)
		}
		if x < 0 || x >= int64(rank) {
			return nil, fmt.Errorf("axis %d out of range for rank %d", a, rank)
		}
		if seen[int(x)] {
			return nil, fmt.Errorf("axis %d repeated in %v", a, axes)
		}
		seen[int(x)] = true
		out[i] = int(x)
	}
	return out, nil
}

// maxElems bounds the size of tensors that shape-computing ops create from
// values, so that a hostile shape input gives an error instead of an
// out-of-memory crash.
const maxElems = 1 << 34

// checkShape validates a shape computed from input values.
func checkShape(shape []int) error {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d == 0 {
			return nil
		}
	}
	for _, d := range shape {
		if int64(d) > maxElems/n {
			return fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= int64(d)
	}
	return nil
}

// forEachIndex calls f with every multi-index of shape in row-major order
// and its flat offset. idx is reused between calls.
func forEachIndex(shape []int, f func(flat int, idx []int)) {
	n := tensor.NumElems(shape)
	idx := make([]int, len(shape))
	for i := 0; i < n; i++ {
		f(i, idx)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// oneOut wraps a single output.
func oneOut(t *tensor.Tensor) ([]*tensor.Tensor, error) { return []*tensor.Tensor{t}, nil }

// view returns a tensor sharing t's data with another shape. Kernels never
// modify their inputs, so sharing is safe.
func view(t *tensor.Tensor, shape []int) *tensor.Tensor {
	return &tensor.Tensor{DType: t.DType, Shape: append([]int{}, shape...), Data: t.Data}
}
