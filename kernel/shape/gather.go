package shape

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// indexList reads an index tensor and maps each index into [0, dim),
// accepting negative indices; out-of-range indices are an error.
func normIndex(v int64, dim int, what string) (int, error) {
	if v < 0 {
		v += int64(dim)
	}
	if v < 0 || v >= int64(dim) {
		return 0, fmt.Errorf("%s index %d out of range [%d, %d)", what, v, -dim, dim)
	}
	return int(v), nil
}

func indicesOf(t *tensor.Tensor) ([]int64, error) {
	if t.DType != tensor.Int64 && t.DType != tensor.Int32 {
		return nil, fmt.Errorf("indices must be int32 or int64, got %v", t.DType)
	}
	return t.Int64s()
}

// Gather.

func runGather(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := checkIn(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	if x.Rank() == 0 {
		return nil, fmt.Errorf("data must have rank >= 1")
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
	if err != nil {
		return nil, err
	}
	ind, err := indicesOf(it)
	if err != nil {
		return nil, err
	}
	dim := x.Shape[axis]
	outer := tensor.NumElems(x.Shape[:axis])
	inner := tensor.NumElems(x.Shape[axis+1:])
	out := append(append(append([]int{}, x.Shape[:axis]...), it.Shape...), x.Shape[axis+1:]...)
	norm := make([]int, len(ind))
	for i, v := range ind {
		if norm[i], err = normIndex(v, dim, "gather"); err != nil {
			return nil, err
		}
	}
	// Each index selects a contiguous block of inner elements.
	res := tensor.New(x.DType, out...)
	e := wrap(x.Data)
	p := 0
	for o := 0; o < outer; o++ {
		for _, k := range norm {
			e.copyTo(res.Data, p, (o*dim+k)*inner, inner)
			p += inner
		}
	}
	return oneOut(res)
}

func inferGather(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := inType(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown || !it.RankKnown {
		return []ir.Type{kernel.UnknownRank(x.DType)}, nil
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	out := append(append(copyDims(x.Shape[:axis]), it.Shape...), x.Shape[axis+1:]...)
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// GatherElements.

// elementOffsets maps every element of an index tensor to a flat offset in
// data, replacing the coordinate on axis by the index value.
func elementOffsets(data, ishape []int, ind []int64, axis int, what string) ([]int, error) {
	if len(ishape) != len(data) {
		return nil, fmt.Errorf("indices have shape %v, data %v: ranks differ", ishape, data)
	}
	ds := tensor.Strides(data)
	idx := make([]int, len(ind))
	var bad error
	forEachIndex(ishape, func(flat int, ix []int) {
		if bad != nil {
			return
		}
		off := 0
		for d, v := range ix {
			if d == axis {
				k, err := normIndex(ind[flat], data[d], what)
				if err != nil {
					bad = err
					return
				}
				v = k
			} else if v >= data[d] {
				bad = fmt.Errorf("indices shape %v exceeds data shape %v at dimension %d", ishape, data, d)
				return
			}
			off += v * ds[d]
		}
		idx[flat] = off
	})
	return idx, bad
}

func runGatherElements(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := checkIn(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
	if err != nil {
		return nil, err
	}
	ind, err := indicesOf(it)
	if err != nil {
		return nil, err
	}
	idx, err := elementOffsets(x.Shape, it.Shape, ind, axis, "gather")
	if err != nil {
		return nil, err
	}
	return oneOut(gather(x, idx, it.Shape, nil))
}

func inferGatherElements(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := inType(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	out := it
	out.DType = x.DType
	out.Shape = copyDims(it.Shape)
	return []ir.Type{out}, nil
}

// GatherND (batch_dims from opset 12).

// ndOffsets returns, for each index tuple of indices (last dim m), the flat
// offset of the addressed slice in data, the slice size and the number of
// tuples. Batch dimensions are leading dimensions shared by both.
func ndOffsets(data, ishape []int, ind []int64, b int) (offs []int, slice int, err error) {
	q := len(ishape)
	if q < 1 {
		return nil, 0, fmt.Errorf("indices must have rank >= 1")
	}
	if b < 0 || b >= q || b > len(data) {
		return nil, 0, fmt.Errorf("batch_dims %d invalid for data rank %d and indices rank %d", b, len(data), q)
	}
	for i := 0; i < b; i++ {
		if data[i] != ishape[i] {
			return nil, 0, fmt.Errorf("batch dimension %d differs: data %v, indices %v", i, data, ishape)
		}
	}
	m := ishape[q-1]
	if m > len(data)-b {
		return nil, 0, fmt.Errorf("index tuples of length %d address data of rank %d with %d batch dims", m, len(data), b)
	}
	slice = tensor.NumElems(data[b+m:])
	ds := tensor.Strides(data)
	batchSize := tensor.NumElems(data[b:]) // elements per batch entry
	tuples := tensor.NumElems(ishape[:q-1])
	perBatch := tensor.NumElems(ishape[b : q-1])
	offs = make([]int, tuples)
	for t := 0; t < tuples; t++ {
		off := 0
		if perBatch > 0 {
			off = (t / perBatch) * batchSize
		}
		for j := 0; j < m; j++ {
			k, err := normIndex(ind[t*m+j], data[b+j], "gather_nd")
			if err != nil {
				return nil, 0, err
			}
			off += k * ds[b+j]
		}
		offs[t] = off
	}
	return offs, slice, nil
}

func runGatherND(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := checkIn(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	if it.DType != tensor.Int64 {
		return nil, fmt.Errorf("indices must be int64, got %v", it.DType)
	}
	b := int(n.Int("batch_dims", 0))
	offs, slice, err := ndOffsets(x.Shape, it.Shape, it.Data.([]int64), b)
	if err != nil {
		return nil, err
	}
	m := it.Shape[it.Rank()-1]
	out := append(append([]int{}, it.Shape[:it.Rank()-1]...), x.Shape[b+m:]...)
	idx := make([]int, 0, len(offs)*slice)
	for _, o := range offs {
		for j := 0; j < slice; j++ {
			idx = append(idx, o+j)
		}
	}
	return oneOut(gather(x, idx, out, nil))
}

func inferGatherND(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := inType(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown || !it.RankKnown || len(it.Shape) == 0 || !it.Shape[len(it.Shape)-1].Known() {
		return []ir.Type{kernel.UnknownRank(x.DType)}, nil
	}
	b := int(n.Int("batch_dims", 0))
	q := len(it.Shape)
	m := int(it.Shape[q-1].Value)
	if b < 0 || b >= q || b+m > len(x.Shape) {
		return nil, fmt.Errorf("index tuples of length %d with batch_dims %d do not fit data %v", m, b, x)
	}
	out := append(copyDims(it.Shape[:q-1]), x.Shape[b+m:]...)
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// Scatter, ScatterElements and ScatterND (reduction: none; add and mul
// from opset 16; max and min from 18). Updates apply in index order, so
// duplicate indices give a deterministic result.

func reductionOf(n *ir.Node) (string, error) {
	r := n.String("reduction", "none")
	switch r {
	case "none", "add", "mul", "max", "min":
		return r, nil
	}
	return "", fmt.Errorf("unknown reduction %q", r)
}

func runScatterElements(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := checkIn(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	up, err := checkIn(in, 2, "updates")
	if err != nil {
		return nil, err
	}
	if up.DType != x.DType {
		return nil, fmt.Errorf("updates are %v, data %v", up.DType, x.DType)
	}
	if !sameShape(up.Shape, it.Shape) {
		return nil, fmt.Errorf("updates have shape %v, indices %v: they must match", up.Shape, it.Shape)
	}
	red, err := reductionOf(n)
	if err != nil {
		return nil, err
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
	if err != nil {
		return nil, err
	}
	ind, err := indicesOf(it)
	if err != nil {
		return nil, err
	}
	idx, err := elementOffsets(x.Shape, it.Shape, ind, axis, "scatter")
	if err != nil {
		return nil, err
	}
	out := x.Clone()
	if err := scatterInto(out, up, idx, red); err != nil {
		return nil, err
	}
	return oneOut(out)
}

func sameShape(a, b []int) bool {
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

func runScatterND(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	it, err := checkIn(in, 1, "indices")
	if err != nil {
		return nil, err
	}
	up, err := checkIn(in, 2, "updates")
	if err != nil {
		return nil, err
	}
	if up.DType != x.DType {
		return nil, fmt.Errorf("updates are %v, data %v", up.DType, x.DType)
	}
	if it.DType != tensor.Int64 {
		return nil, fmt.Errorf("indices must be int64, got %v", it.DType)
	}
	red, err := reductionOf(n)
	if err != nil {
		return nil, err
	}
	offs, slice, err := ndOffsets(x.Shape, it.Shape, it.Data.([]int64), 0)
	if err != nil {
		return nil, err
	}
	m := it.Shape[it.Rank()-1]
	want := append(append([]int{}, it.Shape[:it.Rank()-1]...), x.Shape[m:]...)
	if !sameShape(up.Shape, want) {
		return nil, fmt.Errorf("updates have shape %v, want %v", up.Shape, want)
	}
	idx := make([]int, 0, len(offs)*slice)
	for _, o := range offs {
		for j := 0; j < slice; j++ {
			idx = append(idx, o+j)
		}
	}
	out := x.Clone()
	if err := scatterInto(out, up, idx, red); err != nil {
		return nil, err
	}
	return oneOut(out)
}

func inferScatter(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if _, err := reductionOf(n); err != nil {
		return nil, err
	}
	return kernel.InferSame(0)(n, in)
}

// scatterInto applies dst[idx[i]] = red(dst[idx[i]], src[i]) in order of i.
func scatterInto(dst, src *tensor.Tensor, idx []int, red string) error {
	if red == "none" {
		wrap(src.Data).put(dst.Data, idx)
		return nil
	}
	switch d := dst.Data.(type) {
	case []float32:
		scatterNum(d, src.Data.([]float32), idx, red)
	case []float64:
		scatterNum(d, src.Data.([]float64), idx, red)
	case []int8:
		scatterNum(d, src.Data.([]int8), idx, red)
	case []int16:
		scatterNum(d, src.Data.([]int16), idx, red)
	case []int32:
		scatterNum(d, src.Data.([]int32), idx, red)
	case []int64:
		scatterNum(d, src.Data.([]int64), idx, red)
	case []uint8:
		scatterNum(d, src.Data.([]uint8), idx, red)
	case []uint16:
		scatterNum(d, src.Data.([]uint16), idx, red)
	case []uint32:
		scatterNum(d, src.Data.([]uint32), idx, red)
	case []uint64:
		scatterNum(d, src.Data.([]uint64), idx, red)
	case []tensor.Half:
		f := toF32(d)
		scatterNum(f, toF32(src.Data.([]tensor.Half)), idx, red)
		for i, v := range f {
			d[i] = tensor.ToHalf(v)
		}
	case []tensor.BHalf:
		f := toF32(d)
		scatterNum(f, toF32(src.Data.([]tensor.BHalf)), idx, red)
		for i, v := range f {
			d[i] = tensor.ToBHalf(v)
		}
	case []bool:
		s := src.Data.([]bool)
		for i, j := range idx {
			switch red {
			case "add", "max":
				d[j] = d[j] || s[i]
			case "mul", "min":
				d[j] = d[j] && s[i]
			}
		}
	default:
		return fmt.Errorf("reduction %q is not defined for %v", red, dst.DType)
	}
	return nil
}

func scatterNum[T kernel.Number](d, s []T, idx []int, red string) {
	for i, j := range idx {
		switch red {
		case "add":
			d[j] += s[i]
		case "mul":
			d[j] *= s[i]
		case "max":
			d[j] = max(d[j], s[i])
		case "min":
			d[j] = min(d[j], s[i])
		}
	}
}

// toF32 widens half-precision data to float32.
func toF32[T interface{ Float32() float32 }](v []T) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x.Float32()
	}
	return out
}

// OneHot.

func runOneHot(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	it, err := checkIn(in, 0, "indices")
	if err != nil {
		return nil, err
	}
	dt, err := checkIn(in, 1, "depth")
	if err != nil {
		return nil, err
	}
	vt, err := checkIn(in, 2, "values")
	if err != nil {
		return nil, err
	}
	if vt.Len() != 2 {
		return nil, fmt.Errorf("values must have 2 elements (off, on), got shape %v", vt.Shape)
	}
	dv, err := dt.Float64s()
	if err != nil || len(dv) != 1 {
		return nil, fmt.Errorf("depth must be one number, got %v", dt)
	}
	depth := int(dv[0])
	if !(dv[0] >= 1 && dv[0] <= maxElems) {
		return nil, fmt.Errorf("depth %g must be positive", dv[0])
	}
	ind, err := it.Float64s()
	if err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	r := it.Rank()
	axis := n.Int("axis", -1)
	if axis < 0 {
		axis += int64(r + 1)
	}
	if axis < 0 || axis > int64(r) {
		return nil, fmt.Errorf("axis %d out of range for output rank %d", n.Int("axis", -1), r+1)
	}
	a := int(axis)
	out := append(append(append([]int{}, it.Shape[:a]...), depth), it.Shape[a:]...)
	if err := checkShape(out); err != nil {
		return nil, err
	}
	inner := tensor.NumElems(it.Shape[a:])
	idx := make([]int, tensor.NumElems(out)) // 0: off, 1: on
	for i, v := range ind {
		k := int64(v)
		if k < 0 {
			k += int64(depth)
		}
		if k < 0 || k >= int64(depth) {
			continue // out-of-range indices give an all-off row (ONNX)
		}
		o, j := i/inner, i%inner
		idx[(o*depth+int(k))*inner+j] = 1
	}
	return oneOut(gather(vt, idx, out, nil))
}

func inferOneHot(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	it, err := inType(in, 0, "indices")
	if err != nil {
		return nil, err
	}
	vt, err := inType(in, 2, "values")
	if err != nil {
		return nil, err
	}
	if !it.RankKnown {
		return []ir.Type{kernel.UnknownRank(vt.DType)}, nil
	}
	r := len(it.Shape)
	axis := n.Int("axis", -1)
	if axis < 0 {
		axis += int64(r + 1)
	}
	if axis < 0 || axis > int64(r) {
		return nil, fmt.Errorf("axis %d out of range for output rank %d", n.Int("axis", -1), r+1)
	}
	depth := ir.Unknown
	if c := in[1].Const; c != nil {
		if v, err := c.Float64s(); err == nil && len(v) == 1 && v[0] >= 1 {
			depth = ir.Dim{Value: int64(v[0])}
		}
	}
	out := append(append(copyDims(it.Shape[:axis]), depth), it.Shape[axis:]...)
	return []ir.Type{{DType: vt.DType, Shape: out, RankKnown: true}}, nil
}

// NonZero: the indices of non-zero elements, int64 [rank, count], in
// row-major order. A scalar counts as a one-element vector (as NumPy).

func nonzeroMask(t *tensor.Tensor) ([]bool, error) {
	m := make([]bool, t.Len())
	if s, ok := t.Data.([]string); ok {
		for i, v := range s {
			m[i] = v != ""
		}
		return m, nil
	}
	f, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	for i, v := range f {
		m[i] = v != 0
	}
	return m, nil
}

func runNonZero(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "X")
	if err != nil {
		return nil, err
	}
	mask, err := nonzeroMask(x)
	if err != nil {
		return nil, err
	}
	shape := x.Shape
	if len(shape) == 0 {
		shape = []int{1}
	}
	cnt := 0
	for _, b := range mask {
		if b {
			cnt++
		}
	}
	r := len(shape)
	out := make([]int64, r*cnt)
	k := 0
	forEachIndex(shape, func(flat int, ix []int) {
		if !mask[flat] {
			return
		}
		for d, v := range ix {
			out[d*cnt+k] = int64(v)
		}
		k++
	})
	return oneOut(tensor.From(out, r, cnt))
}

func inferNonZero(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "X")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		return []ir.Type{unknownDims(tensor.Int64, 2)}, nil
	}
	return []ir.Type{{DType: tensor.Int64, RankKnown: true, Shape: []ir.Dim{ir.Fixed(max(len(x.Shape), 1)), ir.Unknown}}}, nil
}
