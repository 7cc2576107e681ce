package shape

import (
	"fmt"
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Constant: exactly one of value, value_float(s), value_int(s),
// value_string(s) (sparse_value is not supported).

func constantValue(n *ir.Node) (*tensor.Tensor, error) {
	var found []string
	var out *tensor.Tensor
	for name, a := range n.Attrs {
		var t *tensor.Tensor
		switch name {
		case "value":
			if a.T == nil {
				return nil, fmt.Errorf("attribute value holds no tensor")
			}
			t = a.T
		case "value_float":
			t = tensor.Scalar(a.F)
		case "value_floats":
			t = tensor.From(append([]float32{}, a.Floats...), len(a.Floats))
		case "value_int":
			t = tensor.Scalar(a.I)
		case "value_ints":
			t = tensor.From(append([]int64{}, a.Ints...), len(a.Ints))
		case "value_string":
			t = tensor.Scalar(a.S)
		case "value_strings":
			t = tensor.From(append([]string{}, a.Strings...), len(a.Strings))
		case "sparse_value":
			return nil, fmt.Errorf("sparse_value is not supported")
		default:
			continue
		}
		found = append(found, name)
		out = t
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("need exactly one value attribute, got %v", found)
	}
	if err := out.Check(); err != nil {
		return nil, err
	}
	return out, nil
}

func runConstant(_ *kernel.Ctx, n *ir.Node, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	t, err := constantValue(n)
	if err != nil {
		return nil, err
	}
	return oneOut(view(t, t.Shape))
}

func inferConstant(n *ir.Node, _ []ir.InferInput) ([]ir.Type, error) {
	t, err := constantValue(n)
	if err != nil {
		return nil, err
	}
	return []ir.Type{ir.TensorType(t)}, nil
}

// ConstantOfShape.

func constantOfShapeValue(n *ir.Node) (*tensor.Tensor, error) {
	a, ok := n.Attrs["value"]
	if !ok || a.T == nil {
		return tensor.Scalar(float32(0)), nil
	}
	if err := a.T.Check(); err != nil {
		return nil, err
	}
	if a.T.Len() != 1 {
		return nil, fmt.Errorf("value must have one element, got shape %v", a.T.Shape)
	}
	return a.T, nil
}

func runConstantOfShape(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	s, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if s.Rank() != 1 {
		return nil, fmt.Errorf("input must be rank 1, got shape %v", s.Shape)
	}
	spec, err := intsOf(s, "input")
	if err != nil {
		return nil, err
	}
	shape := kernel.Ints(spec)
	if err := checkShape(shape); err != nil {
		return nil, err
	}
	v, err := constantOfShapeValue(n)
	if err != nil {
		return nil, err
	}
	idx := make([]int, tensor.NumElems(shape))
	return oneOut(gather(v, idx, shape, nil))
}

func inferConstantOfShape(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	v, err := constantOfShapeValue(n)
	if err != nil {
		return nil, err
	}
	if spec, ok := constInts(in, 0); ok {
		shape := kernel.Ints(spec)
		if err := checkShape(shape); err != nil {
			return nil, err
		}
		return []ir.Type{ir.StaticType(v.DType, shape)}, nil
	}
	if l, ok := known1DLen(inAt(in, 0)); ok {
		return []ir.Type{unknownDims(v.DType, l)}, nil
	}
	return []ir.Type{kernel.UnknownRank(v.DType)}, nil
}

// EyeLike.

func eyeLikeType(n *ir.Node, in tensor.DType) (tensor.DType, error) {
	if !n.Has("dtype") {
		return in, nil
	}
	dt := tensor.DType(n.Int("dtype", 0))
	if !dt.Supported() || dt == tensor.String {
		return 0, fmt.Errorf("unsupported dtype %v", dt)
	}
	return dt, nil
}

func runEyeLike(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := checkIn(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if x.Rank() != 2 {
		return nil, fmt.Errorf("input must be rank 2, got shape %v", x.Shape)
	}
	dt, err := eyeLikeType(n, x.DType)
	if err != nil {
		return nil, err
	}
	if dt == tensor.String {
		return nil, fmt.Errorf("unsupported dtype string")
	}
	k := n.Int("k", 0)
	r, c := x.Shape[0], x.Shape[1]
	v := make([]float64, r*c)
	for i := 0; i < r; i++ {
		j := int64(i) + k
		if j >= 0 && j < int64(c) {
			v[i*c+int(j)] = 1
		}
	}
	return oneOut(tensor.FromFloat64s(dt, x.Shape, v))
}

func inferEyeLike(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "input")
	if err != nil {
		return nil, err
	}
	if x.RankKnown && len(x.Shape) != 2 {
		return nil, fmt.Errorf("input must be rank 2, got %v", x)
	}
	dt, err := eyeLikeType(n, x.DType)
	if err != nil {
		return nil, err
	}
	out := x
	out.DType = dt
	out.Shape = copyDims(x.Shape)
	if !x.RankKnown {
		out = unknownDims(dt, 2)
	}
	return []ir.Type{out}, nil
}

// Range: start + i*delta for i in [0, max(ceil((limit-start)/delta), 0)).

func rangeCount(start, limit, delta float64) (int, error) {
	if delta == 0 {
		return 0, fmt.Errorf("delta is zero")
	}
	c := math.Ceil((limit - start) / delta)
	if math.IsNaN(c) {
		return 0, fmt.Errorf("range(%g, %g, %g) has no defined length", start, limit, delta)
	}
	if c <= 0 {
		return 0, nil
	}
	if c > maxElems {
		return 0, fmt.Errorf("range(%g, %g, %g) has too many elements", start, limit, delta)
	}
	return int(c), nil
}

func rangeCountInt(start, limit, delta int64) (int, error) {
	if delta == 0 {
		return 0, fmt.Errorf("delta is zero")
	}
	// Integer ceil division without float rounding.
	d := limit - start
	var c int64
	if delta > 0 {
		if d <= 0 {
			return 0, nil
		}
		c = (d + delta - 1) / delta
	} else {
		if d >= 0 {
			return 0, nil
		}
		c = (-d + -delta - 1) / -delta
	}
	if c > maxElems {
		return 0, fmt.Errorf("range(%d, %d, %d) has too many elements", start, limit, delta)
	}
	return int(c), nil
}

func rangeScalars(in []*tensor.Tensor) (dt tensor.DType, vals [3]*tensor.Tensor, err error) {
	names := [3]string{"start", "limit", "delta"}
	for i := range vals {
		t, err := checkIn(in, i, names[i])
		if err != nil {
			return 0, vals, err
		}
		if t.Len() != 1 {
			return 0, vals, fmt.Errorf("%s must be a scalar, got shape %v", names[i], t.Shape)
		}
		if i > 0 && t.DType != vals[0].DType {
			return 0, vals, fmt.Errorf("%s is %v but start is %v", names[i], t.DType, vals[0].DType)
		}
		vals[i] = t
	}
	dt = vals[0].DType
	if dt == tensor.String || dt == tensor.Bool {
		return 0, vals, fmt.Errorf("unsupported type %v", dt)
	}
	return dt, vals, nil
}

func rangeLen(dt tensor.DType, v [3]*tensor.Tensor) (int, error) {
	if dt.IsInt() {
		var s [3]int64
		for i := range v {
			x, err := v[i].Int64s()
			if err != nil {
				return 0, err
			}
			s[i] = x[0]
		}
		return rangeCountInt(s[0], s[1], s[2])
	}
	var s [3]float64
	for i := range v {
		x, err := v[i].Float64s()
		if err != nil {
			return 0, err
		}
		s[i] = x[0]
	}
	return rangeCount(s[0], s[1], s[2])
}

func runRange(_ *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	dt, v, err := rangeScalars(in)
	if err != nil {
		return nil, err
	}
	cnt, err := rangeLen(dt, v)
	if err != nil {
		return nil, err
	}
	out := tensor.New(dt, cnt)
	switch d := out.Data.(type) {
	case []float32:
		// Each element is computed independently as start + i*delta
		// (single rounding through FMA), so no error accumulates.
		s, dl := v[0].Data.([]float32)[0], v[2].Data.([]float32)[0]
		for i := range d {
			d[i] = float32(math.FMA(float64(i), float64(dl), float64(s)))
		}
	case []float64:
		s, dl := v[0].Data.([]float64)[0], v[2].Data.([]float64)[0]
		for i := range d {
			d[i] = math.FMA(float64(i), dl, s)
		}
	case []int64, []int32, []int16, []int8, []uint8, []uint16, []uint32, []uint64:
		a, _ := v[0].Int64s()
		b, _ := v[2].Int64s()
		vals := make([]int64, cnt)
		for i := range vals {
			vals[i] = a[0] + int64(i)*b[0]
		}
		conv := tensor.FromInt64s([]int{cnt}, vals)
		out = castInts(conv, dt)
	default:
		a, _ := v[0].Float64s()
		b, _ := v[2].Float64s()
		vals := make([]float64, cnt)
		for i := range vals {
			vals[i] = float64(float32(math.FMA(float64(i), b[0], a[0])))
		}
		out = tensor.FromFloat64s(dt, []int{cnt}, vals)
	}
	return oneOut(out)
}

// castInts converts an int64 tensor to another integer type (wrapping).
func castInts(t *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	v := t.Data.([]int64)
	out := tensor.New(dt, t.Shape...)
	switch d := out.Data.(type) {
	case []int64:
		copy(d, v)
	case []int32:
		convertInts(d, v)
	case []int16:
		convertInts(d, v)
	case []int8:
		convertInts(d, v)
	case []uint8:
		convertInts(d, v)
	case []uint16:
		convertInts(d, v)
	case []uint32:
		convertInts(d, v)
	case []uint64:
		convertInts(d, v)
	}
	return out
}

func convertInts[T kernel.Integer](d []T, v []int64) {
	for i, x := range v {
		d[i] = T(x)
	}
}

func inferRange(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	x, err := inType(in, 0, "start")
	if err != nil {
		return nil, err
	}
	var ts [3]*tensor.Tensor
	for i := range ts {
		if i >= len(in) || !in[i].Present || in[i].Const == nil {
			return []ir.Type{unknownDims(x.DType, 1)}, nil
		}
		ts[i] = in[i].Const
	}
	dt, v, err := rangeScalars(ts[:])
	if err != nil {
		return nil, err
	}
	cnt, err := rangeLen(dt, v)
	if err != nil {
		return nil, err
	}
	return []ir.Type{ir.StaticType(dt, []int{cnt})}, nil
}
