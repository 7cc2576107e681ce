package shape

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Reshape (opset 1: shape attribute; 5+: shape input; 14+: allowzero).

func reshapeSpec(n *ir.Node, in []*tensor.Tensor) ([]int64, error) {
	if n.Version < 5 && n.Has("shape") {
		return n.Ints("shape", nil), nil
	}
	s, err := checkIn(in, 1, "shape")
	if err != nil {
		return nil, err
	}
	if len(s.Shape) != 1 {
		return nil, fmt.Errorf("shape input must be rank 1, got shape %v", s.Shape)
	}
	return intsOf(s, "shape")
}

// reshapeDims resolves a Reshape target against the input shape.
func reshapeDims(inShape []int, spec []int64, allowZero bool) ([]int, error) {
	out := make([]int, len(spec))
	neg := -1
	prod := 1
	for i, s := range spec {
		switch {
		case s == -1:
			if neg >= 0 {
				return nil, fmt.Errorf("shape %v has more than one -1", spec)
			}
			neg = i
			continue
		case s == 0 && !allowZero:
			if i >= len(inShape) {
				return nil, fmt.Errorf("shape %v copies dimension %d (0) but the input %v has rank %d", spec, i, inShape, len(inShape))
			}
			out[i] = inShape[i]
		case s < 0:
			return nil, fmt.Errorf("invalid dimension %d in shape %v", s, spec)
		default:
			out[i] = int(s)
		}
		prod *= out[i]
	}
	total := tensor.NumElems(inShape)
	if neg >= 0 {
		if prod == 0 {
			if total != 0 {
				return nil, fmt.Errorf("cannot infer -1 in shape %v: other dimensions multiply to 0, input %v has %d elements", spec, inShape, total)
			}
			out[neg] = 0
		} else {
			if total%prod != 0 {
				return nil, fmt.Errorf("cannot reshape %v (%d elements) to %v", inShape, total, spec)
			}
			out[neg] = total / prod
		}
	}
	if err := checkShape(out); err != nil {
		return nil, err
	}
	if tensor.NumElems(out) != total {
		return nil, fmt.Errorf("cannot reshape %v (%d elements) to %v (%d elements)", inShape, total, out, tensor.NumElems(out))
	}
	return out, nil
}

func runReshape(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	spec, err := reshapeSpec(n, in)
	if err != nil {
		return nil, err
	}
	out, err := reshapeDims(x.Shape, spec, n.Int("allowzero", 0) != 0)
	if err != nil {
		return nil, err
	}
	return oneOut(view(x, out))
}

func inferReshape(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	var spec []int64
	ok := false
	if n.Version < 5 && n.Has("shape") {
		spec, ok = n.Ints("shape", nil), true
	} else {
		spec, ok = constInts(in, 1)
	}
	if !ok {
		if l, ok := known1DLen(inAt(in, 1)); ok {
			return []ir.Type{unknownDims(x.DType, l)}, nil
		}
		return []ir.Type{kernel.UnknownRank(x.DType)}, nil
	}
	allowZero := n.Int("allowzero", 0) != 0
	if s, ok := x.Static(); ok {
		out, err := reshapeDims(s, spec, allowZero)
		if err != nil {
			return nil, err
		}
		return []ir.Type{ir.StaticType(x.DType, out)}, nil
	}
	out := make([]ir.Dim, len(spec))
	for i, s := range spec {
		switch {
		case s == 0 && !allowZero && x.RankKnown && i < len(x.Shape):
			out[i] = x.Shape[i]
		case s >= 0 && (s != 0 || allowZero):
			out[i] = ir.Dim{Value: s}
		default:
			out[i] = ir.Unknown
		}
	}
	inferInferred(x, spec, allowZero, out)
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// inferInferred sets the -1 dimension of out when the data's unknown
// dimensions are all copied (spec 0 at their own positions): the copied
// dimensions are the same values on both sides, so the -1 is the product
// of the data's known dimensions over the target's known ones. (A
// dynamic-batch export reshapes [N, C, H, W] with [0, -1, H, W]-like
// targets: the -1 is C·H·W/(H·W) whatever N is.)
func inferInferred(x ir.Type, spec []int64, allowZero bool, out []ir.Dim) {
	if !x.RankKnown || allowZero {
		return
	}
	minus := -1
	for i, s := range spec {
		if s == -1 {
			if minus >= 0 {
				return
			}
			minus = i
		}
	}
	if minus < 0 {
		return
	}
	pin, pout := int64(1), int64(1)
	for i, d := range x.Shape {
		copied := i < len(spec) && spec[i] == 0
		switch {
		case d.Known():
			pin *= d.Value
		case !copied:
			return // an unknown dimension folded into the -1
		}
	}
	for i, d := range out {
		if i != minus {
			if !d.Known() {
				if spec[i] != 0 || i >= len(x.Shape) {
					return
				}
				continue // a copied unknown dimension, on both sides
			}
			pout *= d.Value
		}
	}
	if pout > 0 && pin%pout == 0 {
		out[minus] = ir.Dim{Value: pin / pout}
	}
}

// Flatten.

func flattenAxis(n *ir.Node, rank int) (int, error) {
	a := n.Int("axis", 1)
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a > int64(rank) {
		return 0, fmt.Errorf("axis %d out of range [%d, %d]", n.Int("axis", 1), -rank, rank)
	}
	return int(a), nil
}

func runFlatten(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	a, err := flattenAxis(n, x.Rank())
	if err != nil {
		return nil, err
	}
	return oneOut(view(x, []int{tensor.NumElems(x.Shape[:a]), tensor.NumElems(x.Shape[a:])}))
}

func inferFlatten(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		return []ir.Type{unknownDims(x.DType, 2)}, nil
	}
	a, err := flattenAxis(n, len(x.Shape))
	if err != nil {
		return nil, err
	}
	return []ir.Type{{DType: x.DType, RankKnown: true, Shape: []ir.Dim{dimProduct(x.Shape[:a]), dimProduct(x.Shape[a:])}}}, nil
}

// Squeeze and Unsqueeze (axes: attribute before opset 13, input from 13).

func axesOf(n *ir.Node, in []*tensor.Tensor, i int) ([]int64, bool, error) {
	if n.Version < 13 {
		if n.Has("axes") {
			return n.Ints("axes", nil), true, nil
		}
		return nil, false, nil
	}
	t := kernel.Input(in, i)
	if t == nil {
		return nil, false, nil
	}
	v, err := intsOf(t, "axes")
	return v, true, err
}

func inferAxesOf(n *ir.Node, in []ir.InferInput, i int) (axes []int64, given, known bool) {
	if n.Version < 13 {
		if n.Has("axes") {
			return n.Ints("axes", nil), true, true
		}
		return nil, false, true
	}
	if !present(in, i) {
		return nil, false, true
	}
	v, ok := constInts(in, i)
	return v, true, ok
}

func squeezeDims(shape []int, axes []int64, given bool) ([]int, error) {
	drop := make([]bool, len(shape))
	if given {
		ax, err := normAxes(axes, len(shape))
		if err != nil {
			return nil, err
		}
		for _, a := range ax {
			if shape[a] != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of shape %v: size is %d, not 1", a, shape, shape[a])
			}
			drop[a] = true
		}
	} else {
		for i, d := range shape {
			drop[i] = d == 1
		}
	}
	out := []int{}
	for i, d := range shape {
		if !drop[i] {
			out = append(out, d)
		}
	}
	return out, nil
}

func runSqueeze(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	axes, given, err := axesOf(n, in, 1)
	if err != nil {
		return nil, err
	}
	out, err := squeezeDims(x.Shape, axes, given)
	if err != nil {
		return nil, err
	}
	return oneOut(view(x, out))
}

func inferSqueeze(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	axes, given, known := inferAxesOf(n, in, 1)
	if !x.RankKnown || !known {
		return []ir.Type{kernel.UnknownRank(x.DType)}, nil
	}
	drop := make([]bool, len(x.Shape))
	if given {
		ax, err := normAxes(axes, len(x.Shape))
		if err != nil {
			return nil, err
		}
		for _, a := range ax {
			if d := x.Shape[a]; d.Known() && d.Value != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of %v: size is %d, not 1", a, x, d.Value)
			}
			drop[a] = true
		}
	} else {
		for i, d := range x.Shape {
			if !d.Known() {
				return []ir.Type{kernel.UnknownRank(x.DType)}, nil
			}
			drop[i] = d.Value == 1
		}
	}
	out := []ir.Dim{}
	for i, d := range x.Shape {
		if !drop[i] {
			out = append(out, d)
		}
	}
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// unsqueezeMask marks the inserted positions of the output.
func unsqueezeMask(rank int, axes []int64) ([]bool, error) {
	outRank := rank + len(axes)
	ax, err := normAxes(axes, outRank)
	if err != nil {
		return nil, err
	}
	ins := make([]bool, outRank)
	for _, a := range ax {
		ins[a] = true
	}
	return ins, nil
}

func runUnsqueeze(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	axes, given, err := axesOf(n, in, 1)
	if err != nil {
		return nil, err
	}
	if !given {
		return nil, fmt.Errorf("axes is required")
	}
	ins, err := unsqueezeMask(x.Rank(), axes)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(ins))
	j := 0
	for i := range out {
		if ins[i] {
			out[i] = 1
		} else {
			out[i] = x.Shape[j]
			j++
		}
	}
	return oneOut(view(x, out))
}

func inferUnsqueeze(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	axes, given, known := inferAxesOf(n, in, 1)
	if known && !given {
		return nil, fmt.Errorf("axes is required")
	}
	if !x.RankKnown {
		return []ir.Type{kernel.UnknownRank(x.DType)}, nil
	}
	if !known {
		if l, ok := known1DLen(inAt(in, 1)); ok {
			return []ir.Type{unknownDims(x.DType, len(x.Shape)+l)}, nil
		}
		return []ir.Type{kernel.UnknownRank(x.DType)}, nil
	}
	ins, err := unsqueezeMask(len(x.Shape), axes)
	if err != nil {
		return nil, err
	}
	out := make([]ir.Dim, len(ins))
	j := 0
	for i := range out {
		if ins[i] {
			out[i] = ir.Fixed(1)
		} else {
			out[i] = x.Shape[j]
			j++
		}
	}
	return []ir.Type{{DType: x.DType, Shape: out, RankKnown: true}}, nil
}

// Identity and Dropout (inference mode: the output is the input).

func runIdentity(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	return oneOut(view(x, x.Shape))
}

func dropoutMaskType(n *ir.Node, dt tensor.DType) tensor.DType {
	if n.Version < 10 {
		return dt
	}
	return tensor.Bool
}

func runDropout(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	if t := kernel.Input(in, 2); t != nil && n.Version >= 12 {
		v, err := t.Int64s()
		if err != nil || len(v) != 1 {
			return nil, fmt.Errorf("training_mode must be one bool, got %v", t)
		}
		if v[0] != 0 {
			ratio := 0.5
			if r := kernel.Input(in, 1); r != nil {
				f, err := r.Float64s()
				if err != nil || len(f) != 1 {
					return nil, fmt.Errorf("ratio must be one float, got %v", r)
				}
				ratio = f[0]
			}
			if ratio != 0 {
				return nil, fmt.Errorf("training_mode is true with ratio %g: random dropout is not deterministic and vouch does not run it", ratio)
			}
		}
	}
	outs := []*tensor.Tensor{view(x, x.Shape)}
	if len(n.Outputs) > 1 && n.Outputs[1] != "" {
		mdt := dropoutMaskType(n, x.DType)
		ones, err := fillOnes(mdt, x.Shape)
		if err != nil {
			return nil, err
		}
		outs = append(outs, ones)
	}
	return outs, nil
}

func fillOnes(dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	if dt == tensor.String {
		return nil, fmt.Errorf("no mask of type string")
	}
	v := make([]float64, tensor.NumElems(shape))
	for i := range v {
		v[i] = 1
	}
	return tensor.FromFloat64s(dt, shape, v), nil
}

func inferDropout(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	m := x
	m.Shape = copyDims(x.Shape)
	m.DType = dropoutMaskType(n, x.DType)
	return []ir.Type{x, m}, nil
}

// Shape and Size.

func shapeRange(n *ir.Node, rank int) (int, int) {
	clamp := func(v int64) int {
		if v < 0 {
			v += int64(rank)
		}
		return int(min(max(v, 0), int64(rank)))
	}
	s := clamp(n.Int("start", 0))
	e := rank
	if n.Has("end") {
		e = clamp(n.Int("end", 0))
	}
	if e < s {
		e = s
	}
	return s, e
}

func runShape(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	s, e := shapeRange(n, x.Rank())
	v := make([]int64, e-s)
	for i := range v {
		v[i] = int64(x.Shape[s+i])
	}
	return oneOut(tensor.From(v, len(v)))
}

func inferShape(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "data")
	if err != nil {
		return nil, err
	}
	if !x.RankKnown {
		return []ir.Type{unknownDims(tensor.Int64, 1)}, nil
	}
	s, e := shapeRange(n, len(x.Shape))
	return []ir.Type{ir.StaticType(tensor.Int64, []int{e - s})}, nil
}

func runSize(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "data")
	if err != nil {
		return nil, err
	}
	return oneOut(tensor.Scalar(int64(x.Len())))
}

func inferSize(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if _, err := inType(in, 0, "data"); err != nil {
		return nil, err
	}
	return []ir.Type{ir.StaticType(tensor.Int64, nil)}, nil
}

// Expand.

func runExpand(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	s, err := checkIn(in, 1, "shape")
	if err != nil {
		return nil, err
	}
	if s.Rank() != 1 {
		return nil, fmt.Errorf("shape input must be rank 1, got shape %v", s.Shape)
	}
	spec, err := intsOf(s, "shape")
	if err != nil {
		return nil, err
	}
	for _, d := range spec {
		if d < 0 {
			return nil, fmt.Errorf("negative dimension in shape %v", spec)
		}
	}
	out, err := kernel.BroadcastShapes(x.Shape, kernel.Ints(spec))
	if err != nil {
		return nil, err
	}
	if err := checkShape(out); err != nil {
		return nil, err
	}
	return oneOut(broadcastTo(x, out))
}

// broadcastTo materialises x broadcast to shape out.
func broadcastTo(x *tensor.Tensor, out []int) *tensor.Tensor {
	return stridedView(x, out, kernel.BroadcastStrides(x.Shape, out), 0)
}

func inferExpand(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if spec, ok := constInts(in, 1); ok {
		for _, d := range spec {
			if d < 0 {
				return nil, fmt.Errorf("negative dimension in shape %v", spec)
			}
		}
		t, err := kernel.InferBroadcast(x.DType, []ir.InferInput{{Present: true, Type: x}, {Present: true, Type: ir.StaticType(x.DType, kernel.Ints(spec))}})
		if err != nil {
			return nil, err
		}
		return []ir.Type{t}, nil
	}
	if l, ok := known1DLen(inAt(in, 1)); ok && x.RankKnown {
		return []ir.Type{unknownDims(x.DType, max(l, len(x.Shape)))}, nil
	}
	return []ir.Type{kernel.UnknownRank(x.DType)}, nil
}
