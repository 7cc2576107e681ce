package shape

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// node builds a node of the given op and opset with attributes.
func node(op string, version int64, nOut int, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{OpType: op, Version: version, Attrs: map[string]*ir.Attr{}}
	for i := 0; i < nOut; i++ {
		n.Outputs = append(n.Outputs, "y"+string(rune('0'+i)))
	}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func ai(name string, v int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
func ais(name string, v ...int64) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v}
}
func as(name, v string) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }

func i64(shape []int, v ...int64) *tensor.Tensor { return tensor.From(v, shape...) }
func f32(shape []int, v ...float32) *tensor.Tensor {
	return tensor.From(v, shape...)
}

func run(t *testing.T, n *ir.Node, in ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	op := Ops()[n.OpType]
	out, err := op.Run(nil, n, in)
	if err != nil {
		t.Fatalf("%s: %v", n.OpType, err)
	}
	return out
}

func runErr(n *ir.Node, in ...*tensor.Tensor) error {
	op := Ops()[n.OpType]
	_, err := op.Run(nil, n, in)
	return err
}

func same(t *testing.T, got, want *tensor.Tensor) {
	t.Helper()
	if got.DType != want.DType || !reflect.DeepEqual(append([]int{}, got.Shape...), append([]int{}, want.Shape...)) || !reflect.DeepEqual(got.Data, want.Data) {
		t.Errorf("got %v %v, want %v %v", got, got.Data, want, want.Data)
	}
}

func TestReshapeSemantics(t *testing.T) {
	x := f32([]int{2, 3, 4}, make([]float32, 24)...)
	cases := []struct {
		spec      []int64
		allowZero int64
		want      []int
		err       string
	}{
		{[]int64{0, -1}, 0, []int{2, 12}, ""},
		{[]int64{-1, 0, 2}, 0, []int{4, 3, 2}, ""},
		{[]int64{4, 0, 2}, 0, []int{4, 3, 2}, ""},
		{[]int64{0, 4}, 1, nil, "cannot reshape"},
		{[]int64{-1, -1}, 0, nil, "more than one -1"},
		{[]int64{5, -1}, 0, nil, "cannot reshape"},
		{[]int64{1 << 32, 1 << 32}, 0, nil, "too many"},
	}
	for _, c := range cases {
		n := node("Reshape", 14, 1, ai("allowzero", c.allowZero))
		err := runErr(n, x, i64([]int{len(c.spec)}, c.spec...))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("spec %v: error %v, want %q", c.spec, err, c.err)
			}
			continue
		}
		out := run(t, n, x, i64([]int{len(c.spec)}, c.spec...))
		if !reflect.DeepEqual(out[0].Shape, c.want) {
			t.Errorf("spec %v: shape %v, want %v", c.spec, out[0].Shape, c.want)
		}
	}
	// allowzero: a 0 is a real zero-size dimension.
	e := f32([]int{0, 3})
	out := run(t, node("Reshape", 14, 1, ai("allowzero", 1)), e, i64([]int{3}, 3, 0, 5))
	if !reflect.DeepEqual(out[0].Shape, []int{3, 0, 5}) {
		t.Errorf("allowzero shape %v", out[0].Shape)
	}
}

func TestTransposeStrings(t *testing.T) {
	x := tensor.From([]string{"a", "b", "c", "d", "e", "f"}, 2, 3)
	out := run(t, node("Transpose", 13, 1), x)
	same(t, out[0], tensor.From([]string{"a", "d", "b", "e", "c", "f"}, 3, 2))
}

func TestPadModes(t *testing.T) {
	x := f32([]int{1, 3}, 1, 2, 3)
	pads := i64([]int{4}, 0, 4, 0, 4)
	cases := map[string][]float32{
		"constant": {0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0},
		"edge":     {1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3},
		"reflect":  {1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3},
		"wrap":     {3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1},
	}
	for mode, want := range cases {
		out := run(t, node("Pad", 19, 1, as("mode", mode)), x, pads)
		same(t, out[0], f32([]int{1, 11}, want...))
	}
	// Negative pads crop; a constant value input fills.
	out := run(t, node("Pad", 13, 1), x, i64([]int{4}, 0, -1, 0, 2), f32(nil, 9))
	same(t, out[0], f32([]int{1, 4}, 2, 3, 9, 9))
	// Opset 2: attributes.
	out = run(t, node("Pad", 2, 1, ais("pads", 0, 1, 0, 0), &ir.Attr{Name: "value", Kind: ir.AttrFloat, F: 7}), x)
	same(t, out[0], f32([]int{1, 4}, 7, 1, 2, 3))
}

func TestSliceNegativeSteps(t *testing.T) {
	x := i64([]int{5}, 0, 1, 2, 3, 4)
	n := node("Slice", 13, 1)
	out := run(t, n, x, i64([]int{1}, -1), i64([]int{1}, -1<<62), i64([]int{1}, 0), i64([]int{1}, -2))
	same(t, out[0], i64([]int{3}, 4, 2, 0))
	out = run(t, node("Slice", 1, 1, ais("starts", 1), ais("ends", 1000)), x)
	same(t, out[0], i64([]int{4}, 1, 2, 3, 4))
	if err := runErr(n, x, i64([]int{1}, 0), i64([]int{1}, 1), i64([]int{1}, 0), i64([]int{1}, 0)); err == nil {
		t.Error("step 0 accepted")
	}
}

func TestGatherScatterBounds(t *testing.T) {
	x := f32([]int{3}, 1, 2, 3)
	out := run(t, node("Gather", 13, 1), x, i64([]int{2}, -1, 0))
	same(t, out[0], f32([]int{2}, 3, 1))
	for _, n := range []*ir.Node{node("Gather", 13, 1), node("GatherElements", 13, 1)} {
		if err := runErr(n, x, i64([]int{1}, 3)); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s: index 3 of 3: %v", n.OpType, err)
		}
	}
	if err := runErr(node("ScatterElements", 16, 1), x, i64([]int{1}, -4), f32([]int{1}, 0)); err == nil {
		t.Error("ScatterElements index -4 of 3 accepted")
	}
	if err := runErr(node("ScatterND", 16, 1), x, i64([]int{1, 1}, 5), f32([]int{1}, 0)); err == nil {
		t.Error("ScatterND index 5 of 3 accepted")
	}
	// Duplicate indices apply in order.
	out = run(t, node("ScatterElements", 18, 1, as("reduction", "add")), x, i64([]int{3}, 0, 0, -1), f32([]int{3}, 10, 20, 30))
	same(t, out[0], f32([]int{3}, 31, 2, 33))
	out = run(t, node("ScatterND", 18, 1, as("reduction", "max")), x, i64([]int{2, 1}, 1, 1), f32([]int{2}, 5, 4))
	same(t, out[0], f32([]int{3}, 1, 5, 3))
	out = run(t, node("ScatterElements", 13, 1), tensor.From([]string{"a", "b"}, 2), i64([]int{1}, 1), tensor.From([]string{"z"}, 1))
	same(t, out[0], tensor.From([]string{"a", "z"}, 2))
}

func TestTopKTies(t *testing.T) {
	x := f32([]int{5}, 1, 3, 3, 2, 3)
	out := run(t, node("TopK", 11, 2), x, i64([]int{1}, 3))
	same(t, out[0], f32([]int{3}, 3, 3, 3))
	same(t, out[1], i64([]int{3}, 1, 2, 4))
	out = run(t, node("TopK", 11, 2, ai("largest", 0)), x, i64([]int{1}, 2))
	same(t, out[1], i64([]int{2}, 0, 3))
	if err := runErr(node("TopK", 11, 2), x, i64([]int{1}, 6)); err == nil {
		t.Error("K 6 of 5 accepted")
	}
}

func TestArgMaxLastIndex(t *testing.T) {
	x := f32([]int{2, 3}, 1, 5, 5, 7, 0, 7)
	out := run(t, node("ArgMax", 13, 1, ai("axis", 1), ai("keepdims", 0), ai("select_last_index", 1)), x)
	same(t, out[0], i64([]int{2}, 2, 2))
	out = run(t, node("ArgMin", 13, 1, ai("axis", -1)), x)
	same(t, out[0], i64([]int{2, 1}, 0, 1))
}

func TestUnique(t *testing.T) {
	x := f32([]int{6}, 2, 1, 1, 3, 4, 3)
	for _, c := range []struct {
		sorted           int64
		y                []float32
		idx, inv, counts []int64
	}{
		{1, []float32{1, 2, 3, 4}, []int64{1, 0, 3, 4}, []int64{1, 0, 0, 2, 3, 2}, []int64{2, 1, 2, 1}},
		{0, []float32{2, 1, 3, 4}, []int64{0, 1, 3, 4}, []int64{0, 1, 1, 2, 3, 2}, []int64{1, 2, 2, 1}},
	} {
		out := run(t, node("Unique", 11, 4, ai("sorted", c.sorted)), x)
		same(t, out[0], f32([]int{4}, c.y...))
		same(t, out[1], i64([]int{4}, c.idx...))
		same(t, out[2], i64([]int{6}, c.inv...))
		same(t, out[3], i64([]int{4}, c.counts...))
	}
}

func TestCumSumHalfAndReverse(t *testing.T) {
	x := i64([]int{4}, 1, 2, 3, 4)
	out := run(t, node("CumSum", 14, 1, ai("exclusive", 1), ai("reverse", 1)), x, tensor.Scalar(int32(0)))
	same(t, out[0], i64([]int{4}, 9, 7, 4, 0))
	h := tensor.From([]tensor.Half{tensor.ToHalf(1), tensor.ToHalf(2)}, 2)
	out = run(t, node("CumSum", 14, 1), h, tensor.Scalar(int64(0)))
	same(t, out[0], tensor.From([]tensor.Half{tensor.ToHalf(1), tensor.ToHalf(3)}, 2))
}

func TestSplitVersions(t *testing.T) {
	x := i64([]int{5}, 1, 2, 3, 4, 5)
	outs := run(t, node("Split", 18, 3, ai("num_outputs", 3)), x)
	same(t, outs[2], i64([]int{1}, 5))
	outs = run(t, node("Split", 11, 2, ais("split", 1, 4)), x)
	same(t, outs[1], i64([]int{4}, 2, 3, 4, 5))
	outs = run(t, node("Split", 13, 2), x, i64([]int{2}, 3, 2))
	same(t, outs[0], i64([]int{3}, 1, 2, 3))
	if err := runErr(node("Split", 13, 2), x); err == nil {
		t.Error("5 split into 2 equal parts accepted")
	}
}

func TestConstantAttrs(t *testing.T) {
	cases := []struct {
		attr *ir.Attr
		want *tensor.Tensor
	}{
		{&ir.Attr{Name: "value_float", Kind: ir.AttrFloat, F: 2}, tensor.Scalar(float32(2))},
		{&ir.Attr{Name: "value_ints", Kind: ir.AttrInts, Ints: []int64{1, 2}}, i64([]int{2}, 1, 2)},
		{&ir.Attr{Name: "value_strings", Kind: ir.AttrStrings, Strings: []string{"x"}}, tensor.From([]string{"x"}, 1)},
	}
	for _, c := range cases {
		n := node("Constant", 13, 1, c.attr)
		same(t, run(t, n)[0], c.want)
		ty, err := Ops()["Constant"].Infer(n, nil)
		if err != nil || ty[0].String() != ir.TensorType(c.want).String() {
			t.Errorf("%s: infer %v %v", c.attr.Name, ty, err)
		}
	}
}

func TestDropoutMask(t *testing.T) {
	x := f32([]int{2}, 1, 2)
	outs := run(t, node("Dropout", 13, 2), x, f32(nil, 0.5), tensor.Scalar(false))
	same(t, outs[0], x)
	same(t, outs[1], tensor.From([]bool{true, true}, 2))
	if err := runErr(node("Dropout", 13, 1), x, f32(nil, 0.5), tensor.Scalar(true)); err == nil {
		t.Error("training mode accepted")
	}
}

func TestMisc(t *testing.T) {
	// OneHot: out-of-range indices give all-off rows.
	out := run(t, node("OneHot", 11, 1), i64([]int{3}, 0, -1, 7), f32(nil, 3), f32([]int{2}, 0, 1))
	same(t, out[0], f32([]int{3, 3}, 1, 0, 0, 0, 0, 1, 0, 0, 0))
	// NonZero of a bool matrix.
	out = run(t, node("NonZero", 13, 1), tensor.From([]bool{true, false, false, true}, 2, 2))
	same(t, out[0], i64([]int{2, 2}, 0, 1, 0, 1))
	// Range with integer ceil.
	out = run(t, node("Range", 11, 1), tensor.Scalar(int32(10)), tensor.Scalar(int32(4)), tensor.Scalar(int32(-3)))
	same(t, out[0], tensor.From([]int32{10, 7}, 2))
	// Trilu lower with k.
	out = run(t, node("Trilu", 14, 1, ai("upper", 0)), i64([]int{2, 2}, 1, 2, 3, 4), tensor.Scalar(int64(-1)))
	same(t, out[0], i64([]int{2, 2}, 0, 0, 3, 0))
	// Tile of bools; Expand of strings.
	out = run(t, node("Tile", 13, 1), tensor.From([]bool{true, false}, 2), i64([]int{1}, 2))
	same(t, out[0], tensor.From([]bool{true, false, true, false}, 4))
	out = run(t, node("Expand", 13, 1), tensor.From([]string{"a", "b"}, 2, 1), i64([]int{2}, 1, 2))
	same(t, out[0], tensor.From([]string{"a", "a", "b", "b"}, 2, 2))
	// Shape with start/end.
	out = run(t, node("Shape", 15, 1, ai("start", -2), ai("end", 100)), f32([]int{2, 3, 4}, make([]float32, 24)...))
	same(t, out[0], i64([]int{2}, 3, 4))
	// CenterCropPad: crop one axis, pad the other.
	out = run(t, node("CenterCropPad", 18, 1), i64([]int{3, 1}, 1, 2, 3), i64([]int{2}, 1, 3))
	same(t, out[0], i64([]int{1, 3}, 0, 2, 0))
}

func TestInfer(t *testing.T) {
	sym := ir.Dim{Value: -1, Param: "N"}
	xIn := func(dims ...ir.Dim) ir.InferInput {
		return ir.InferInput{Present: true, Type: ir.Type{DType: tensor.Float32, Shape: dims, RankKnown: true}}
	}
	constIn := func(v ...int64) ir.InferInput {
		c := i64([]int{len(v)}, v...)
		return ir.InferInput{Present: true, Type: ir.TensorType(c), Const: c}
	}
	varIn := func(l int) ir.InferInput {
		return ir.InferInput{Present: true, Type: ir.StaticType(tensor.Int64, []int{l})}
	}
	cases := []struct {
		n    *ir.Node
		in   []ir.InferInput
		want string
	}{
		{node("Reshape", 14, 1), []ir.InferInput{xIn(sym, ir.Fixed(4)), constIn(0, 2, 2)}, "float32[N,2,2]"},
		{node("Reshape", 14, 1), []ir.InferInput{xIn(sym, ir.Fixed(4)), varIn(3)}, "float32[?,?,?]"},
		{node("Reshape", 14, 1), []ir.InferInput{xIn(ir.Fixed(3), ir.Fixed(4)), constIn(-1, 6)}, "float32[2,6]"},
		{node("Flatten", 13, 1), []ir.InferInput{xIn(sym, ir.Fixed(3), ir.Fixed(4))}, "float32[N,12]"},
		{node("Unsqueeze", 13, 1), []ir.InferInput{xIn(sym), constIn(0, -1)}, "float32[1,N,1]"},
		{node("Squeeze", 11, 1, ais("axes", 1)), []ir.InferInput{xIn(sym, ir.Fixed(1))}, "float32[N]"},
		{node("Expand", 13, 1), []ir.InferInput{xIn(sym, ir.Fixed(1)), constIn(1, 5)}, "float32[N,5]"},
		{node("Tile", 13, 1), []ir.InferInput{xIn(sym, ir.Fixed(2)), constIn(1, 3)}, "float32[N,6]"},
		{node("Slice", 13, 1), []ir.InferInput{xIn(sym, ir.Fixed(10)), constIn(1), constIn(-1), constIn(1)}, "float32[N,8]"},
		{node("Slice", 13, 1), []ir.InferInput{xIn(sym, ir.Fixed(10)), varIn(1), varIn(1), constIn(1)}, "float32[N,?]"},
		{node("Concat", 13, 1, ai("axis", 1)), []ir.InferInput{xIn(sym, ir.Fixed(2)), xIn(sym, ir.Fixed(3))}, "float32[N,5]"},
		{node("Shape", 15, 1, ai("start", 1)), []ir.InferInput{xIn(sym, ir.Fixed(2), ir.Fixed(3))}, "int64[2]"},
		{node("ConstantOfShape", 9, 1), []ir.InferInput{constIn(2, 3)}, "float32[2,3]"},
		{node("ConstantOfShape", 9, 1), []ir.InferInput{varIn(2)}, "float32[?,?]"},
		{node("Gather", 13, 1, ai("axis", 1)), []ir.InferInput{xIn(sym, ir.Fixed(5)), xIn(ir.Fixed(2), ir.Fixed(3))}, "float32[N,2,3]"},
		{node("Pad", 13, 1), []ir.InferInput{xIn(sym, ir.Fixed(5)), constIn(0, 1, 0, 2)}, "float32[N,8]"},
		{node("TopK", 11, 2), []ir.InferInput{xIn(sym, ir.Fixed(5)), constIn(2)}, "float32[N,2]"},
		{node("NonZero", 13, 1), []ir.InferInput{xIn(sym, ir.Fixed(5))}, "int64[2,?]"},
		{node("Unique", 11, 4), []ir.InferInput{xIn(ir.Fixed(2), ir.Fixed(5))}, "float32[?]"},
		{node("Split", 13, 2, ai("axis", 1)), []ir.InferInput{xIn(sym, ir.Fixed(5)), constIn(2, 3)}, "float32[N,2]"},
		{node("DepthToSpace", 13, 1, ai("blocksize", 2)), []ir.InferInput{xIn(sym, ir.Fixed(8), ir.Fixed(2), ir.Fixed(3))}, "float32[N,2,4,6]"},
		{node("OneHot", 11, 1), []ir.InferInput{xIn(sym), constIn(4), xIn(ir.Fixed(2))}, "float32[N,4]"},
	}
	for _, c := range cases {
		got, err := Ops()[c.n.OpType].Infer(c.n, c.in)
		if err != nil {
			t.Errorf("%s: %v", c.n.OpType, err)
			continue
		}
		if got[0].String() != c.want {
			t.Errorf("%s: inferred %v, want %s", c.n.OpType, got[0], c.want)
		}
	}
	// Absent optional inputs never make a shape function panic.
	for name, op := range Ops() {
		for k := 0; k < 3; k++ {
			in := make([]ir.InferInput, k)
			if k > 0 {
				in[0] = xIn(sym)
			}
			op.Infer(node(name, 18, 1), in)
			op.Run(nil, node(name, 18, 1), make([]*tensor.Tensor, k))
		}
	}
}

// TestNoPanic feeds every op hostile inputs and attributes: errors are
// fine, panics are not.
func TestNoPanic(t *testing.T) {
	vals := []*tensor.Tensor{
		f32([]int{2, 3}, 1, 2, 3, 4, 5, 6),
		f32(nil, 3),
		f32([]int{0, 2}),
		i64([]int{1}, -100),
		i64([]int{2}, 1<<40, -1),
		i64([]int{4}, 0, -1, 7, 1<<62),
		i64(nil, 0),
		tensor.From([]bool{true, false, true}, 3),
		tensor.From([]string{"a"}, 1, 1),
	}
	attrs := [][]*ir.Attr{
		nil,
		{ai("axis", 5), ai("blocksize", 0), ais("perm", 0, 0), ais("axes", 9)},
		{ai("axis", -1), ai("blocksize", 1<<40), ais("perm", 1, 0), ais("split", 1, 1<<62), ai("num_outputs", 0)},
		{ai("axis", 1), ais("axes", -1), as("mode", "reflect"), ai("keepdims", 0), ai("batch_dims", 3)},
	}
	for name, op := range Ops() {
		for _, ver := range []int64{1, 11, 18} {
			for _, at := range attrs {
				for a := range vals {
					for b := range vals {
						for c := range vals[:4] {
							n := node(name, ver, 2, at...)
							func() {
								defer func() {
									if r := recover(); r != nil {
										t.Fatalf("%s v%d %v on %v, %v, %v: panic %v", name, ver, at, vals[a], vals[b], vals[c], r)
									}
								}()
								op.Run(nil, n, []*tensor.Tensor{vals[a], vals[b], vals[c]})
								in := []ir.InferInput{
									{Present: true, Type: ir.TensorType(vals[a]), Const: vals[a]},
									{Present: true, Type: ir.TensorType(vals[b]), Const: vals[b]},
									{Present: true, Type: ir.TensorType(vals[c])},
								}
								op.Infer(n, in)
							}()
						}
					}
				}
			}
		}
	}
}
