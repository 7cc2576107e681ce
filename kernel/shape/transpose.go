package shape

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Transpose.

func transposePerm(n *ir.Node, rank int) ([]int, error) {
	p := n.Ints("perm", nil)
	if p == nil {
		out := make([]int, rank)
		for i := range out {
			out[i] = rank - 1 - i
		}
		return out, nil
	}
	if len(p) != rank {
		return nil, fmt.Errorf("perm %v has %d entries for rank %d", p, len(p), rank)
	}
	out, err := normAxes(p, rank)
	if err != nil {
		return nil, fmt.Errorf("perm %v: %w", p, err)
	}
	return out, nil
}

// transpose returns x with its axes permuted: out dim i is x dim perm[i].
func transpose(x *tensor.Tensor, perm []int) *tensor.Tensor {
	st := tensor.Strides(x.Shape)
	out := make([]int, len(perm))
	ost := make([]int, len(perm))
	for i, p := range perm {
		out[i] = x.Shape[p]
		ost[i] = st[p]
	}
	return stridedView(x, out, ost, 0)
}

func runTranspose(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	perm, err := transposePerm(n, x.Rank())
	if err != nil {
		return nil, err
	}
	return oneOut(transpose(x, perm))
}

func inferTranspose(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		if p := n.Ints("perm", nil); p != nil {
			return []ir.Type{unknownDims(x.DType, len(p))}, nil
		}
		return []ir.Type{x}, nil
	}
	perm, err := transposePerm(n, len(x.Shape))
	if err != nil {
		return nil, err
	}
	out := make([]ir.Dim, len(perm))
	for i, p := range perm {
		out[i] = x.Shape[p]
	}
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// DepthToSpace and SpaceToDepth: a reshape, a transpose, a reshape.

func blockArgs(n *ir.Node, x *tensor.Tensor) (b, N, C, H, W int, err error) {
	if x.Rank() != 4 {
		return 0, 0, 0, 0, 0, fmt.Errorf("input must be rank 4, got shape %v", x.Shape)
	}
	bs := n.Int("blocksize", 0)
	if bs <= 0 || bs > 1<<20 {
		return 0, 0, 0, 0, 0, fmt.Errorf("blocksize must be in [1, 2^20], got %d", bs)
	}
	return int(bs), x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3], nil
}

func runDepthToSpace(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	b, N, C, H, W, err := blockArgs(n, x)
	if err != nil {
		return nil, err
	}
	if C%(b*b) != 0 {
		return nil, fmt.Errorf("channels %d not divisible by blocksize² %d", C, b*b)
	}
	c := C / (b * b)
	var t *tensor.Tensor
	switch mode := n.String("mode", "DCR"); mode {
	case "DCR":
		t = transpose(view(x, []int{N, b, b, c, H, W}), []int{0, 3, 4, 1, 5, 2})
	case "CRD":
		t = transpose(view(x, []int{N, c, b, b, H, W}), []int{0, 1, 4, 2, 5, 3})
	default:
		return nil, fmt.Errorf("unknown mode %q (want DCR or CRD)", mode)
	}
	return oneOut(view(t, []int{N, c, H * b, W * b}))
}

func runSpaceToDepth(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	b, N, C, H, W, err := blockArgs(n, x)
	if err != nil {
		return nil, err
	}
	if H%b != 0 || W%b != 0 {
		return nil, fmt.Errorf("spatial dims %dx%d not divisible by blocksize %d", H, W, b)
	}
	t := transpose(view(x, []int{N, C, H / b, b, W / b, b}), []int{0, 3, 5, 1, 2, 4})
	return oneOut(view(t, []int{N, C * b * b, H / b, W / b}))
}

func scaleDim(d ir.Dim, num, den int64) ir.Dim {
	if !d.Known() {
		return ir.Unknown
	}
	return ir.Dim{Value: d.Value * num / den}
}

func inferBlock(toSpace bool) kernel.InferFunc {
	return func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
		x, err := inType(in, 0, "input")
		if err != nil {
			return nil, err
		}
		if !x.RankKnown {
			return []ir.Type{unknownDims(x.DType, 4)}, nil
		}
		if len(x.Shape) != 4 {
			return nil, fmt.Errorf("input must be rank 4, got %v", x)
		}
		b := n.Int("blocksize", 0)
		if b <= 0 {
			return nil, fmt.Errorf("blocksize must be positive, got %d", b)
		}
		s := x.Shape
		if toSpace {
			return []ir.Type{{DType: x.DType, RankKnown: true, Shape: []ir.Dim{s[0], scaleDim(s[1], 1, b*b), scaleDim(s[2], b, 1), scaleDim(s[3], b, 1)}}}, nil
		}
		return []ir.Type{{DType: x.DType, RankKnown: true, Shape: []ir.Dim{s[0], scaleDim(s[1], b*b, 1), scaleDim(s[2], 1, b), scaleDim(s[3], 1, b)}}}, nil
	}
}

// Tile.

func runTile(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	r, err := checkIn(in, 1, "repeats")
	if err != nil {
		return nil, err
	}
	reps, err := intsOf(r, "repeats")
	if err != nil {
		return nil, err
	}
	if r.Rank() != 1 || len(reps) != x.Rank() {
		return nil, fmt.Errorf("repeats must be rank 1 with %d entries (the input's rank), got shape %v", x.Rank(), r.Shape)
	}
	out := make([]int, x.Rank())
	for i, v := range reps {
		if v < 0 || v > maxElems {
			return nil, fmt.Errorf("repeat %d in %v out of range", v, reps)
		}
		out[i] = x.Shape[i] * int(v)
	}
	if err := checkShape(out); err != nil {
		return nil, err
	}
	st := tensor.Strides(x.Shape)
	idx := make([]int, tensor.NumElems(out))
	forEachIndex(out, func(flat int, ix []int) {
		off := 0
		for d, v := range ix {
			off += (v % x.Shape[d]) * st[d]
		}
		idx[flat] = off
	})
	return oneOut(gather(x, idx, out, nil))
}

func inferTile(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "input")
	if err != nil {
		return nil, err
	}
	reps, ok := constInts(in, 1)
	if !x.RankKnown {
		if ok {
			return []ir.Type{unknownDims(x.DType, len(reps))}, nil
		}
		return []ir.Type{x}, nil
	}
	if !ok {
		return []ir.Type{unknownDims(x.DType, len(x.Shape))}, nil
	}
	if len(reps) != len(x.Shape) {
		return nil, fmt.Errorf("repeats has %d entries for rank %d", len(reps), len(x.Shape))
	}
	out := make([]ir.Dim, len(reps))
	for i, r := range reps {
		if r < 0 {
			return nil, fmt.Errorf("negative repeat %d in %v", r, reps)
		}
		switch d := x.Shape[i]; {
		case r == 1:
			out[i] = d
		case d.Known():
			out[i] = ir.Dim{Value: d.Value * r}
		default:
			out[i] = ir.Unknown
		}
	}
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// Concat.

func runConcat(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("no inputs")
	}
	first, err := checkIn(in, 0, "inputs")
	if err != nil {
		return nil, err
	}
	if !n.Has("axis") {
		return nil, fmt.Errorf("attribute axis is required")
	}
	rank := first.Rank()
	axis, err := kernel.NormAxis(n.Int("axis", 0), rank)
	if err != nil {
		return nil, err
	}
	out := append([]int{}, first.Shape...)
	out[axis] = 0
	for i := range in {
		x, err := checkIn(in, i, "inputs")
		if err != nil {
			return nil, err
		}
		if x.DType != first.DType {
			return nil, fmt.Errorf("input %d is %v, input 0 is %v", i, x.DType, first.DType)
		}
		if x.Rank() != rank {
			return nil, fmt.Errorf("input %d has shape %v, input 0 has shape %v (ranks differ)", i, x.Shape, first.Shape)
		}
		for d := range x.Shape {
			if d != axis && x.Shape[d] != first.Shape[d] {
				return nil, fmt.Errorf("input %d has shape %v, input 0 has shape %v (dimension %d differs)", i, x.Shape, first.Shape, d)
			}
		}
		out[axis] += x.Shape[axis]
	}
	res := tensor.New(first.DType, out...)
	outer := tensor.NumElems(out[:axis])
	inner := tensor.NumElems(out[axis+1:])
	rowOut := out[axis] * inner
	off := 0
	for _, x := range in {
		blk := x.Shape[axis] * inner
		e := wrap(x.Data)
		for o := 0; o < outer; o++ {
			e.copyTo(res.Data, o*rowOut+off, o*blk, blk)
		}
		off += blk
	}
	return oneOut(res)
}

func inferConcat(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	first, err := inType(in, 0, "inputs")
	if err != nil {
		return nil, err
	}
	if !n.Has("axis") {
		return nil, fmt.Errorf("attribute axis is required")
	}
	rank := -1
	for _, x := range in {
		if x.Present && x.Type.RankKnown {
			rank = len(x.Type.Shape)
			break
		}
	}
	if rank < 0 {
		return []ir.Type{kernel.UnknownRank(first.DType)}, nil
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), rank)
	if err != nil {
		return nil, err
	}
	out := make([]ir.Dim, rank)
	for d := range out {
		out[d] = ir.Unknown
	}
	sum := int64(0)
	sumKnown := true
	for i, x := range in {
		if !x.Present {
			return nil, fmt.Errorf("missing input %d", i)
		}
		if !x.Type.RankKnown {
			sumKnown = false
			continue
		}
		if len(x.Type.Shape) != rank {
			return nil, fmt.Errorf("input %d is %v, rank %d expected", i, x.Type, rank)
		}
		for d, v := range x.Type.Shape {
			if d == axis {
				if v.Known() {
					sum += v.Value
				} else {
					sumKnown = false
				}
				continue
			}
			cur := out[d]
			switch {
			case v.Known() && cur.Known() && v.Value != cur.Value:
				return nil, fmt.Errorf("input %d is %v: dimension %d differs from %v", i, x.Type, d, cur)
			case v.Known(), !cur.Known() && cur.Param == "":
				out[d] = v
			}
		}
	}
	if sumKnown {
		out[axis] = ir.Dim{Value: sum}
	}
	return []ir.Type{{DType: first.DType, Shape: out, RankKnown: true}}, nil
}

// Split (split: attribute before opset 13, input from 13; num_outputs
// from 18).

func splitSizes(n *ir.Node, in []*tensor.Tensor, dim int) ([]int, error) {
	var split []int64
	if n.Version < 13 {
		split = n.Ints("split", nil)
	} else if t := kernel.Input(in, 1); t != nil {
		v, err := intsOf(t, "split")
		if err != nil {
			return nil, err
		}
		split = v
		if split == nil {
			split = []int64{}
		}
	}
	return resolveSplit(n, split, dim)
}

func resolveSplit(n *ir.Node, split []int64, dim int) ([]int, error) {
	outs := len(n.Outputs)
	if split != nil {
		if len(split) != outs {
			return nil, fmt.Errorf("split %v has %d entries for %d outputs", split, len(split), outs)
		}
		sum := int64(0)
		for _, s := range split {
			if s < 0 || s > int64(dim) {
				return nil, fmt.Errorf("size %d in split %v out of range [0, %d]", s, split, dim)
			}
			sum += s
		}
		if sum != int64(dim) {
			return nil, fmt.Errorf("split %v sums to %d, the axis has %d", split, sum, dim)
		}
		return kernel.Ints(split), nil
	}
	if n.Version >= 18 && n.Has("num_outputs") {
		k := int(n.Int("num_outputs", 0))
		if k != outs || k <= 0 {
			return nil, fmt.Errorf("num_outputs %d but the node has %d outputs", k, outs)
		}
		chunk := (dim + k - 1) / k
		sizes := make([]int, k)
		left := dim
		for i := range sizes {
			sizes[i] = min(chunk, left)
			left -= sizes[i]
		}
		return sizes, nil
	}
	if outs == 0 || dim%outs != 0 {
		return nil, fmt.Errorf("cannot split axis of size %d into %d equal parts", dim, outs)
	}
	sizes := make([]int, outs)
	for i := range sizes {
		sizes[i] = dim / outs
	}
	return sizes, nil
}

func runSplit(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), x.Rank())
	if err != nil {
		return nil, err
	}
	sizes, err := splitSizes(n, in, x.Shape[axis])
	if err != nil {
		return nil, err
	}
	outer := tensor.NumElems(x.Shape[:axis])
	inner := tensor.NumElems(x.Shape[axis+1:])
	row := x.Shape[axis] * inner
	e := wrap(x.Data)
	res := make([]*tensor.Tensor, len(sizes))
	off := 0
	for i, s := range sizes {
		shape := append([]int{}, x.Shape...)
		shape[axis] = s
		t := tensor.New(x.DType, shape...)
		blk := s * inner
		for o := 0; o < outer; o++ {
			e.copyTo(t.Data, o*blk, o*row+off, blk)
		}
		off += blk
		res[i] = t
	}
	return res, nil
}

func inferSplit(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "input")
	if err != nil {
		return nil, err
	}
	outs := make([]ir.Type, len(n.Outputs))
	if !x.RankKnown {
		for i := range outs {
			outs[i] = kernel.UnknownRank(x.DType)
		}
		return outs, nil
	}
	axis, err := kernel.NormAxis(n.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	var split []int64
	known := true
	if n.Version < 13 {
		split = n.Ints("split", nil)
	} else if present(in, 1) {
		split, known = constInts(in, 1)
		if known && split == nil {
			split = []int64{}
		}
	}
	var sizes []int
	if d := x.Shape[axis]; known && (d.Known() || split != nil) {
		dim := int(d.Value)
		if !d.Known() {
			dim = 0
			for _, s := range split {
				dim += int(s)
			}
		}
		sizes, err = resolveSplit(n, split, dim)
		if err != nil {
			return nil, err
		}
	}
	for i := range outs {
		s := copyDims(x.Shape)
		if sizes != nil {
			s[axis] = ir.Fixed(sizes[i])
		} else {
			s[axis] = ir.Unknown
		}
		outs[i] = ir.Type{DType: x.DType, Shape: s, RankKnown: true}
	}
	return outs, nil
}
