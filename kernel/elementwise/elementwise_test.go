package elementwise

import (
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

func run(t *testing.T, op string, attrs map[string]*ir.Attr, version int64, in ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	out, err := try(op, attrs, version, in...)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return out
}

func try(op string, attrs map[string]*ir.Attr, version int64, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	n := &ir.Node{OpType: op, Version: version, Attrs: attrs}
	o, ok := Ops()[op]
	if !ok {
		panic("no op " + op)
	}
	outs, err := o.Run(&kernel.Ctx{}, n, in)
	if err != nil {
		return nil, err
	}
	if err := outs[0].Check(); err != nil {
		return nil, err
	}
	return outs[0], nil
}

func intAttr(name string, v int64) map[string]*ir.Attr {
	return map[string]*ir.Attr{name: {Name: name, Kind: ir.AttrInt, I: v}}
}

// TestBroadcastPlan checks the row plan against a plain per-element walk
// (kernel.NewIndexer) on random shapes, for two and three inputs.
func TestBroadcastPlan(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	randShape := func(out []int) []int {
		k := r.Intn(len(out) + 1)
		s := append([]int{}, out[len(out)-k:]...)
		for i := range s {
			if r.Intn(3) == 0 {
				s[i] = 1
			}
		}
		return s
	}
	for iter := 0; iter < 300; iter++ {
		out := make([]int, r.Intn(5))
		for i := range out {
			out[i] = 1 + r.Intn(4)
		}
		as, bs, cs := randShape(out), randShape(out), randShape(out)
		full, err := kernel.BroadcastShapes(as, bs, cs)
		if err != nil {
			t.Fatal(err)
		}
		a := make([]int32, tensor.NumElems(as))
		b := make([]int32, tensor.NumElems(bs))
		c := make([]bool, tensor.NumElems(cs))
		for i := range a {
			a[i] = int32(r.Intn(1000))
		}
		for i := range b {
			b[i] = int32(r.Intn(1000))
		}
		for i := range c {
			c[i] = r.Intn(2) == 0
		}
		got := run(t, "Add", nil, 14, tensor.From(a, as...), tensor.From(b, bs...))
		ab, _ := kernel.BroadcastShapes(as, bs)
		want := make([]int32, tensor.NumElems(ab))
		it := kernel.NewIndexer(ab, as, bs)
		for i := range want {
			want[i] = a[it.Offs[0]] + b[it.Offs[1]]
			it.Next()
		}
		if !reflect.DeepEqual(got.Data, want) || !reflect.DeepEqual(got.Shape, ab) {
			t.Fatalf("Add %v + %v: got %v %v, want %v %v", as, bs, got.Shape, got.Data, ab, want)
		}
		gw := run(t, "Where", nil, 16, tensor.From(c, cs...), tensor.From(a, as...), tensor.From(b, bs...))
		ww := make([]int32, tensor.NumElems(full))
		it = kernel.NewIndexer(full, cs, as, bs)
		for i := range ww {
			if c[it.Offs[0]] {
				ww[i] = a[it.Offs[1]]
			} else {
				ww[i] = b[it.Offs[2]]
			}
			it.Next()
		}
		if !reflect.DeepEqual(gw.Data, ww) {
			t.Fatalf("Where %v %v %v: got %v, want %v", cs, as, bs, gw.Data, ww)
		}
	}
}

func TestArithFloat32FastPaths(t *testing.T) {
	a := tensor.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	row := tensor.From([]float32{10, 20, 30}, 3)
	s := tensor.Scalar(float32(2))
	for _, tc := range []struct {
		op   string
		x, y *tensor.Tensor
		want []float32
	}{
		{"Add", a, a, []float32{2, 4, 6, 8, 10, 12}},
		{"Sub", a, row, []float32{-9, -18, -27, -6, -15, -24}},
		{"Mul", s, a, []float32{2, 4, 6, 8, 10, 12}},
		{"Div", a, s, []float32{0.5, 1, 1.5, 2, 2.5, 3}},
		{"Div", row, a, []float32{10, 10, 10, 2.5, 4, 5}},
	} {
		got := run(t, tc.op, nil, 14, tc.x, tc.y)
		if !reflect.DeepEqual(got.Data, tc.want) {
			t.Errorf("%s(%v, %v) = %v, want %v", tc.op, tc.x, tc.y, got.Data, tc.want)
		}
	}
}

func TestIntegerDivAndMod(t *testing.T) {
	a := tensor.From([]int32{-7, 7, -7, 7, math.MinInt32}, 5)
	b := tensor.From([]int32{2, -2, -2, 2, -1}, 5)
	if got := run(t, "Div", nil, 14, a, b).Data; !reflect.DeepEqual(got, []int32{-3, -3, 3, 3, math.MinInt32}) {
		t.Errorf("Div = %v (want truncation toward zero)", got)
	}
	if got := run(t, "Mod", nil, 13, a, b).Data; !reflect.DeepEqual(got, []int32{1, -1, -1, 1, 0}) {
		t.Errorf("Mod fmod=0 = %v (want the divisor's sign)", got)
	}
	if got := run(t, "Mod", intAttr("fmod", 1), 13, a, b).Data; !reflect.DeepEqual(got, []int32{-1, 1, -1, 1, 0}) {
		t.Errorf("Mod fmod=1 = %v (want the dividend's sign)", got)
	}
	f := run(t, "Mod", intAttr("fmod", 1), 13, tensor.From([]float32{-4.5, 4.5}, 2), tensor.From([]float32{2, -2}, 2)).Data
	if !reflect.DeepEqual(f, []float32{-0.5, 0.5}) {
		t.Errorf("float fmod = %v", f)
	}
	zero := tensor.From([]int32{1, 0}, 2)
	for _, op := range []string{"Div", "Mod"} {
		if _, err := try(op, nil, 13, zero, zero); err == nil || !strings.Contains(err.Error(), "zero") {
			t.Errorf("%s by integer zero: err %v, want a division-by-zero error", op, err)
		}
	}
}

func TestErrorsNotPanics(t *testing.T) {
	f := tensor.From([]float32{1, 2, 3}, 3)
	for _, tc := range []struct {
		op string
		in []*tensor.Tensor
	}{
		{"Add", []*tensor.Tensor{f, tensor.From([]float32{1, 2}, 2)}},
		{"Add", []*tensor.Tensor{f, tensor.From([]int32{1, 2, 3}, 3)}},
		{"Add", []*tensor.Tensor{f}},
		{"Add", []*tensor.Tensor{f, nil}},
		{"And", []*tensor.Tensor{f, f}},
		{"Where", []*tensor.Tensor{f, f, f}},
		{"BitShift", []*tensor.Tensor{f, f}},
		{"Clip", []*tensor.Tensor{f, tensor.From([]float32{1, 2}, 2)}},
		{"Sqrt", []*tensor.Tensor{tensor.From([]int32{4}, 1)}},
		{"Cast", []*tensor.Tensor{f}},
		{"Greater", []*tensor.Tensor{tensor.From([]bool{true}, 1), tensor.From([]bool{true}, 1)}},
		{"PRelu", []*tensor.Tensor{tensor.From([]float32{1}, 1), f}},
	} {
		if _, err := try(tc.op, nil, 13, tc.in...); err == nil {
			t.Errorf("%s(%v): no error", tc.op, tc.in)
		}
	}
	if _, err := try("Cast", intAttr("to", int64(tensor.Int32)), 13, tensor.From([]string{"abc"}, 1)); err == nil {
		t.Errorf("Cast of \"abc\" to int32: no error")
	}
}

func TestPow(t *testing.T) {
	base := tensor.From([]int64{2, -3, 5, 2}, 4)
	if got := run(t, "Pow", nil, 15, base, tensor.From([]int32{10, 3, 0, -1}, 4)).Data; !reflect.DeepEqual(got, []int64{1024, -27, 1, 0}) {
		t.Errorf("int64**int32 = %v", got)
	}
	if got := run(t, "Pow", nil, 15, base, tensor.From([]float32{0.5, 2, 1, 3}, 4)).Data; !reflect.DeepEqual(got, []int64{1, 9, 5, 8}) {
		t.Errorf("int64**float32 = %v", got)
	}
	if got := run(t, "Pow", nil, 15, tensor.From([]float32{4, 2}, 2), tensor.Scalar(int64(2))).Data; !reflect.DeepEqual(got, []float32{16, 4}) {
		t.Errorf("float32**int64 = %v", got)
	}
}

func TestUnarySemantics(t *testing.T) {
	x := tensor.From([]float32{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}, 6)
	if got := run(t, "Round", nil, 11, x).Data; !reflect.DeepEqual(got, []float32{-2, -2, -0, 0, 2, 2}) {
		t.Errorf("Round = %v (want half to even)", got)
	}
	if got := run(t, "Sign", nil, 13, tensor.From([]int8{-5, 0, 7}, 3)).Data; !reflect.DeepEqual(got, []int8{-1, 0, 1}) {
		t.Errorf("Sign int8 = %v", got)
	}
	if got := run(t, "Relu", nil, 14, tensor.From([]int32{-5, 0, 7}, 3)).Data; !reflect.DeepEqual(got, []int32{0, 0, 7}) {
		t.Errorf("Relu int32 = %v", got)
	}
	sp := run(t, "Softplus", nil, 13, tensor.From([]float32{100, -100, 0}, 3)).Data.([]float32)
	if sp[0] != 100 || sp[1] < 0 || sp[1] > 1e-30 || math.Abs(float64(sp[2])-math.Ln2) > 1e-6 {
		t.Errorf("Softplus = %v (must not overflow)", sp)
	}
	h := tensor.From([]tensor.Half{tensor.ToHalf(-1), tensor.ToHalf(4)}, 2)
	if got := run(t, "Sqrt", nil, 13, h).Data.([]tensor.Half); got[1] != tensor.ToHalf(2) || !math.IsNaN(float64(got[0].Float32())) {
		t.Errorf("Sqrt float16 = %v", got)
	}
	one := tensor.From([]float32{1, -3}, 2)
	tanh := map[string]*ir.Attr{"approximate": {Name: "approximate", Kind: ir.AttrString, S: "tanh"}}
	for _, tc := range []struct {
		op    string
		attrs map[string]*ir.Attr
		want  []float64
	}{
		{"Gelu", nil, []float64{0.8413447460685429, -0.0040496}},
		{"Gelu", tanh, []float64{0.8411919906082768, -0.0036374}},
		{"Mish", nil, []float64{0.8650983882673103, -0.1456473}},
		{"HardSwish", nil, []float64{2.0 / 3, 0}},
	} {
		got := run(t, tc.op, tc.attrs, 20, one).Data.([]float32)
		for i, w := range tc.want {
			if math.Abs(float64(got[i])-w) > 1e-6 {
				t.Errorf("%s(%v) = %v, want %v", tc.op, one.Data, got, tc.want)
				break
			}
		}
	}
	inf := tensor.From([]float64{math.Inf(1), math.Inf(-1), math.NaN(), 0}, 4)
	if got := run(t, "IsInf", intAttr("detect_positive", 0), 10, inf).Data; !reflect.DeepEqual(got, []bool{false, true, false, false}) {
		t.Errorf("IsInf negative only = %v", got)
	}
	if got := run(t, "IsNaN", nil, 13, inf).Data; !reflect.DeepEqual(got, []bool{false, false, true, false}) {
		t.Errorf("IsNaN = %v", got)
	}
}

func TestClip(t *testing.T) {
	x := tensor.From([]float32{-3, 0, 3, float32(math.NaN())}, 4)
	got := run(t, "Clip", nil, 13, x, tensor.Scalar(float32(2)), tensor.Scalar(float32(1))).Data.([]float32)
	if got[0] != 1 || got[1] != 1 || got[2] != 1 || !math.IsNaN(float64(got[3])) {
		t.Errorf("Clip min>max = %v, want max everywhere (NaN kept)", got)
	}
	attrs := map[string]*ir.Attr{"min": {Name: "min", Kind: ir.AttrFloat, F: -1}}
	got = run(t, "Clip", attrs, 6, x).Data.([]float32)
	if got[0] != -1 || got[2] != 3 {
		t.Errorf("Clip-6 min=-1 = %v", got)
	}
	gi := run(t, "Clip", nil, 13, tensor.From([]int8{-100, 5, 100}, 3), nil, tensor.Scalar(int8(10))).Data
	if !reflect.DeepEqual(gi, []int8{-100, 5, 10}) {
		t.Errorf("Clip int8 max only = %v", gi)
	}
}

func TestVariadic(t *testing.T) {
	a := tensor.From([]float32{1, float32(math.NaN()), 3}, 3)
	b := tensor.From([]float32{2}, 1)
	c := tensor.From([]float32{0, 0, 0, 10, 10, 10}, 2, 3)
	got := run(t, "Max", nil, 13, a, b, c)
	d := got.Data.([]float32)
	if !reflect.DeepEqual(got.Shape, []int{2, 3}) || d[0] != 2 || !math.IsNaN(float64(d[1])) || d[2] != 3 || d[3] != 10 || !math.IsNaN(float64(d[4])) {
		t.Errorf("Max = %v %v (NaN propagates)", got.Shape, d)
	}
	m := run(t, "Mean", nil, 13, tensor.From([]float32{1, 2}, 2), tensor.From([]float32{3}, 1)).Data
	if !reflect.DeepEqual(m, []float32{2, 2.5}) {
		t.Errorf("Mean = %v", m)
	}
	one := tensor.From([]int32{4, 5}, 2)
	s := run(t, "Min", nil, 13, one)
	if !reflect.DeepEqual(s.Data, []int32{4, 5}) || &s.Data.([]int32)[0] == &one.Data.([]int32)[0] {
		t.Errorf("Min of one input must be a copy: %v", s.Data)
	}
}

func TestBitShiftAndLogic(t *testing.T) {
	x := tensor.From([]uint8{1, 128, 255}, 3)
	y := tensor.From([]uint8{3, 1, 8}, 3)
	left := map[string]*ir.Attr{"direction": {Name: "direction", Kind: ir.AttrString, S: "LEFT"}}
	if got := run(t, "BitShift", left, 11, x, y).Data; !reflect.DeepEqual(got, []uint8{8, 0, 0}) {
		t.Errorf("BitShift LEFT = %v", got)
	}
	p := tensor.From([]bool{true, false}, 2, 1)
	q := tensor.From([]bool{true, false}, 2)
	if got := run(t, "Xor", nil, 7, p, q).Data; !reflect.DeepEqual(got, []bool{false, true, true, false}) {
		t.Errorf("Xor = %v", got)
	}
	if got := run(t, "Equal", nil, 19, tensor.From([]string{"a", "b"}, 2), tensor.Scalar("a")).Data; !reflect.DeepEqual(got, []bool{true, false}) {
		t.Errorf("Equal string = %v", got)
	}
}

func TestCast(t *testing.T) {
	cast := func(x *tensor.Tensor, to tensor.DType) *tensor.Tensor {
		t.Helper()
		out, err := Cast(x, to)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	f := tensor.From([]float32{1234567, 1e20, 1e-4, 1e-5, -0.5, 0.1, float32(math.Inf(-1)), float32(math.NaN()), 0}, 9)
	want := []string{"1234567.0", "1e+20", "0.0001", "1e-05", "-0.5", "0.1", "-INF", "NaN", "0.0"}
	if got := cast(f, tensor.String).Data; !reflect.DeepEqual(got, want) {
		t.Errorf("float32 to string = %q, want %q", got, want)
	}
	h := tensor.From([]tensor.Half{tensor.ToHalf(0.1)}, 1)
	if got := cast(h, tensor.String).Data.([]string)[0]; got != "0.1" {
		t.Errorf("float16 0.1 to string = %q (want the shortest float16 repr)", got)
	}
	s := tensor.From([]string{"3.5", " -INF", "nan", "+inf", "1E8", "-2.9"}, 6)
	got := cast(s, tensor.Float32).Data.([]float32)
	if got[0] != 3.5 || !math.IsInf(float64(got[1]), -1) || !math.IsNaN(float64(got[2])) || !math.IsInf(float64(got[3]), 1) || got[4] != 1e8 || got[5] != -2.9 {
		t.Errorf("string to float32 = %v", got)
	}
	if gi := cast(s.Reshaped(6), tensor.Int32); gi.Data.([]int32)[0] != 3 || gi.Data.([]int32)[5] != -2 {
		t.Errorf("string to int32 = %v (float literals truncate)", gi.Data)
	}
	d := tensor.From([]float64{-1, 300.7, math.NaN(), 1e30, -1e30}, 5)
	if got := cast(d, tensor.Uint8).Data; !reflect.DeepEqual(got, []uint8{255, 44, 0, 255, 0}) {
		t.Errorf("float64 to uint8 = %v (truncate, saturate to int64, wrap)", got)
	}
	// 1 + 2^-11 + 2^-40 lies just above the midpoint of two float16 values;
	// rounding through float32 would land on the midpoint and go to even.
	x := 1 + math.Ldexp(1, -11) + math.Ldexp(1, -40)
	if got := cast(tensor.From([]float64{x}, 1), tensor.Float16).Data.([]tensor.Half)[0]; got.Float32() != 1+1.0/1024 {
		t.Errorf("float64 to float16 double-rounded: %v", got.Float32())
	}
	b := cast(tensor.From([]float32{0, -0.5, float32(math.NaN())}, 3), tensor.Bool).Data
	if !reflect.DeepEqual(b, []bool{false, true, true}) {
		t.Errorf("float to bool = %v", b)
	}
	u := cast(tensor.From([]uint64{math.MaxUint64}, 1), tensor.Float64).Data.([]float64)[0]
	if u != 1.8446744073709552e19 {
		t.Errorf("uint64 max to float64 = %v", u)
	}
	if got := cast(tensor.From([]int64{-1}, 1), tensor.Uint64).Data.([]uint64)[0]; got != math.MaxUint64 {
		t.Errorf("int64 -1 to uint64 = %v", got)
	}
}

func TestInfer(t *testing.T) {
	sym := func(dt tensor.DType, dims ...any) ir.InferInput {
		ty := ir.Type{DType: dt, RankKnown: true}
		for _, d := range dims {
			switch v := d.(type) {
			case int:
				ty.Shape = append(ty.Shape, ir.Fixed(v))
			case string:
				ty.Shape = append(ty.Shape, ir.Dim{Value: -1, Param: v})
			}
		}
		return ir.InferInput{Present: true, Type: ty}
	}
	ops := Ops()
	for _, tc := range []struct {
		op    string
		attrs map[string]*ir.Attr
		in    []ir.InferInput
		want  string
	}{
		{"Add", nil, []ir.InferInput{sym(tensor.Float32, "N", 3), sym(tensor.Float32, 3)}, ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Value: -1, Param: "N"}, ir.Fixed(3)}}.String()},
		{"Less", nil, []ir.InferInput{sym(tensor.Int64, 2, 1), sym(tensor.Int64, 4)}, ir.StaticType(tensor.Bool, []int{2, 4}).String()},
		{"Where", nil, []ir.InferInput{sym(tensor.Bool, 5, 1, 1), sym(tensor.Int8, 2, 1), sym(tensor.Int8, 3)}, ir.StaticType(tensor.Int8, []int{5, 2, 3}).String()},
		{"Cast", intAttr("to", int64(tensor.Float16)), []ir.InferInput{sym(tensor.String, "B", 2)}, ir.Type{DType: tensor.Float16, RankKnown: true, Shape: []ir.Dim{{Value: -1, Param: "B"}, ir.Fixed(2)}}.String()},
		{"CastLike", nil, []ir.InferInput{sym(tensor.Float32, 2), sym(tensor.Uint8, 7)}, ir.StaticType(tensor.Uint8, []int{2}).String()},
		{"Sum", nil, []ir.InferInput{sym(tensor.Float64, 3, 1), sym(tensor.Float64, 1, 4), sym(tensor.Float64, 1)}, ir.StaticType(tensor.Float64, []int{3, 4}).String()},
		{"IsNaN", nil, []ir.InferInput{sym(tensor.Float32, 2)}, ir.StaticType(tensor.Bool, []int{2}).String()},
		{"Pow", nil, []ir.InferInput{sym(tensor.Int32, 2), sym(tensor.Float32)}, ir.StaticType(tensor.Int32, []int{2}).String()},
	} {
		n := &ir.Node{OpType: tc.op, Version: 19, Attrs: tc.attrs}
		got, err := ops[tc.op].Infer(n, tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.op, err)
			continue
		}
		if got[0].String() != tc.want {
			t.Errorf("%s: inferred %v, want %v", tc.op, got[0], tc.want)
		}
	}
	n := &ir.Node{OpType: "Add", Version: 14}
	if _, err := ops["Add"].Infer(n, []ir.InferInput{sym(tensor.Float32, 2), sym(tensor.Float32, 3)}); err == nil {
		t.Errorf("Add [2]+[3]: inferred without error")
	}
}

func BenchmarkAddRow(b *testing.B) {
	x := tensor.New(tensor.Float32, 256, 1024)
	y := tensor.New(tensor.Float32, 1024)
	b.SetBytes(int64(x.Len() * 4))
	for b.Loop() {
		if _, err := try("Add", nil, 14, x, y); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLegacyOpsets(t *testing.T) {
	a := tensor.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := tensor.From([]float32{10, 20}, 2)
	attrs := map[string]*ir.Attr{
		"broadcast": {Name: "broadcast", Kind: ir.AttrInt, I: 1},
		"axis":      {Name: "axis", Kind: ir.AttrInt, I: 0},
	}
	if got := run(t, "Add", attrs, 6, a, b).Data; !reflect.DeepEqual(got, []float32{11, 12, 13, 24, 25, 26}) {
		t.Errorf("Add-6 broadcast axis=0 = %v", got)
	}
	to := map[string]*ir.Attr{"to": {Name: "to", Kind: ir.AttrString, S: "INT32"}}
	if got := run(t, "Cast", to, 1, a).DType; got != tensor.Int32 {
		t.Errorf("Cast-1 to \"INT32\" gave %v", got)
	}
	slope := tensor.From([]float32{0.5, 2}, 2)
	x := tensor.From([]float32{-2, -2, -2, -2}, 1, 2, 2)
	if got := run(t, "PRelu", nil, 6, x, slope).Data; !reflect.DeepEqual(got, []float32{-1, -1, -4, -4}) {
		t.Errorf("PRelu-6 per-channel slope = %v", got)
	}
}
