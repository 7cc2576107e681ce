package kernel

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// Number is every Go element type that arithmetic kernels are generic over.
type Number interface {
	~float32 | ~float64 | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Integer is every Go integer element type.
type Integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Float is the native Go float element types.
type Float interface{ ~float32 | ~float64 }

// BroadcastShapes returns the multidirectional (NumPy) broadcast of shapes.
func BroadcastShapes(shapes ...[]int) ([]int, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			switch {
			case d == out[off+i]:
			case out[off+i] == 1:
				out[off+i] = d
			case d == 1:
			default:
				return nil, fmt.Errorf("shapes %v are not broadcastable (dimension %d: %d vs %d)", shapes, off+i, out[off+i], d)
			}
		}
	}
	return out, nil
}

// BroadcastStrides returns, for each dimension of out, the stride to step
// in a tensor of shape in that is broadcast to out (0 where broadcast).
func BroadcastStrides(in, out []int) []int {
	st := make([]int, len(out))
	inSt := tensor.Strides(in)
	off := len(out) - len(in)
	for i := range in {
		if in[i] != 1 {
			st[off+i] = inSt[i]
		}
	}
	return st
}

// Indexer walks the elements of an output shape in row-major order and
// tracks the matching flat offset in each broadcast input.
type Indexer struct {
	shape   []int
	strides [][]int
	idx     []int
	Offs    []int // current offset in each input
}

// NewIndexer returns an Indexer over out for inputs of the given shapes.
func NewIndexer(out []int, ins ...[]int) *Indexer {
	it := &Indexer{shape: out, idx: make([]int, len(out)), Offs: make([]int, len(ins))}
	for _, s := range ins {
		it.strides = append(it.strides, BroadcastStrides(s, out))
	}
	return it
}

// Next advances to the next output element.
func (it *Indexer) Next() {
	for d := len(it.shape) - 1; d >= 0; d-- {
		it.idx[d]++
		for k := range it.Offs {
			it.Offs[k] += it.strides[k][d]
		}
		if it.idx[d] < it.shape[d] {
			return
		}
		for k := range it.Offs {
			it.Offs[k] -= it.strides[k][d] * it.shape[d]
		}
		it.idx[d] = 0
	}
}

// Broadcast2 calls f(i, ia, ib) for every output element i of the broadcast
// of shapes a and b, with the matching offsets into a and b.
func Broadcast2(out, a, b []int, f func(i, ia, ib int)) {
	n := tensor.NumElems(out)
	if equalShape(a, out) && equalShape(b, out) {
		for i := 0; i < n; i++ {
			f(i, i, i)
		}
		return
	}
	it := NewIndexer(out, a, b)
	for i := 0; i < n; i++ {
		f(i, it.Offs[0], it.Offs[1])
		it.Next()
	}
}

func equalShape(a, b []int) bool {
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

// NormAxis maps a possibly negative axis into [0, rank).
func NormAxis(axis int64, rank int) (int, error) {
	a := axis
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a >= int64(rank) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", axis, rank)
	}
	return int(a), nil
}

// Ints converts an int64 slice to int.
func Ints(v []int64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// InferSame is a shape function whose single output has input i's type.
func InferSame(i int) InferFunc {
	return func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
		if i >= len(in) || !in[i].Present {
			return nil, fmt.Errorf("missing input %d", i)
		}
		return []ir.Type{in[i].Type}, nil
	}
}

// InferBroadcast returns the broadcast of the present inputs' shapes with
// element type dt (Undefined: the first input's type).
func InferBroadcast(dt tensor.DType, in []ir.InferInput) (ir.Type, error) {
	out := ir.Type{DType: dt, RankKnown: true}
	if dt == tensor.Undefined && len(in) > 0 {
		out.DType = in[0].Type.DType
	}
	rank := 0
	for _, x := range in {
		if !x.Present {
			continue
		}
		if !x.Type.RankKnown {
			return ir.Type{DType: out.DType}, nil
		}
		rank = max(rank, len(x.Type.Shape))
	}
	out.Shape = make([]ir.Dim, rank)
	for i := range out.Shape {
		out.Shape[i] = ir.Fixed(1)
	}
	for _, x := range in {
		if !x.Present {
			continue
		}
		off := rank - len(x.Type.Shape)
		for i, d := range x.Type.Shape {
			cur := out.Shape[off+i]
			switch {
			case d.Known() && d.Value == 1:
			case cur.Known() && cur.Value == 1:
				out.Shape[off+i] = d
			case d.Known() && cur.Known():
				if d.Value != cur.Value {
					return ir.Type{}, fmt.Errorf("shapes are not broadcastable at dimension %d: %v vs %v", off+i, cur, d)
				}
			case d.Param != "" && d == cur:
			case d.Known():
				out.Shape[off+i] = d
			case cur.Known():
			default:
				out.Shape[off+i] = ir.Unknown
			}
		}
	}
	return out, nil
}

// ConstInts returns a constant integer input's values, or ok false when the
// input is absent or not constant.
func ConstInts(x ir.InferInput) ([]int64, bool) {
	if !x.Present || x.Const == nil {
		return nil, false
	}
	v, err := x.Const.Int64s()
	if err != nil {
		return nil, false
	}
	return v, true
}

// UnknownRank is a Type of the given element type with unknown rank.
func UnknownRank(dt tensor.DType) ir.Type { return ir.Type{DType: dt} }

// Input returns in[i], or nil when i is past the end.
func Input(in []*tensor.Tensor, i int) *tensor.Tensor {
	if i < len(in) {
		return in[i]
	}
	return nil
}
