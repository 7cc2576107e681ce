package shape

import (
	"cmp"
	"fmt"
	"sort"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// elemCmp returns a total order on the elements of t, by flat offset.
// NaN sorts above every number and equals NaN, as in NumPy's sort and
// argmax; -0 equals +0.
func elemCmp(t *tensor.Tensor) (func(i, j int) int, error) {
	switch d := t.Data.(type) {
	case []float32:
		return func(i, j int) int { return floatCmp(d[i], d[j]) }, nil
	case []float64:
		return func(i, j int) int { return floatCmp(d[i], d[j]) }, nil
	case []tensor.Half:
		f := toF32(d)
		return func(i, j int) int { return floatCmp(f[i], f[j]) }, nil
	case []tensor.BHalf:
		f := toF32(d)
		return func(i, j int) int { return floatCmp(f[i], f[j]) }, nil
	case []int8:
		return ordCmp(d), nil
	case []int16:
		return ordCmp(d), nil
	case []int32:
		return ordCmp(d), nil
	case []int64:
		return ordCmp(d), nil
	case []uint8:
		return ordCmp(d), nil
	case []uint16:
		return ordCmp(d), nil
	case []uint32:
		return ordCmp(d), nil
	case []uint64:
		return ordCmp(d), nil
	case []string:
		return ordCmp(d), nil
	case []bool:
		return func(i, j int) int {
			switch {
			case d[i] == d[j]:
				return 0
			case d[j]:
				return -1
			}
			return 1
		}, nil
	}
	return nil, fmt.Errorf("cannot order %v", t.DType)
}

func ordCmp[T cmp.Ordered](d []T) func(i, j int) int {
	return func(i, j int) int { return cmp.Compare(d[i], d[j]) }
}

func floatCmp[T kernel.Float](a, b T) int {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ArgMax and ArgMin (select_last_index from opset 12).

func argReduce(isMax bool) kernel.RunFunc {
	return func(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x, err := checkIn(in, 0, "data")
		if err != nil {
			return nil, err
		}
		axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
		if err != nil {
			return nil, err
		}
		dim := x.Shape[axis]
		if dim == 0 {
			return nil, fmt.Errorf("cannot reduce an empty axis %d of shape %v", axis, x.Shape)
		}
		c, err := elemCmp(x)
		if err != nil {
			return nil, err
		}
		last := n.Int("select_last_index", 0) != 0
		outer := tensor.NumElems(x.Shape[:axis])
		inner := tensor.NumElems(x.Shape[axis+1:])
		res := make([]int64, outer*inner)
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				base := o*dim*inner + j
				best := 0
				for k := 1; k < dim; k++ {
					r := c(base+k*inner, base+best*inner)
					if !isMax {
						r = -r
					}
					if r > 0 || (r == 0 && last) {
						best = k
					}
				}
				res[o*inner+j] = int64(best)
			}
		}
		out := append([]int{}, x.Shape...)
		if n.Int("keepdims", 1) != 0 {
			out[axis] = 1
		} else {
			out = append(out[:axis], out[axis+1:]...)
		}
		return oneOut(tensor.From(res, out...))
	}
}

func inferArgReduce(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	keep := n.Int("keepdims", 1) != 0
	if !x.RankKnown {
		return []ir.Type{kernel.UnknownRank(tensor.Int64)}, nil
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	out := copyDims(x.Shape)
	if keep {
		out[axis] = ir.Fixed(1)
	} else {
		out = append(out[:axis], out[axis+1:]...)
	}
	return []ir.Type{{DType: tensor.Int64, Shape: out, RankKnown: true}}, nil
}

// TopK (k attribute in opset 1, K input from 10, largest/sorted from 11).
// Ties keep the lower index first; sorted=0 still returns sorted output.

func topKArgs(n *ir.Node, in []*tensor.Tensor) (int64, error) {
	if n.Version < 10 {
		if !n.Has("k") {
			return 0, fmt.Errorf("attribute k is required")
		}
		return n.Int("k", 0), nil
	}
	t, err := checkIn(in, 1, "K")
	if err != nil {
		return 0, err
	}
	return scalarInt(t, "K")
}

func runTopK(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "X")
	if err != nil {
		return nil, err
	}
	k64, err := topKArgs(n, in)
	if err != nil {
		return nil, err
	}
	axis, err := kernel.NormAxis(n.Int("axis", -1), x.Rank())
	if err != nil {
		return nil, err
	}
	dim := x.Shape[axis]
	if k64 < 0 || k64 > int64(dim) {
		return nil, fmt.Errorf("K %d out of range [0, %d] for axis %d of shape %v", k64, dim, axis, x.Shape)
	}
	k := int(k64)
	c, err := elemCmp(x)
	if err != nil {
		return nil, err
	}
	largest := n.Int("largest", 1) != 0
	outer := tensor.NumElems(x.Shape[:axis])
	inner := tensor.NumElems(x.Shape[axis+1:])
	out := append([]int{}, x.Shape...)
	out[axis] = k
	idx := make([]int, tensor.NumElems(out))
	pos := make([]int64, len(idx))
	order := make([]int, dim)
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			base := o*dim*inner + j
			for i := range order {
				order[i] = i
			}
			sort.SliceStable(order, func(a, b int) bool {
				r := c(base+order[a]*inner, base+order[b]*inner)
				if largest {
					return r > 0
				}
				return r < 0
			})
			for i := 0; i < k; i++ {
				p := (o*k+i)*inner + j
				idx[p] = base + order[i]*inner
				pos[p] = int64(order[i])
			}
		}
	}
	return []*tensor.Tensor{gather(x, idx, out, nil), tensor.From(pos, out...)}, nil
}

func inferTopK(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "X")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		return []ir.Type{kernel.UnknownRank(x.DType), kernel.UnknownRank(tensor.Int64)}, nil
	}
	axis, err := kernel.NormAxis(n.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, err
	}
	kd := ir.Unknown
	if n.Version < 10 {
		kd = ir.Dim{Value: n.Int("k", 0)}
	} else if v, ok := constInts(in, 1); ok && len(v) == 1 {
		kd = ir.Dim{Value: v[0]}
	}
	if kd.Known() && x.Shape[axis].Known() && kd.Value > x.Shape[axis].Value {
		return nil, fmt.Errorf("K %d exceeds axis %d of %v", kd.Value, axis, x)
	}
	out := copyDims(x.Shape)
	out[axis] = kd
	return []ir.Type{
		{DType: x.DType, Shape: out, RankKnown: true},
		{DType: tensor.Int64, Shape: copyDims(out), RankKnown: true},
	}, nil
}

// Unique: Y, indices (first occurrence), inverse_indices, counts.

func runUnique(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "X")
	if err != nil {
		return nil, err
	}
	c, err := elemCmp(x)
	if err != nil {
		return nil, err
	}
	shape := []int{x.Len()}
	axis := 0
	if n.Has("axis") {
		shape = x.Shape
		if axis, err = kernel.NormAxis(n.Int("axis", 0), x.Rank()); err != nil {
			return nil, err
		}
	}
	dim := shape[axis]
	outer := tensor.NumElems(shape[:axis])
	inner := tensor.NumElems(shape[axis+1:])
	// Item i is the sub-tensor at index i of axis, compared
	// lexicographically in row-major order.
	cmpItems := func(a, b int) int {
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				if r := c((o*dim+a)*inner+j, (o*dim+b)*inner+j); r != 0 {
					return r
				}
			}
		}
		return 0
	}
	order := make([]int, dim)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return cmpItems(order[a], order[b]) < 0 })
	// Groups of equal items; each group's first member is its first
	// occurrence (the sort is stable).
	group := make([]int, dim)
	var firsts []int
	var counts []int64
	for i, it := range order {
		if i == 0 || cmpItems(order[i-1], it) != 0 {
			firsts = append(firsts, it)
			counts = append(counts, 0)
		}
		group[it] = len(firsts) - 1
		counts[len(counts)-1]++
	}
	rank := make([]int, len(firsts)) // output position of each group
	for g := range rank {
		rank[g] = g
	}
	if n.Int("sorted", 1) == 0 {
		byFirst := make([]int, len(firsts))
		for g := range byFirst {
			byFirst[g] = g
		}
		sort.Slice(byFirst, func(a, b int) bool { return firsts[byFirst[a]] < firsts[byFirst[b]] })
		for p, g := range byFirst {
			rank[g] = p
		}
	}
	u := len(firsts)
	indices := make([]int64, u)
	cnts := make([]int64, u)
	for g, f := range firsts {
		indices[rank[g]] = int64(f)
		cnts[rank[g]] = counts[g]
	}
	inverse := make([]int64, dim)
	for i := range inverse {
		inverse[i] = int64(rank[group[i]])
	}
	out := append([]int{}, shape...)
	out[axis] = u
	idx := make([]int, 0, tensor.NumElems(out))
	for o := 0; o < outer; o++ {
		for p := 0; p < u; p++ {
			base := (o*dim + int(indices[p])) * inner
			for j := 0; j < inner; j++ {
				idx = append(idx, base+j)
			}
		}
	}
	return []*tensor.Tensor{
		gather(x, idx, out, nil),
		tensor.From(indices, u),
		tensor.From(inverse, dim),
		tensor.From(cnts, u),
	}, nil
}

func inferUnique(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "X")
	if err != nil {
		return nil, err
	}
	y := unknownDims(x.DType, 1)
	inv := unknownDims(tensor.Int64, 1)
	if n.Has("axis") {
		if !x.RankKnown {
			y = kernel.UnknownRank(x.DType)
		} else {
			axis, err := kernel.NormAxis(n.Int("axis", 0), len(x.Shape))
			if err != nil {
				return nil, err
			}
			y = ir.Type{DType: x.DType, Shape: copyDims(x.Shape), RankKnown: true}
			y.Shape[axis] = ir.Unknown
			inv.Shape[0] = x.Shape[axis]
		}
	} else if x.RankKnown {
		inv.Shape[0] = dimProduct(x.Shape)
	}
	return []ir.Type{y, unknownDims(tensor.Int64, 1), inv, unknownDims(tensor.Int64, 1)}, nil
}

// CumSum: a sequential sum along the axis, in index order (reverse: from
// the end). float16 and bfloat16 accumulate in float32 and round each
// output.

func runCumSum(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "x")
	if err != nil {
		return nil, err
	}
	at, err := checkIn(in, 1, "axis")
	if err != nil {
		return nil, err
	}
	if at.Rank() > 1 {
		return nil, fmt.Errorf("axis must be a scalar, got shape %v", at.Shape)
	}
	a, err := scalarInt(at, "axis")
	if err != nil {
		return nil, err
	}
	axis, err := kernel.NormAxis(a, x.Rank())
	if err != nil {
		return nil, err
	}
	g := cumGeom{
		outer: tensor.NumElems(x.Shape[:axis]), dim: x.Shape[axis], inner: tensor.NumElems(x.Shape[axis+1:]),
		excl: n.Int("exclusive", 0) != 0, rev: n.Int("reverse", 0) != 0,
	}
	out := tensor.New(x.DType, x.Shape...)
	switch d := x.Data.(type) {
	case []float32:
		cumsum(g, d, out.Data.([]float32))
	case []float64:
		cumsum(g, d, out.Data.([]float64))
	case []int8:
		cumsum(g, d, out.Data.([]int8))
	case []int16:
		cumsum(g, d, out.Data.([]int16))
	case []int32:
		cumsum(g, d, out.Data.([]int32))
	case []int64:
		cumsum(g, d, out.Data.([]int64))
	case []uint8:
		cumsum(g, d, out.Data.([]uint8))
	case []uint16:
		cumsum(g, d, out.Data.([]uint16))
	case []uint32:
		cumsum(g, d, out.Data.([]uint32))
	case []uint64:
		cumsum(g, d, out.Data.([]uint64))
	case []tensor.Half:
		f := make([]float32, len(d))
		cumsum(g, toF32(d), f)
		o := out.Data.([]tensor.Half)
		for i, v := range f {
			o[i] = tensor.ToHalf(v)
		}
	case []tensor.BHalf:
		f := make([]float32, len(d))
		cumsum(g, toF32(d), f)
		o := out.Data.([]tensor.BHalf)
		for i, v := range f {
			o[i] = tensor.ToBHalf(v)
		}
	default:
		return nil, fmt.Errorf("CumSum is not defined for %v", x.DType)
	}
	return oneOut(out)
}

type cumGeom struct {
	outer, dim, inner int
	excl, rev         bool
}

func cumsum[T kernel.Number](g cumGeom, in, out []T) {
	for o := 0; o < g.outer; o++ {
		for j := 0; j < g.inner; j++ {
			var acc T
			for s := 0; s < g.dim; s++ {
				k := s
				if g.rev {
					k = g.dim - 1 - s
				}
				p := (o*g.dim+k)*g.inner + j
				if g.excl {
					out[p] = acc
					acc += in[p]
				} else {
					acc += in[p]
					out[p] = acc
				}
			}
		}
	}
}

func inferCumSum(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "x")
	if err != nil {
		return nil, err
	}
	if x.DType == tensor.String || x.DType == tensor.Bool {
		return nil, fmt.Errorf("CumSum is not defined for %v", x.DType)
	}
	return []ir.Type{x}, nil
}
