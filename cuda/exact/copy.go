package exact

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/tensor"
)

// MaxCopyRank is the most axes one strided copy walks.
const MaxCopyRank = 6

// Copy is a strided copy of float32 values, the data movement of
// Transpose, Slice, Split, Concat and Gather (exact by construction: no
// arithmetic, every value moved with its bits): for every index
// (i_0, ..., i_r-1) of Dims, y[Y0 + Σ i_d·YS[d]] = x[X0 + Σ i_d·XS[d]].
// Offsets and strides are in floats; XS may be negative (a Slice with a
// negative step).
type Copy struct {
	Dims, XS, YS []int
	X0, Y0       int
}

// N is the number of values the copy moves.
func (c Copy) N() int {
	n := 1
	for _, d := range c.Dims {
		n *= d
	}
	return n
}

// check bounds the copy's geometry to what the kernel takes (int32 fields)
// and to the sizes of x and y (xn, yn floats): every index it reads and
// writes is inside them.
func (c Copy) check(xn, yn int) error {
	r := len(c.Dims)
	if r > MaxCopyRank || len(c.XS) != r || len(c.YS) != r {
		return fmt.Errorf("exact: a copy of rank %d (strides %d, %d; at most %d)", r, len(c.XS), len(c.YS), MaxCopyRank)
	}
	if c.N() == 0 {
		return nil
	}
	xlo, xhi, ylo, yhi := c.X0, c.X0, c.Y0, c.Y0
	for d, n := range c.Dims {
		if n < 0 || n > math.MaxInt32 || abs(c.XS[d]) > math.MaxInt32 || abs(c.YS[d]) > math.MaxInt32 {
			return fmt.Errorf("exact: copy dimension %d of %d, strides %d, %d out of range", d, n, c.XS[d], c.YS[d])
		}
		for _, p := range []struct {
			s      int
			lo, hi *int
		}{{c.XS[d], &xlo, &xhi}, {c.YS[d], &ylo, &yhi}} {
			if p.s < 0 {
				*p.lo += (n - 1) * p.s
			} else {
				*p.hi += (n - 1) * p.s
			}
		}
	}
	if xlo < 0 || xhi >= xn || ylo < 0 || yhi >= yn {
		return fmt.Errorf("exact: a copy reading [%d, %d] of %d values, writing [%d, %d] of %d", xlo, xhi, xn, ylo, yhi, yn)
	}
	return nil
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// Host performs the copy on host slices with the kernel's index arithmetic
// (the CPU-side tests' reference for the geometry).
func (c Copy) Host(x, y []float32) error {
	if err := c.check(len(x), len(y)); err != nil {
		return err
	}
	for i := range c.N() {
		xo, yo := c.Offsets(i)
		y[c.Y0+yo] = x[c.X0+xo]
	}
	return nil
}

// Offsets is the kernels' index arithmetic: the offsets (from X0 and Y0)
// along XS and YS of index i of Dims, the last axis varying fastest.
func (c Copy) Offsets(i int) (xo, yo int) {
	for d := len(c.Dims) - 1; d >= 0; d-- {
		q := i / c.Dims[d]
		k := i - q*c.Dims[d]
		i = q
		xo += k * c.XS[d]
		yo += k * c.YS[d]
	}
	return xo, yo
}

// Copy runs c from x (xn floats) to y (yn floats) on stream s.
func (e *Engine) Copy(s *cuda.Stream, c Copy, x uint64, xn int, y uint64, yn int) error {
	if err := c.check(xn, yn); err != nil {
		return err
	}
	n := c.N()
	if n == 0 {
		return nil
	}
	a := new(cuda.Args).Struct(c.geom()...).Ptr(x + 4*uint64(c.X0)).Ptr(y + 4*uint64(c.Y0)).I64(int64(n))
	return e.fn[kernels.Copy].Launch(s, cuda.D3(e.grid(int64(n), 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}

// TransposeCopy is ONNX Transpose of a value of shape by perm (nil:
// reversed axes): the copy and the output's shape.
func TransposeCopy(shape []int, perm []int) (Copy, []int, error) {
	r := len(shape)
	if perm == nil {
		for d := r - 1; d >= 0; d-- {
			perm = append(perm, d)
		}
	}
	if len(perm) != r {
		return Copy{}, nil, fmt.Errorf("exact: Transpose perm %v of a rank-%d value", perm, r)
	}
	seen := make([]bool, r)
	xs := tensor.Strides(shape)
	out := make([]int, r)
	c := Copy{Dims: out, XS: make([]int, r)}
	for d, p := range perm {
		if p < 0 || p >= r || seen[p] {
			return Copy{}, nil, fmt.Errorf("exact: Transpose perm %v is not a permutation of %d axes", perm, r)
		}
		seen[p] = true
		out[d], c.XS[d] = shape[p], xs[p]
	}
	c.YS = tensor.Strides(out)
	return c, out, nil
}

// SliceRange resolves one axis of ONNX Slice as kernel/shape does: the
// clamped start, the step and the count.
func SliceRange(start, end, step int64, dim int) (b, st, cnt int, err error) {
	if step == 0 {
		return 0, 0, 0, fmt.Errorf("exact: Slice step is zero")
	}
	d := int64(dim)
	if start < 0 {
		start += d
	}
	if end < 0 {
		end += d
	}
	var n int64
	if step > 0 {
		start, end = min(max(start, 0), d), min(max(end, 0), d)
		if end > start {
			n = (end - start + step - 1) / step
		}
	} else {
		start, end = min(max(start, 0), d-1), min(max(end, -1), d-1)
		if start > end {
			n = (start - end - step - 1) / (-step)
		}
	}
	return int(start), int(step), int(n), nil
}

// SliceCopy is ONNX Slice (opset 10+) of a value of shape: axes nil means
// 0, 1, ...; steps nil all 1. An axis given twice is an error.
func SliceCopy(shape []int, starts, ends, axes, steps []int64) (Copy, []int, error) {
	r := len(shape)
	if len(ends) != len(starts) || axes != nil && len(axes) != len(starts) || steps != nil && len(steps) != len(starts) {
		return Copy{}, nil, fmt.Errorf("exact: Slice starts %v, ends %v, axes %v, steps %v differ in length", starts, ends, axes, steps)
	}
	xs := tensor.Strides(shape)
	out := append([]int{}, shape...)
	c := Copy{Dims: out, XS: append([]int{}, xs...)}
	seen := make([]bool, r)
	for i := range starts {
		a := int64(i)
		if axes != nil {
			a = axes[i]
		}
		if a < 0 {
			a += int64(r)
		}
		if a < 0 || a >= int64(r) || seen[a] {
			return Copy{}, nil, fmt.Errorf("exact: Slice axes %v of a rank-%d value", axes, r)
		}
		seen[a] = true
		step := int64(1)
		if steps != nil {
			step = steps[i]
		}
		b, st, n, err := SliceRange(starts[i], ends[i], step, shape[a])
		if err != nil {
			return Copy{}, nil, err
		}
		out[a] = n
		c.XS[a] = st * xs[a]
		c.X0 += b * xs[a]
	}
	if tensor.NumElems(out) == 0 {
		c.X0 = 0
	}
	c.YS = tensor.Strides(out)
	return c, out, nil
}

// SplitCopies is ONNX Split of a value of shape along axis into parts of
// the given sizes (which must sum to the axis): one copy and shape each.
func SplitCopies(shape []int, axis int, sizes []int) ([]Copy, [][]int, error) {
	r := len(shape)
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		return nil, nil, fmt.Errorf("exact: Split axis %d of a rank-%d value", axis, r)
	}
	sum := 0
	for _, s := range sizes {
		if s < 0 {
			return nil, nil, fmt.Errorf("exact: Split sizes %v", sizes)
		}
		sum += s
	}
	if sum != shape[axis] {
		return nil, nil, fmt.Errorf("exact: Split sizes %v of an axis of %d", sizes, shape[axis])
	}
	xs := tensor.Strides(shape)
	var cs []Copy
	var outs [][]int
	at := 0
	for _, s := range sizes {
		out := append([]int{}, shape...)
		out[axis] = s
		c := Copy{Dims: out, XS: xs, YS: tensor.Strides(out), X0: at * xs[axis]}
		if s == 0 {
			c.X0 = 0
		}
		cs, outs = append(cs, c), append(outs, out)
		at += s
	}
	return cs, outs, nil
}

// ConcatCopies is ONNX Concat of values of shapes along axis: one copy
// per input into the output, and the output's shape.
func ConcatCopies(shapes [][]int, axis int) ([]Copy, []int, error) {
	if len(shapes) == 0 {
		return nil, nil, fmt.Errorf("exact: Concat of no values")
	}
	r := len(shapes[0])
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		return nil, nil, fmt.Errorf("exact: Concat axis %d of rank-%d values", axis, r)
	}
	out := append([]int{}, shapes[0]...)
	out[axis] = 0
	for _, s := range shapes {
		if len(s) != r {
			return nil, nil, fmt.Errorf("exact: Concat of shapes %v", shapes)
		}
		for d := range s {
			if d != axis && s[d] != out[d] {
				return nil, nil, fmt.Errorf("exact: Concat of shapes %v along axis %d", shapes, axis)
			}
		}
		out[axis] += s[axis]
	}
	ys := tensor.Strides(out)
	cs := make([]Copy, len(shapes))
	at := 0
	for i, s := range shapes {
		cs[i] = Copy{Dims: s, XS: tensor.Strides(s), YS: ys, Y0: at * ys[axis]}
		if tensor.NumElems(s) == 0 {
			cs[i].Y0 = 0
		}
		at += s[axis]
	}
	return cs, out, nil
}

// GatherCopies is ONNX Gather of a value of shape along axis by the
// indices idx (of shape ishape; negative ones count from the end): one
// copy per index, and the output's shape.
func GatherCopies(shape []int, axis int, idx []int64, ishape []int) ([]Copy, []int, error) {
	r := len(shape)
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r || tensor.NumElems(ishape) != len(idx) {
		return nil, nil, fmt.Errorf("exact: Gather axis %d of a rank-%d value, %d indices of shape %v", axis, r, len(idx), ishape)
	}
	outer, inner, D := tensor.NumElems(shape[:axis]), tensor.NumElems(shape[axis+1:]), shape[axis]
	out := append(append(append([]int{}, shape[:axis]...), ishape...), shape[axis+1:]...)
	cs := make([]Copy, len(idx))
	for j, v := range idx {
		if v < -int64(D) || v >= int64(D) {
			return nil, nil, fmt.Errorf("exact: Gather index %d out of range for an axis of %d", v, D)
		}
		if v < 0 {
			v += int64(D)
		}
		cs[j] = Copy{Dims: []int{outer, inner}, XS: []int{D * inner, 1}, YS: []int{len(idx) * inner, 1},
			X0: int(v) * inner, Y0: j * inner}
		if outer*inner == 0 {
			cs[j].X0, cs[j].Y0 = 0, 0
		}
	}
	return cs, out, nil
}

// Broadcast is ONNX's multidirectional broadcast of shapes a and b: the
// output's shape as a Copy's Dims, a's strides as XS and b's as YS (0
// along an axis an operand broadcasts), for AddBroadcast.
func Broadcast(a, b []int) (Copy, error) {
	r := max(len(a), len(b))
	c := Copy{Dims: make([]int, r), XS: make([]int, r), YS: make([]int, r)}
	as, bs := tensor.Strides(a), tensor.Strides(b)
	for d := range r {
		da, db := 1, 1
		sa, sb := 0, 0
		if i := d - (r - len(a)); i >= 0 {
			da, sa = a[i], as[i]
		}
		if i := d - (r - len(b)); i >= 0 {
			db, sb = b[i], bs[i]
		}
		switch {
		case da == db:
			c.Dims[d] = da
		case da == 1:
			c.Dims[d], sa = db, 0
		case db == 1:
			c.Dims[d], sb = da, 0
		default:
			return Copy{}, fmt.Errorf("exact: shapes %v and %v do not broadcast", a, b)
		}
		c.XS[d], c.YS[d] = sa, sb
	}
	return c, nil
}

// AddBroadcast sets y (c.N() floats, row-major over c.Dims) to a + b
// broadcast as c says (Broadcast of a's an and b's bn floats): one
// rounded addition each, a's value first, as elementwise's Add.
func (e *Engine) AddBroadcast(s *cuda.Stream, c Copy, a uint64, an int, b uint64, bn int, y uint64) error {
	return e.binary(s, kernels.AddBcast, c, a, an, b, bn, y)
}

// DivBroadcast is AddBroadcast's division: y = a / b, correctly rounded,
// as elementwise's Div.
func (e *Engine) DivBroadcast(s *cuda.Stream, c Copy, a uint64, an int, b uint64, bn int, y uint64) error {
	return e.binary(s, kernels.DivBcast, c, a, an, b, bn, y)
}

func (e *Engine) binary(s *cuda.Stream, kernel string, c Copy, a uint64, an int, b uint64, bn int, y uint64) error {
	if err := c.check(an, bn); err != nil {
		return err
	}
	n := c.N()
	if n == 0 {
		return nil
	}
	args := new(cuda.Args).Struct(c.geom()...).Ptr(a).Ptr(b).Ptr(y).I64(int64(n))
	return e.fn[kernel].Launch(s, cuda.D3(e.grid(int64(n), 256), 1, 1), cuda.D3(256, 1, 1), 0, args)
}

// Gather sets y to ONNX Gather of x (outer x D x inner floats) along its
// middle axis by the nidx int32 indices at idx, each already in [0, D)
// (the caller checks and wraps them on the host).
func (e *Engine) Gather(s *cuda.Stream, x, idx, y uint64, outer, nidx, D, inner int) error {
	if outer < 0 || nidx < 0 || D < 0 || inner < 0 || nidx > math.MaxInt32 || D > math.MaxInt32 {
		return fmt.Errorf("exact: Gather of %dx%dx%d by %d indices", outer, D, inner, nidx)
	}
	n := int64(outer) * int64(nidx) * int64(inner)
	if n == 0 {
		return nil
	}
	if D == 0 {
		return fmt.Errorf("exact: Gather from an empty axis")
	}
	a := new(cuda.Args).Ptr(x).Ptr(idx).Ptr(y).I64(int64(outer)).I32(int32(nidx)).I32(int32(D)).I64(int64(inner))
	return e.fn[kernels.Gather].Launch(s, cuda.D3(e.grid(n, 256), 1, 1), cuda.D3(256, 1, 1), 0, a)
}

// geom packs c's geometry as exact.cu's copy_geom.
func (c Copy) geom() []int32 {
	f := make([]int32, 1+3*MaxCopyRank)
	f[0] = int32(len(c.Dims))
	for d := range c.Dims {
		f[1+d], f[1+MaxCopyRank+d], f[1+2*MaxCopyRank+d] = int32(c.Dims[d]), int32(c.XS[d]), int32(c.YS[d])
	}
	return f
}

// GatherIndices checks ONNX Gather's indices against an axis of D values
// and makes them non-negative (a negative index counts from the end), as
// int32s for Gather.
func GatherIndices(idx []int64, D int) ([]int32, error) {
	out := make([]int32, len(idx))
	for j, v := range idx {
		if v < -int64(D) || v >= int64(D) || D > math.MaxInt32 {
			return nil, fmt.Errorf("exact: Gather index %d out of range for an axis of %d", v, D)
		}
		if v < 0 {
			v += int64(D)
		}
		out[j] = int32(v)
	}
	return out, nil
}
