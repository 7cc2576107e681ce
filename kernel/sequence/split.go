package sequence

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// copyBlock copies n elements from src[so:] to dst[do:]; dst and src are
// typed slices of the same element type.
func copyBlock(dst any, do int, src any, so, n int) error {
	switch d := dst.(type) {
	case []float32:
		return copyT(d, do, src, so, n)
	case []float64:
		return copyT(d, do, src, so, n)
	case []tensor.Half:
		return copyT(d, do, src, so, n)
	case []tensor.BHalf:
		return copyT(d, do, src, so, n)
	case []int8:
		return copyT(d, do, src, so, n)
	case []int16:
		return copyT(d, do, src, so, n)
	case []int32:
		return copyT(d, do, src, so, n)
	case []int64:
		return copyT(d, do, src, so, n)
	case []uint8:
		return copyT(d, do, src, so, n)
	case []uint16:
		return copyT(d, do, src, so, n)
	case []uint32:
		return copyT(d, do, src, so, n)
	case []uint64:
		return copyT(d, do, src, so, n)
	case []bool:
		return copyT(d, do, src, so, n)
	case []string:
		return copyT(d, do, src, so, n)
	}
	return fmt.Errorf("unsupported element data %T", dst)
}

func copyT[T any](d []T, do int, src any, so, n int) error {
	s, ok := src.([]T)
	if !ok {
		return fmt.Errorf("element data %T does not match %T", src, d)
	}
	if do+n > len(d) || so+n > len(s) {
		return fmt.Errorf("element data is shorter than its shape says")
	}
	copy(d[do:do+n], s[so:so+n])
	return nil
}

// SplitToSequence.

// chunkSizes returns the sizes of the pieces along an axis of length dim.
func chunkSizes(split *tensor.Tensor, dim int) ([]int, error) {
	if split == nil {
		sizes := make([]int, dim)
		for i := range sizes {
			sizes[i] = 1
		}
		return sizes, nil
	}
	if split.DType != tensor.Int32 && split.DType != tensor.Int64 {
		return nil, fmt.Errorf("split must be int32 or int64, got %v", split.DType)
	}
	v, err := split.Int64s()
	if err != nil {
		return nil, err
	}
	switch split.Rank() {
	case 0:
		k := v[0]
		if k <= 0 {
			return nil, fmt.Errorf("split size must be positive, got %d", k)
		}
		var sizes []int
		for left := int64(dim); left > 0; left -= k {
			sizes = append(sizes, int(min(k, left)))
		}
		return sizes, nil
	case 1:
		for i, s := range v {
			if s < 0 {
				return nil, fmt.Errorf("split[%d] is negative (%d)", i, s)
			}
		}
		sizes := make([]int, len(v))
		var sum int64
		for i, s := range v {
			sum += s
			if sum > int64(dim) {
				break
			}
			sizes[i] = int(s)
		}
		if sum != int64(dim) {
			return nil, fmt.Errorf("split %v sums to %d, the axis has length %d", v, sum, dim)
		}
		return sizes, nil
	}
	return nil, fmt.Errorf("split must be a scalar or 1-D, got shape %v", split.Shape)
}

func runSplitToSequence(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := tensorIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if x.Rank() == 0 {
		return nil, fmt.Errorf("input must have rank at least 1, got a scalar")
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
	if err != nil {
		return nil, err
	}
	split := kernel.Input(in, 1)
	if split != nil && split.DType == tensor.Sequence {
		return nil, fmt.Errorf("split must be a tensor, got a sequence")
	}
	sizes, err := chunkSizes(split, x.Shape[axis])
	if err != nil {
		return nil, err
	}
	squeeze := split == nil && n.Int("keepdims", 1) == 0
	outer := tensor.NumElems(x.Shape[:axis])
	inner := tensor.NumElems(x.Shape[axis+1:])
	row := x.Shape[axis] * inner
	elems := make([]*tensor.Tensor, len(sizes))
	off := 0
	for i, s := range sizes {
		shape := append([]int{}, x.Shape...)
		shape[axis] = s
		t := tensor.New(x.DType, shape...)
		blk := s * inner
		for o := 0; o < outer; o++ {
			if err := copyBlock(t.Data, o*blk, x.Data, o*row+off, blk); err != nil {
				return nil, err
			}
		}
		off += blk
		if squeeze {
			t.Shape = append(shape[:axis:axis], shape[axis+1:]...)
		}
		elems[i] = t
	}
	return one(tensor.NewSequence(elems))
}

func inferSplitToSequence(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) == 0 || !in[0].Present {
		return nil, fmt.Errorf("missing input 0 (input)")
	}
	x := in[0].Type
	if x.DType == tensor.Sequence {
		return nil, fmt.Errorf("input 0 must be a tensor, got a sequence")
	}
	if x.RankKnown {
		if len(x.Shape) == 0 {
			return nil, fmt.Errorf("input must have rank at least 1, got a scalar")
		}
		if _, err := kernel.NormAxis(n.Int("axis", 0), len(x.Shape)); err != nil {
			return nil, err
		}
	}
	if len(in) > 1 && in[1].Present {
		s := in[1].Type
		if s.DType != tensor.Int32 && s.DType != tensor.Int64 && s.DType != tensor.Undefined {
			return nil, fmt.Errorf("split must be int32 or int64, got %v", s.DType)
		}
		if s.RankKnown && len(s.Shape) > 1 {
			return nil, fmt.Errorf("split must be a scalar or 1-D, got rank %d", len(s.Shape))
		}
	}
	return []ir.Type{seqType}, nil
}

// ConcatFromSequence.

func runConcatFromSequence(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	elems, err := seqIn(in, 0, "input_sequence")
	if err != nil {
		return nil, err
	}
	if !n.Has("axis") {
		return nil, fmt.Errorf("attribute axis is required")
	}
	if len(elems) == 0 {
		return nil, fmt.Errorf("cannot concatenate an empty sequence")
	}
	nv := n.Int("new_axis", 0)
	if nv != 0 && nv != 1 {
		return nil, fmt.Errorf("new_axis must be 0 or 1, got %d", nv)
	}
	newAxis := nv == 1
	first := elems[0]
	rank := first.Rank()
	if newAxis {
		rank++
	}
	if rank == 0 {
		return nil, fmt.Errorf("cannot concatenate scalars without new_axis")
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), rank)
	if err != nil {
		return nil, err
	}
	// With new_axis, each element is viewed with a dimension of 1 inserted
	// at axis, and the views are concatenated.
	view := func(t *tensor.Tensor) []int {
		if !newAxis {
			return t.Shape
		}
		s := make([]int, 0, rank)
		s = append(s, t.Shape[:axis]...)
		s = append(s, 1)
		return append(s, t.Shape[axis:]...)
	}
	out := append([]int{}, view(first)...)
	out[axis] = 0
	for i, e := range elems {
		if e.DType != first.DType {
			return nil, fmt.Errorf("element %d is %v, element 0 is %v", i, e.DType, first.DType)
		}
		if e.Rank() != first.Rank() {
			return nil, fmt.Errorf("element %d has shape %v, element 0 has shape %v (ranks differ)", i, e.Shape, first.Shape)
		}
		s := view(e)
		for d := range s {
			if d != axis && s[d] != out[d] {
				return nil, fmt.Errorf("element %d has shape %v, element 0 has shape %v (dimension %d differs)", i, e.Shape, first.Shape, d)
			}
		}
		out[axis] += s[axis]
	}
	res := tensor.New(first.DType, out...)
	outer := tensor.NumElems(out[:axis])
	inner := tensor.NumElems(out[axis+1:])
	rowOut := out[axis] * inner
	off := 0
	for _, e := range elems {
		blk := view(e)[axis] * inner
		for o := 0; o < outer; o++ {
			if err := copyBlock(res.Data, o*rowOut+off, e.Data, o*blk, blk); err != nil {
				return nil, err
			}
		}
		off += blk
	}
	return one(res)
}

func inferConcatFromSequence(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := inferSeqIn(in, 0); err != nil {
		return nil, err
	}
	if !n.Has("axis") {
		return nil, fmt.Errorf("attribute axis is required")
	}
	if nv := n.Int("new_axis", 0); nv != 0 && nv != 1 {
		return nil, fmt.Errorf("new_axis must be 0 or 1, got %d", nv)
	}
	return []ir.Type{{}}, nil
}
