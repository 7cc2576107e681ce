package elementwise

import (
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// checkInto runs op's Run and Into on in and requires the same bits; for an
// InPlace op it runs Into again with the output sharing the storage of each
// input of the output's dtype and shape.
func checkInto(t *testing.T, op string, n *ir.Node, in ...*tensor.Tensor) {
	t.Helper()
	o := Ops()[op]
	if o.Into == nil {
		t.Fatalf("%s has no Into", op)
	}
	want, err := o.Run(&kernel.Ctx{}, n, in)
	if err != nil {
		t.Fatalf("%s Run: %v", op, err)
	}
	out := tensor.New(want[0].DType, want[0].Shape...)
	if err := o.Into(&kernel.Ctx{}, n, in, []*tensor.Tensor{out}); err != nil {
		t.Fatalf("%s Into: %v", op, err)
	}
	if !sameBits(out, want[0]) {
		t.Fatalf("%s: Into differs from Run on shapes %v: %v vs %v", op, shapes(in), out.Data, want[0].Data)
	}
	if !o.InPlace {
		return
	}
	for k, x := range in {
		if x == nil || x.DType != out.DType || !reflect.DeepEqual(x.Shape, out.Shape) {
			continue
		}
		alias := x.Clone()
		args := append([]*tensor.Tensor{}, in...)
		args[k] = alias
		for j := range args {
			if in[j] == x { // the same value read twice shares the storage too
				args[j] = alias
			}
		}
		if err := o.Into(&kernel.Ctx{}, n, args, []*tensor.Tensor{alias}); err != nil {
			t.Fatalf("%s Into in place over input %d: %v", op, k, err)
		}
		if !sameBits(alias, want[0]) {
			t.Fatalf("%s: Into in place over input %d differs from Run on shapes %v", op, k, shapes(in))
		}
	}
}

func shapes(in []*tensor.Tensor) [][]int {
	var s [][]int
	for _, t := range in {
		if t != nil {
			s = append(s, t.Shape)
		}
	}
	return s
}

func sameBits(a, b *tensor.Tensor) bool {
	if a.DType != b.DType || !reflect.DeepEqual(a.Shape, b.Shape) {
		return false
	}
	if x, ok := a.Data.([]float32); ok {
		y := b.Data.([]float32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Data, b.Data)
}

func randF32(r *rand.Rand, shape []int) *tensor.Tensor {
	x := tensor.New(tensor.Float32, shape...)
	d := x.Data.([]float32)
	for i := range d {
		d[i] = float32(r.NormFloat64() * 3)
		switch r.Intn(40) {
		case 0:
			d[i] = float32(math.NaN())
		case 1:
			d[i] = float32(math.Inf(1 - 2*r.Intn(2)))
		case 2:
			d[i] = 0
		}
	}
	return x
}

// randBroadcast returns two shapes that broadcast together.
func randBroadcast(r *rand.Rand) ([]int, []int, []int) {
	out := make([]int, 1+r.Intn(4))
	for i := range out {
		out[i] = 1 + r.Intn(4)
	}
	sub := func() []int {
		k := r.Intn(len(out) + 1)
		s := append([]int{}, out[len(out)-k:]...)
		for i := range s {
			if r.Intn(3) == 0 {
				s[i] = 1
			}
		}
		return s
	}
	return out, sub(), sub()
}

func TestIntoMatchesRun(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	node := func(op string, attrs map[string]*ir.Attr) *ir.Node {
		return &ir.Node{OpType: op, Version: 17, Attrs: attrs}
	}
	f := func(name string, v float32) map[string]*ir.Attr {
		return map[string]*ir.Attr{name: {Name: name, Kind: ir.AttrFloat, F: v}}
	}
	for iter := 0; iter < 200; iter++ {
		out, as, bs := randBroadcast(r)
		if r.Intn(2) == 0 {
			as = out // an operand of the output's shape, to alias
		}
		a, b := randF32(r, as), randF32(r, bs)
		for _, op := range []string{"Add", "Sub", "Mul", "Div", "Pow"} {
			checkInto(t, op, node(op, nil), a, b)
			checkInto(t, op, node(op, nil), a, a)
		}
		for _, dt := range []tensor.DType{tensor.Float64, tensor.Int32, tensor.Int64, tensor.Float16} {
			vals := func(x *tensor.Tensor) *tensor.Tensor {
				v, _ := x.Float64s()
				for i := range v {
					v[i] = math.Trunc(v[i] * 3)
					if v[i] != v[i] || math.IsInf(v[i], 0) || v[i] == 0 {
						v[i] = 1
					}
				}
				return tensor.FromFloat64s(dt, x.Shape, v)
			}
			for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
				checkInto(t, op, node(op, nil), vals(a), vals(b))
			}
		}
		c := tensor.New(tensor.Bool, bs...)
		for i := range c.Data.([]bool) {
			c.Data.([]bool)[i] = r.Intn(2) == 0
		}
		checkInto(t, "Where", node("Where", nil), c, a, randF32(r, out))
		x := randF32(r, out)
		for _, op := range []string{"Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Neg", "HardSwish", "Log", "Abs"} {
			checkInto(t, op, node(op, nil), x)
		}
		checkInto(t, "LeakyRelu", node("LeakyRelu", f("alpha", 0.1)), x)
		checkInto(t, "HardSigmoid", node("HardSigmoid", map[string]*ir.Attr{"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: 0.3}, "beta": {Name: "beta", Kind: ir.AttrFloat, F: 0.4}}), x)
		checkInto(t, "Gelu", node("Gelu", nil), x)
		checkInto(t, "Gelu", node("Gelu", map[string]*ir.Attr{"approximate": {Name: "approximate", Kind: ir.AttrString, S: "tanh"}}), x)
		checkInto(t, "Clip", node("Clip", nil), x, tensor.Scalar(float32(-1)), tensor.Scalar(float32(2)))
		checkInto(t, "Clip", node("Clip", nil), x, nil, tensor.Scalar(float32(6)))
		checkInto(t, "Clip", &ir.Node{OpType: "Clip", Version: 6, Attrs: f("max", 0.5)}, x)
		checkInto(t, "Relu", node("Relu", nil), tensor.FromFloat64s(tensor.Int64, []int{3}, []float64{-1, 0, 5}))
	}
}

// TestIntoAllocatesNothing: the float32 fast paths allocate nothing.
func TestIntoAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	a, b := randF32(r, []int{4, 3, 5}), randF32(r, []int{3, 1})
	c := tensor.New(tensor.Bool, 5)
	out := tensor.New(tensor.Float32, 4, 3, 5)
	ctx := &kernel.Ctx{}
	ops := Ops()
	cases := []struct {
		op string
		in []*tensor.Tensor
	}{
		{"Add", []*tensor.Tensor{a, b}}, {"Mul", []*tensor.Tensor{b, a}}, {"Div", []*tensor.Tensor{a, b}},
		{"Pow", []*tensor.Tensor{a, b}}, {"Where", []*tensor.Tensor{c, a, b}},
		{"Relu", []*tensor.Tensor{a}}, {"Gelu", []*tensor.Tensor{a}}, {"LeakyRelu", []*tensor.Tensor{a}},
		{"HardSigmoid", []*tensor.Tensor{a}}, {"Clip", []*tensor.Tensor{a, tensor.Scalar(float32(0)), tensor.Scalar(float32(6))}},
	}
	for _, tc := range cases {
		n := &ir.Node{OpType: tc.op, Version: 17}
		outs := []*tensor.Tensor{out}
		if got := testing.AllocsPerRun(10, func() {
			if err := ops[tc.op].Into(ctx, n, tc.in, outs); err != nil {
				t.Fatal(err)
			}
		}); got != 0 {
			t.Errorf("%s Into: %.0f allocations", tc.op, got)
		}
	}
}
