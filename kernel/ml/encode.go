package ml

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// keyIndex maps the keys of an encoder to their positions: strings by
// value, integers by value, floats by value with -0 equal to +0 and every
// NaN equal to every other (so a NaN key catches NaN inputs).
type keyIndex struct {
	dt   tensor.DType
	strs map[string]int
	nums map[uint64]int
}

// newKeyIndex indexes keys (a 1-D tensor); a repeated key keeps its first
// position.
func newKeyIndex(keys *tensor.Tensor) *keyIndex {
	ix := &keyIndex{dt: keys.DType}
	if s, ok := keys.Data.([]string); ok {
		ix.strs = make(map[string]int, len(s))
		for i, k := range s {
			if _, dup := ix.strs[k]; !dup {
				ix.strs[k] = i
			}
		}
		return ix
	}
	ix.nums = make(map[uint64]int, keys.Len())
	forNumKeys(keys, func(i int, k uint64) {
		if _, dup := ix.nums[k]; !dup {
			ix.nums[k] = i
		}
	})
	return ix
}

// forNumKeys calls f with each element's canonical key.
func forNumKeys(t *tensor.Tensor, f func(i int, k uint64)) bool {
	fk := func(v float64) uint64 {
		switch {
		case v != v:
			return 0x7ff8000000000001
		case v == 0:
			return 0
		}
		return math.Float64bits(v)
	}
	switch d := t.Data.(type) {
	case []int64:
		for i, v := range d {
			f(i, uint64(v))
		}
	case []int32:
		for i, v := range d {
			f(i, uint64(int64(v)))
		}
	case []int16:
		for i, v := range d {
			f(i, uint64(int64(v)))
		}
	case []float32:
		for i, v := range d {
			f(i, fk(float64(v)))
		}
	case []float64:
		for i, v := range d {
			f(i, fk(v))
		}
	default:
		return false
	}
	return true
}

// lookup returns, for each element of x, the position of its key or -1.
func (ix *keyIndex) lookup(n *ir.Node, x *tensor.Tensor) ([]int, error) {
	if x.DType != ix.dt {
		return nil, errorf(n, "input has dtype %v, the keys are %v", x.DType, ix.dt)
	}
	pos := make([]int, x.Len())
	if s, ok := x.Data.([]string); ok {
		for i, v := range s {
			if k, ok := ix.strs[v]; ok {
				pos[i] = k
			} else {
				pos[i] = -1
			}
		}
		return pos, nil
	}
	forNumKeys(x, func(i int, k uint64) {
		if p, ok := ix.nums[k]; ok {
			pos[i] = p
		} else {
			pos[i] = -1
		}
	})
	return pos, nil
}

// gather returns a tensor of shape with element i values[pos[i]], or def[0]
// where pos[i] is -1. values and def have one dtype.
func gather(values, def *tensor.Tensor, pos []int, shape []int) *tensor.Tensor {
	y := tensor.New(values.DType, shape...)
	switch v := values.Data.(type) {
	case []string:
		gatherInto(y.Data.([]string), v, def.Data.([]string)[0], pos)
	case []int64:
		gatherInto(y.Data.([]int64), v, def.Data.([]int64)[0], pos)
	case []int32:
		gatherInto(y.Data.([]int32), v, def.Data.([]int32)[0], pos)
	case []int16:
		gatherInto(y.Data.([]int16), v, def.Data.([]int16)[0], pos)
	case []float32:
		gatherInto(y.Data.([]float32), v, def.Data.([]float32)[0], pos)
	case []float64:
		gatherInto(y.Data.([]float64), v, def.Data.([]float64)[0], pos)
	}
	return y
}

func gatherInto[T any](y, v []T, def T, pos []int) {
	for i, p := range pos {
		if p < 0 {
			y[i] = def
		} else {
			y[i] = v[p]
		}
	}
}

// encoder is a parsed LabelEncoder: keys, values and the default value.
type encoder struct {
	keys, values, def *tensor.Tensor
}

// encodable lists the dtypes a LabelEncoder's keys and values may have.
func encodable(dt tensor.DType) bool {
	switch dt {
	case tensor.String, tensor.Int64, tensor.Int32, tensor.Int16, tensor.Float32, tensor.Float64:
		return true
	}
	return false
}

// parseLabelEncoder reads the three attribute forms: opset 1's
// classes_strings (string -> its index, int64 -> the string at that
// index; in is the input dtype that picks the direction), opset 2's
// keys_*/values_* lists with default_*, and opset 4's keys_tensor,
// values_tensor and default_tensor.
func parseLabelEncoder(n *ir.Node, in tensor.DType) (*encoder, error) {
	if n.Has("classes_strings") {
		cls := stringsAttr(n, "classes_strings")
		if len(cls) > maxAttr {
			return nil, errorf(n, "%d classes_strings is too many", len(cls))
		}
		idx := make([]int64, len(cls))
		for i := range idx {
			idx[i] = int64(i)
		}
		strs := tensor.From(cls, len(cls))
		ints := tensor.From(idx, len(idx))
		switch in {
		case tensor.String, tensor.Undefined:
			return &encoder{keys: strs, values: ints, def: tensor.From([]int64{n.Int("default_int64", -1)}, 1)}, nil
		case tensor.Int64:
			return &encoder{keys: ints, values: strs, def: tensor.From([]string{n.String("default_string", "_Unused")}, 1)}, nil
		}
		return nil, errorf(n, "opset-1 form maps strings and int64s, input is %v", in)
	}
	e := &encoder{}
	var err error
	if e.keys, err = encoderList(n, "keys"); err != nil {
		return nil, err
	}
	if e.values, err = encoderList(n, "values"); err != nil {
		return nil, err
	}
	if e.keys.Len() != e.values.Len() {
		return nil, errorf(n, "%d keys and %d values", e.keys.Len(), e.values.Len())
	}
	if a, ok := n.Attrs["default_tensor"]; ok && a.T != nil {
		if a.T.DType != e.values.DType || a.T.Len() != 1 {
			return nil, errorf(n, "default_tensor is %v, want one %v", a.T, e.values.DType)
		}
		e.def = a.T.Reshaped(1)
		return e, nil
	}
	switch e.values.DType {
	case tensor.String:
		e.def = tensor.From([]string{n.String("default_string", "_Unused")}, 1)
	case tensor.Float32:
		e.def = tensor.From([]float32{n.Float("default_float", float32(math.Copysign(0, -1)))}, 1)
	case tensor.Float64:
		e.def = tensor.From([]float64{float64(n.Float("default_float", float32(math.Copysign(0, -1))))}, 1)
	default:
		e.def = tensor.New(e.values.DType, 1)
		v := n.Int("default_int64", -1)
		switch d := e.def.Data.(type) {
		case []int64:
			d[0] = v
		case []int32:
			d[0] = int32(v)
		case []int16:
			d[0] = int16(v)
		}
	}
	return e, nil
}

// encoderList returns keys_* or values_* (which), exactly one form set.
func encoderList(n *ir.Node, which string) (*tensor.Tensor, error) {
	var found []*tensor.Tensor
	if a, ok := n.Attrs[which+"_strings"]; ok {
		found = append(found, tensor.From(append([]string{}, a.Strings...), len(a.Strings)))
	}
	if a, ok := n.Attrs[which+"_int64s"]; ok {
		found = append(found, tensor.From(append([]int64{}, a.Ints...), len(a.Ints)))
	}
	if a, ok := n.Attrs[which+"_floats"]; ok {
		found = append(found, tensor.From(append([]float32{}, a.Floats...), len(a.Floats)))
	}
	if a, ok := n.Attrs[which+"_tensor"]; ok && a.T != nil {
		if !encodable(a.T.DType) {
			return nil, errorf(n, "%s_tensor has dtype %v", which, a.T.DType)
		}
		found = append(found, a.T.Reshaped(a.T.Len()))
	}
	switch {
	case len(found) == 0:
		return nil, errorf(n, "no %s (%s_strings, %s_int64s, %s_floats or %s_tensor)", which, which, which, which, which)
	case len(found) > 1:
		return nil, errorf(n, "more than one form of %s is set", which)
	case found[0].Len() > maxAttr:
		return nil, errorf(n, "%d %s is too many", found[0].Len(), which)
	}
	return found[0], nil
}

func runLabelEncoder(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return runEncoder(n, in, parseLabelEncoder)
}

// runEncoder maps each element of input 0 through the encoder that parse
// reads for the input's dtype.
func runEncoder(n *ir.Node, in []*tensor.Tensor, parse func(*ir.Node, tensor.DType) (*encoder, error)) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	e, err := parse(n, x.DType)
	if err != nil {
		return nil, err
	}
	pos, err := newKeyIndex(e.keys).lookup(n, x)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{gather(e.values, e.def, pos, x.Shape)}, nil
}

func inferLabelEncoder(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if !present(in, 0) {
		return nil, errorf(n, "missing input X")
	}
	e, err := parseLabelEncoder(n, in[0].Type.DType)
	if err != nil {
		return nil, err
	}
	if dt := in[0].Type.DType; dt != tensor.Undefined && dt != e.keys.DType {
		return nil, errorf(n, "input has dtype %v, the keys are %v", dt, e.keys.DType)
	}
	t := in[0].Type
	t.DType = e.values.DType
	return []ir.Type{t}, nil
}

// runCategoryMapper maps strings to int64s (cats_strings[i] -> cats_int64s[i])
// or int64s to strings, by the input's dtype, with default_int64 or
// default_string for what is not in the table.
func runCategoryMapper(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return runEncoder(n, in, parseCategoryMapper)
}

func parseCategoryMapper(n *ir.Node, in tensor.DType) (*encoder, error) {
	ints, strs := n.Ints("cats_int64s", nil), stringsAttr(n, "cats_strings")
	if len(ints) != len(strs) {
		return nil, errorf(n, "cats_int64s has %d values and cats_strings %d", len(ints), len(strs))
	}
	if len(ints) > maxAttr {
		return nil, errorf(n, "%d categories is too many", len(ints))
	}
	it, st := tensor.From(append([]int64{}, ints...), len(ints)), tensor.From(append([]string{}, strs...), len(strs))
	switch in {
	case tensor.String:
		return &encoder{keys: st, values: it, def: tensor.From([]int64{n.Int("default_int64", -1)}, 1)}, nil
	case tensor.Int64:
		return &encoder{keys: it, values: st, def: tensor.From([]string{n.String("default_string", "_Unused")}, 1)}, nil
	}
	return nil, errorf(n, "input has dtype %v (string or int64 only)", in)
}

func inferCategoryMapper(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if !present(in, 0) {
		return nil, errorf(n, "missing input X")
	}
	t := in[0].Type
	if t.DType == tensor.Undefined {
		return []ir.Type{kernel.UnknownRank(tensor.Undefined)}, nil
	}
	e, err := parseCategoryMapper(n, t.DType)
	if err != nil {
		return nil, err
	}
	t.DType = e.values.DType
	return []ir.Type{t}, nil
}

// runOneHotEncoder appends an axis of len(cats) to X's shape holding 1 at
// the position of each element's category. Numeric inputs are truncated to
// int64 first (ONNX Runtime). An element in no category gives a zero row
// when zeros is 1 (the default) and an error when it is 0.
func runOneHotEncoder(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	cats, err := oneHotCats(n)
	if err != nil {
		return nil, err
	}
	k := cats.Len()
	if x.Len() > 0 && k > maxAttr/x.Len() {
		return nil, errorf(n, "%d elements with %d categories is too large an output", x.Len(), k)
	}
	key := x
	if cats.DType == tensor.Int64 {
		if x.DType == tensor.String {
			return nil, errorf(n, "string input with cats_int64s")
		}
		v, err := truncInts(x)
		if err != nil {
			return nil, errorf(n, "input has dtype %v", x.DType)
		}
		key = tensor.From(v, x.Shape...)
	} else if x.DType != tensor.String {
		return nil, errorf(n, "input has dtype %v, cats_strings needs strings", x.DType)
	}
	pos, err := newKeyIndex(cats).lookup(n, key)
	if err != nil {
		return nil, err
	}
	zeros := n.Int("zeros", 1) != 0
	y := tensor.New(tensor.Float32, append(append([]int{}, x.Shape...), k)...)
	out := y.Data.([]float32)
	for i, p := range pos {
		if p < 0 {
			if !zeros {
				return nil, errorf(n, "element %d is in no category and zeros is 0", i)
			}
			continue
		}
		out[i*k+p] = 1
	}
	return []*tensor.Tensor{y}, nil
}

func oneHotCats(n *ir.Node) (*tensor.Tensor, error) {
	ints, strs := n.Ints("cats_int64s", nil), stringsAttr(n, "cats_strings")
	switch {
	case len(ints) > 0 && len(strs) > 0:
		return nil, errorf(n, "both cats_int64s and cats_strings are set")
	case len(ints) > maxAttr || len(strs) > maxAttr:
		return nil, errorf(n, "too many categories")
	case len(ints) > 0:
		return tensor.From(append([]int64{}, ints...), len(ints)), nil
	case len(strs) > 0:
		return tensor.From(append([]string{}, strs...), len(strs)), nil
	}
	return nil, errorf(n, "one of cats_int64s and cats_strings is required")
}

func inferOneHotEncoder(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if !present(in, 0) {
		return nil, errorf(n, "missing input X")
	}
	cats, err := oneHotCats(n)
	if err != nil {
		return nil, err
	}
	t := in[0].Type
	if !t.RankKnown {
		return []ir.Type{kernel.UnknownRank(tensor.Float32)}, nil
	}
	return []ir.Type{rowsType(tensor.Float32, append(append([]ir.Dim{}, t.Shape...), ir.Fixed(cats.Len()))...)}, nil
}

// truncInts returns integer or float elements as int64, floats truncated
// toward zero. A NaN or a float out of int64's range becomes MinInt64+1,
// a value no real category list holds (Go leaves that conversion to the
// platform).
func truncInts(x *tensor.Tensor) ([]int64, error) {
	var f []float64
	switch d := x.Data.(type) {
	case []float32:
		f = make([]float64, len(d))
		for i, v := range d {
			f[i] = float64(v)
		}
	case []float64:
		f = d
	default:
		return x.Int64s()
	}
	out := make([]int64, len(f))
	for i, v := range f {
		if v != v || v >= 1<<63 || v <= -(1<<63) {
			out[i] = math.MinInt64 + 1
		} else {
			out[i] = int64(v)
		}
	}
	return out, nil
}
