package elementwise

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// plan is the iteration of a broadcast over k inputs, as an outer loop of
// rows: the dimensions of size 1 are dropped and adjacent dimensions that
// every input walks the same way are merged, so the inner row is as long
// as possible. Within a row each input steps by 0 (broadcast) or 1
// (contiguous), which lets row kernels be plain loops over slices.
type plan struct {
	n     int     // output elements
	inner int     // elements per row
	dims  []int   // outer dimensions, outermost first
	st    [][]int // st[d][k]: input k's stride in outer dimension d
	in    []int   // in[k]: input k's stride within a row (0 or 1)
}

// newPlan plans the broadcast of ins to out (out must be their broadcast).
func newPlan(out []int, ins ...[]int) *plan {
	p := &plan{n: tensor.NumElems(out), inner: 1, in: make([]int, len(ins))}
	strides := make([][]int, len(ins))
	for k, s := range ins {
		strides[k] = kernel.BroadcastStrides(s, out)
	}
	type dim struct {
		size int
		st   []int
	}
	var ds []dim // innermost first
	for d := len(out) - 1; d >= 0; d-- {
		if out[d] == 1 {
			continue
		}
		st := make([]int, len(ins))
		for k := range ins {
			st[k] = strides[k][d]
		}
		if len(ds) > 0 {
			last := &ds[len(ds)-1]
			merge := true
			for k := range st {
				if st[k] != last.st[k]*last.size {
					merge = false
					break
				}
			}
			if merge {
				last.size *= out[d]
				continue
			}
		}
		ds = append(ds, dim{out[d], st})
	}
	if len(ds) == 0 {
		return p
	}
	p.inner = ds[0].size
	copy(p.in, ds[0].st)
	for i := len(ds) - 1; i >= 1; i-- {
		p.dims = append(p.dims, ds[i].size)
		p.st = append(p.st, ds[i].st)
	}
	return p
}

// rows calls f for each row with the row's output offset and each input's
// offset. The closure is called once per row, never per element.
func (p *plan) rows(f func(o int, offs []int)) {
	if p.n == 0 || p.inner == 0 {
		return
	}
	idx := make([]int, len(p.dims))
	offs := make([]int, len(p.in))
	for o := 0; o < p.n; o += p.inner {
		f(o, offs)
		for d := len(p.dims) - 1; d >= 0; d-- {
			idx[d]++
			for k := range offs {
				offs[k] += p.st[d][k]
			}
			if idx[d] < p.dims[d] {
				break
			}
			for k := range offs {
				offs[k] -= p.st[d][k] * p.dims[d]
			}
			idx[d] = 0
		}
	}
}

// rowFn computes one row: d[i] = op(a[i*sa], b[i*sb]) for i < len(d).
type rowFn[A, B, R any] func(d []R, a []A, b []B, sa, sb int)

// run2 broadcasts a and b (of shapes as, bs) into a new slice of out's size.
func run2[A, B, R any](out, as, bs []int, a []A, b []B, row rowFn[A, B, R]) []R {
	p := newPlan(out, as, bs)
	d := make([]R, p.n)
	p.rows(func(o int, offs []int) {
		row(d[o:o+p.inner], a[offs[0]:], b[offs[1]:], p.in[0], p.in[1])
	})
	return d
}

// elem lifts an element function to a row. It is for the operators off the
// fast path; the hot arithmetic has hand-written rows.
func elem[A, B, R any](f func(A, B) R) rowFn[A, B, R] {
	return func(d []R, a []A, b []B, sa, sb int) {
		for i := range d {
			d[i] = f(a[i*sa], b[i*sb])
		}
	}
}

// bshape returns the broadcast of the tensors' shapes.
func bshape(ts ...*tensor.Tensor) ([]int, error) {
	shapes := make([][]int, len(ts))
	for i, t := range ts {
		shapes[i] = t.Shape
	}
	s, err := kernel.BroadcastShapes(shapes...)
	if err != nil {
		return nil, fmt.Errorf("elementwise: %w", err)
	}
	return s, nil
}

// sameType checks that every input has the dtype of the first.
func sameType(op string, ts ...*tensor.Tensor) error {
	for i, t := range ts {
		if t == nil {
			return fmt.Errorf("elementwise: %s: input %d is missing", op, i)
		}
		if t.DType != ts[0].DType {
			return fmt.Errorf("elementwise: %s: input %d is %v, input 0 is %v; they must match", op, i, t.DType, ts[0].DType)
		}
	}
	return nil
}

// need checks that inputs 0..k-1 are present.
func need(op string, in []*tensor.Tensor, k int) error {
	if len(in) < k {
		return fmt.Errorf("elementwise: %s needs %d inputs, got %d", op, k, len(in))
	}
	for i := 0; i < k; i++ {
		if in[i] == nil {
			return fmt.Errorf("elementwise: %s: input %d is missing", op, i)
		}
	}
	return nil
}

func isHalf(dt tensor.DType) bool { return dt == tensor.Float16 || dt == tensor.BFloat16 }

// widen returns a float32 copy of a float16 or bfloat16 tensor (exact), and
// any other tensor unchanged. Kernels compute 16-bit floats in float32 and
// round each result once with narrow.
func widen(t *tensor.Tensor) *tensor.Tensor {
	switch d := t.Data.(type) {
	case []tensor.Half:
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = v.Float32()
		}
		return &tensor.Tensor{DType: tensor.Float32, Shape: t.Shape, Data: out}
	case []tensor.BHalf:
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = v.Float32()
		}
		return &tensor.Tensor{DType: tensor.Float32, Shape: t.Shape, Data: out}
	}
	return t
}

// narrow rounds a float32 tensor to dt (float16 or bfloat16, ties to even);
// other dtypes return t unchanged.
func narrow(t *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	d, ok := t.Data.([]float32)
	if !ok {
		return t
	}
	switch dt {
	case tensor.Float16:
		out := make([]tensor.Half, len(d))
		for i, v := range d {
			out[i] = tensor.ToHalf(v)
		}
		return &tensor.Tensor{DType: dt, Shape: t.Shape, Data: out}
	case tensor.BFloat16:
		out := make([]tensor.BHalf, len(d))
		for i, v := range d {
			out[i] = tensor.ToBHalf(v)
		}
		return &tensor.Tensor{DType: dt, Shape: t.Shape, Data: out}
	}
	return t
}

func wrap(dt tensor.DType, shape []int, data any) *tensor.Tensor {
	return &tensor.Tensor{DType: dt, Shape: append([]int{}, shape...), Data: data}
}

// legacy applies the broadcasting of opsets before 7 (attributes broadcast
// and axis): with broadcast=1, B's shape matches a run of A's dimensions
// starting at axis (default: A's trailing dimensions) and is reshaped to
// A's rank so that the multidirectional rules give the same result.
func legacy(n *ir.Node, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	if !isLegacy(n) {
		return b, nil
	}
	ra, rb := len(a.Shape), len(b.Shape)
	axis := n.Int("axis", int64(ra-rb))
	if axis < 0 {
		axis += int64(ra)
	}
	if axis < 0 || int(axis)+rb > ra {
		return nil, fmt.Errorf("elementwise: %s: cannot broadcast B of shape %v into A of shape %v at axis %d", n.OpType, b.Shape, a.Shape, n.Int("axis", int64(ra-rb)))
	}
	shape := make([]int, ra)
	for i := range shape {
		shape[i] = 1
	}
	for i, d := range b.Shape {
		if d != 1 && d != a.Shape[int(axis)+i] {
			return nil, fmt.Errorf("elementwise: %s: B of shape %v does not match A of shape %v at axis %d", n.OpType, b.Shape, a.Shape, axis)
		}
		shape[int(axis)+i] = d
	}
	return b.Reshaped(shape...), nil
}

func isLegacy(n *ir.Node) bool {
	return n.Version > 0 && n.Version < 7 && n.Int("broadcast", 0) != 0
}
