package shape

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// The Into forms (kernel.Op.Into) move the same elements as Run into the
// executor's preallocated outputs. They plan in fixed arrays (inputs up to
// maxRank dimensions) and dispatch on the element type with a type switch,
// so they allocate nothing; a rank beyond maxRank runs Run and copies.
//
// The reshape-like ops are also marked View: the executor binds their
// output to their input's storage and does not call them at all. Their
// Into copies, for when it cannot.

const maxRank = 8

func viaRun(run kernel.RunFunc, c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	return kernel.ViaRun(run, c, n, in, out)
}

// copyAll copies src's elements into dst (same dtype and element count).
func copyAll(dst, src *tensor.Tensor) error { return kernel.CopyInto(dst, src) }

func outSlot(out []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(out) == 0 || out[0] == nil {
		return nil, fmt.Errorf("no output slot")
	}
	return out[0], nil
}

// copyInto is the Into form of Flatten, Squeeze, Unsqueeze and Identity:
// the output holds input 0's elements in order.
func copyInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return err
	}
	o, err := outSlot(out)
	if err != nil {
		return err
	}
	return copyAll(o, x)
}

// reshapeInto checks the target against the output's shape (inference
// resolved it) and copies.
func reshapeInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return err
	}
	o, err := outSlot(out)
	if err != nil {
		return err
	}
	if n.Version >= 5 || !n.Has("shape") {
		s := kernel.Input(in, 1)
		if s == nil {
			return viaRun(runReshape, c, n, in, out)
		}
		spec, ok := s.Data.([]int64)
		if !ok || len(s.Shape) != 1 || len(spec) != len(o.Shape) {
			return viaRun(runReshape, c, n, in, out)
		}
		allowZero := n.Int("allowzero", 0) != 0
		for i, v := range spec {
			switch {
			case v == -1:
			case v == 0 && !allowZero:
				if i >= len(x.Shape) || x.Shape[i] != o.Shape[i] {
					return viaRun(runReshape, c, n, in, out)
				}
			case int64(o.Shape[i]) != v:
				return viaRun(runReshape, c, n, in, out) // Run reports the error
			}
		}
	}
	return copyAll(o, x)
}

// dropoutInto is Dropout's Into in inference mode: a copy, and a mask of
// ones when asked for.
func dropoutInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if t := kernel.Input(in, 2); t != nil && n.Version >= 12 {
		return viaRun(runDropout, c, n, in, out) // training_mode given: Run decides
	}
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return err
	}
	o, err := outSlot(out)
	if err != nil {
		return err
	}
	if err := copyAll(o, x); err != nil {
		return err
	}
	if len(out) > 1 && out[1] != nil {
		switch m := out[1].Data.(type) {
		case []bool:
			for i := range m {
				m[i] = true
			}
		default:
			return viaRun(runDropout, c, n, in, out)
		}
	}
	return nil
}

// stridedInto fills d (of shape) with s[base + sum(ix[k]*st[k])] in
// row-major order of ix, as sl.strided does.
func stridedInto[T any](d, s []T, shape, st []int, base int) {
	n := len(d)
	if n == 0 {
		return
	}
	r := len(shape)
	if r == 0 {
		d[0] = s[base]
		return
	}
	last, lst := shape[r-1], st[r-1]
	var ix [maxRank]int
	off := base
	for p := 0; p < n; p += last {
		o := off
		row := d[p : p+last]
		if lst == 1 {
			copy(row, s[o:o+last])
		} else {
			for j := range row {
				row[j] = s[o]
				o += lst
			}
		}
		for k := r - 2; k >= 0; k-- {
			ix[k]++
			off += st[k]
			if ix[k] < shape[k] {
				break
			}
			off -= st[k] * shape[k]
			ix[k] = 0
		}
	}
}

// strided dispatches stridedInto on the element type.
func strided(pool *parallel.Pool, dst, src *tensor.Tensor, shape, st []int, base int) error {
	if dst.DType != src.DType {
		return fmt.Errorf("output slot is %v, input is %v", dst.DType, src.DType)
	}
	switch d := dst.Data.(type) {
	case []float32:
		stridedPar(pool, d, src.Data.([]float32), shape, st, base)
	case []float64:
		stridedInto(d, src.Data.([]float64), shape, st, base)
	case []tensor.Half:
		stridedInto(d, src.Data.([]tensor.Half), shape, st, base)
	case []tensor.BHalf:
		stridedInto(d, src.Data.([]tensor.BHalf), shape, st, base)
	case []int8:
		stridedInto(d, src.Data.([]int8), shape, st, base)
	case []int16:
		stridedInto(d, src.Data.([]int16), shape, st, base)
	case []int32:
		stridedInto(d, src.Data.([]int32), shape, st, base)
	case []int64:
		stridedInto(d, src.Data.([]int64), shape, st, base)
	case []uint8:
		stridedInto(d, src.Data.([]uint8), shape, st, base)
	case []uint16:
		stridedInto(d, src.Data.([]uint16), shape, st, base)
	case []uint32:
		stridedInto(d, src.Data.([]uint32), shape, st, base)
	case []uint64:
		stridedInto(d, src.Data.([]uint64), shape, st, base)
	case []bool:
		stridedInto(d, src.Data.([]bool), shape, st, base)
	case []string:
		stridedInto(d, src.Data.([]string), shape, st, base)
	default:
		return fmt.Errorf("unsupported data %T", dst.Data)
	}
	return nil
}

// rowStrides writes shape's row-major strides into st.
func rowStrides(shape []int, st *[maxRank]int) {
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= shape[i]
	}
}

func transposeInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return err
	}
	o, err := outSlot(out)
	if err != nil {
		return err
	}
	r := x.Rank()
	if r > maxRank {
		return viaRun(runTranspose, c, n, in, out)
	}
	perm := n.Ints("perm", nil)
	if perm != nil && len(perm) != r {
		return viaRun(runTranspose, c, n, in, out)
	}
	var xs, ost, shape [maxRank]int
	var seen [maxRank]bool
	rowStrides(x.Shape, &xs)
	for i := 0; i < r; i++ {
		p := r - 1 - i
		if perm != nil {
			v := perm[i]
			if v < 0 {
				v += int64(r)
			}
			if v < 0 || v >= int64(r) || seen[v] {
				return viaRun(runTranspose, c, n, in, out) // Run reports the error
			}
			p = int(v)
		}
		seen[p] = true
		shape[i], ost[i] = x.Shape[p], xs[p]
	}
	if tensor.NumElems(shape[:r]) != o.Len() {
		return fmt.Errorf("output slot has shape %v for the transpose of %v", o.Shape, x.Shape)
	}
	return strided(c.Workers(), o, x, shape[:r], ost[:r], 0)
}

func sliceInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return err
	}
	o, err := outSlot(out)
	if err != nil {
		return err
	}
	r := x.Rank()
	if r > maxRank || n.Version < 10 {
		return viaRun(runSlice, c, n, in, out)
	}
	var vals [4][]int64
	var given [4]bool
	for i := 1; i <= 4; i++ {
		t := kernel.Input(in, i)
		if t == nil {
			continue
		}
		v, ok := t.Data.([]int64)
		if !ok || t.Rank() != 1 {
			return viaRun(runSlice, c, n, in, out)
		}
		vals[i-1], given[i-1] = v, true
	}
	starts, ends, axes, steps := vals[0], vals[1], vals[2], vals[3]
	if !given[0] || !given[1] || len(starts) != len(ends) ||
		(given[2] && len(axes) != len(starts)) || (given[3] && len(steps) != len(starts)) {
		return viaRun(runSlice, c, n, in, out)
	}
	var begin, step, shape, xs, st [maxRank]int
	var seen [maxRank]bool
	copy(shape[:r], x.Shape)
	for d := 0; d < r; d++ {
		step[d] = 1
	}
	for i := range starts {
		a := int64(i)
		if given[2] {
			a = axes[i]
		}
		if a < 0 {
			a += int64(r)
		}
		if a < 0 || a >= int64(r) || seen[a] {
			return viaRun(runSlice, c, n, in, out)
		}
		seen[a] = true
		sp := int64(1)
		if given[3] {
			sp = steps[i]
		}
		b, s, cnt, err := sliceRange(starts[i], ends[i], sp, x.Shape[a])
		if err != nil {
			return err
		}
		begin[a], step[a], shape[a] = b, s, cnt
	}
	rowStrides(x.Shape, &xs)
	base := 0
	for d := 0; d < r; d++ {
		st[d] = step[d] * xs[d]
		base += begin[d] * xs[d]
	}
	if tensor.NumElems(shape[:r]) == 0 {
		base = 0
	}
	if tensor.NumElems(shape[:r]) != o.Len() {
		return fmt.Errorf("output slot has shape %v for a slice of %v", o.Shape, x.Shape)
	}
	return strided(c.Workers(), o, x, shape[:r], st[:r], base)
}

func concatInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	o, err := outSlot(out)
	if err != nil {
		return err
	}
	if len(in) == 0 || in[0] == nil || !n.Has("axis") {
		return viaRun(runConcat, c, n, in, out)
	}
	rank := in[0].Rank()
	axis, err := kernel.NormAxis(n.Int("axis", 0), rank)
	if err != nil || len(o.Shape) != rank {
		return viaRun(runConcat, c, n, in, out)
	}
	total := 0
	for _, x := range in {
		if x == nil || x.DType != o.DType || x.Rank() != rank {
			return viaRun(runConcat, c, n, in, out)
		}
		for d := range x.Shape {
			if d != axis && x.Shape[d] != o.Shape[d] {
				return viaRun(runConcat, c, n, in, out)
			}
		}
		total += x.Shape[axis]
	}
	if total != o.Shape[axis] {
		return viaRun(runConcat, c, n, in, out)
	}
	outer := tensor.NumElems(o.Shape[:axis])
	inner := tensor.NumElems(o.Shape[axis+1:])
	switch d := o.Data.(type) {
	case []float32:
		concatPar(c.Workers(), d, in, outer, inner, axis)
	case []float64:
		concatT(d, in, outer, inner, axis)
	case []int64:
		concatT(d, in, outer, inner, axis)
	case []int32:
		concatT(d, in, outer, inner, axis)
	case []bool:
		concatT(d, in, outer, inner, axis)
	default:
		return viaRun(runConcat, c, n, in, out)
	}
	return nil
}

func concatT[T any](d []T, in []*tensor.Tensor, outer, inner, axis int) {
	rowOut := len(d)
	if outer > 0 {
		rowOut /= outer
	}
	off := 0
	for _, x := range in {
		s := x.Data.([]T)
		blk := x.Shape[axis] * inner
		for o := 0; o < outer; o++ {
			copy(d[o*rowOut+off:o*rowOut+off+blk], s[o*blk:(o+1)*blk])
		}
		off += blk
	}
}

func gatherInto(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return err
	}
	it, err := checkIn(in, 1, "indices")
	if err != nil {
		return err
	}
	o, err := outSlot(out)
	if err != nil {
		return err
	}
	if x.Rank() == 0 || o.DType != x.DType {
		return viaRun(runGather, c, n, in, out)
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
	if err != nil {
		return err
	}
	dim := x.Shape[axis]
	outer := tensor.NumElems(x.Shape[:axis])
	inner := tensor.NumElems(x.Shape[axis+1:])
	if o.Len() != outer*it.Len()*inner {
		return fmt.Errorf("output slot has shape %v for gather of %v by %v", o.Shape, x.Shape, it.Shape)
	}
	var ind64 []int64
	var ind32 []int32
	switch v := it.Data.(type) {
	case []int64:
		ind64 = v
	case []int32:
		ind32 = v
	default:
		return viaRun(runGather, c, n, in, out)
	}
	// Check every index first, as Run does, so a bad one writes nothing.
	for i := 0; i < it.Len(); i++ {
		if _, err := normIndex(indexAt(ind64, ind32, i), dim, "gather"); err != nil {
			return err
		}
	}
	switch d := o.Data.(type) {
	case []float32:
		gatherT(d, x.Data.([]float32), ind64, ind32, outer, dim, inner)
	case []float64:
		gatherT(d, x.Data.([]float64), ind64, ind32, outer, dim, inner)
	case []int64:
		gatherT(d, x.Data.([]int64), ind64, ind32, outer, dim, inner)
	case []int32:
		gatherT(d, x.Data.([]int32), ind64, ind32, outer, dim, inner)
	case []bool:
		gatherT(d, x.Data.([]bool), ind64, ind32, outer, dim, inner)
	default:
		return viaRun(runGather, c, n, in, out)
	}
	return nil
}

func indexAt(i64 []int64, i32 []int32, i int) int64 {
	if i64 != nil {
		return i64[i]
	}
	return int64(i32[i])
}

func gatherT[T any](d, s []T, i64 []int64, i32 []int32, outer, dim, inner int) {
	cnt := len(i64) + len(i32)
	p := 0
	for o := 0; o < outer; o++ {
		for j := 0; j < cnt; j++ {
			k := int(indexAt(i64, i32, j))
			if k < 0 {
				k += dim
			}
			copy(d[p:p+inner], s[(o*dim+k)*inner:(o*dim+k+1)*inner])
			p += inner
		}
	}
}

// addInto gives the table's data-movement operators their Into forms.
func addInto(t kernel.Table) {
	for _, op := range []string{"Flatten", "Squeeze", "Unsqueeze", "Identity"} {
		t[op].Into, t[op].View = copyInto, true
	}
	t["Reshape"].Into, t["Reshape"].View = reshapeInto, true
	t["Dropout"].Into = dropoutInto
	t["Transpose"].Into = transposeInto
	t["Slice"].Into = sliceInto
	t["Concat"].Into = concatInto
	t["Gather"].Into = gatherInto
	t["Split"].Into = splitInto
}
