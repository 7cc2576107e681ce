package rnn

import (
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func node(op string, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{OpType: op, Version: 14, Attrs: map[string]*ir.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func intA(name string, v int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
func str(name, v string) *ir.Attr        { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }
func strs(name string, v ...string) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrStrings, Strings: v}
}

func random(r *rand.Rand, shape ...int) *tensor.Tensor {
	t := tensor.New(tensor.Float32, shape...)
	for i := range t.Data.([]float32) {
		t.Data.([]float32)[i] = float32(r.Float64()*2 - 1)
	}
	return t
}

func runOp(t *testing.T, n *ir.Node, in ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	out, err := Ops()[n.OpType].Run(nil, n, in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRNNByHand(t *testing.T) {
	n := node("RNN", intA("hidden_size", 1), strs("activations", "Relu"))
	x := tensor.From([]float32{1, -1}, 2, 1, 1)
	w := tensor.From([]float32{2}, 1, 1, 1)
	r := tensor.From([]float32{0.5}, 1, 1, 1)
	b := tensor.From([]float32{0.25, 0.5}, 1, 2)
	out := runOp(t, n, x, w, r, b)
	// h1 = relu(0.75 + 2) = 2.75; h2 = relu(0.75 - 2 + 1.375) = 0.125.
	if want := []float32{2.75, 0.125}; !reflect.DeepEqual(out[0].Data, want) {
		t.Errorf("Y = %v, want %v", out[0].Data, want)
	}
	if want := []int{2, 1, 1, 1}; !reflect.DeepEqual(out[0].Shape, want) {
		t.Errorf("Y shape %v, want %v", out[0].Shape, want)
	}
	if want := []float32{0.125}; !reflect.DeepEqual(out[1].Data, want) {
		t.Errorf("Y_h = %v, want %v", out[1].Data, want)
	}
}

// inputs builds random X, W, R, B (and P for LSTM) for a cell.
func inputs(r *rand.Rand, op string, dirs, seq, batch, in, hidden int) []*tensor.Tensor {
	g := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[op]
	ts := []*tensor.Tensor{
		random(r, seq, batch, in), random(r, dirs, g*hidden, in),
		random(r, dirs, g*hidden, hidden), random(r, dirs, 2*g*hidden),
		nil, random(r, dirs, batch, hidden),
	}
	if op == "LSTM" {
		ts = append(ts, random(r, dirs, batch, hidden), random(r, dirs, 3*hidden))
	}
	return ts
}

// row takes batch row b of a [.., batch, ..] tensor at dimension dim.
func row(t *tensor.Tensor, dim, b int) *tensor.Tensor {
	shape := append([]int{}, t.Shape...)
	shape[dim] = 1
	out := tensor.New(t.DType, shape...)
	outer := tensor.NumElems(t.Shape[:dim])
	inner := tensor.NumElems(t.Shape[dim+1:])
	src, dst := t.Data.([]float32), out.Data.([]float32)
	for o := 0; o < outer; o++ {
		copy(dst[o*inner:(o+1)*inner], src[(o*t.Shape[dim]+b)*inner:])
	}
	return out
}

func TestBatchInvariance(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		for _, lbr := range []int64{0, 1} {
			in := inputs(r, op, 2, 4, 3, 5, 6)
			n := node(op, intA("hidden_size", 6), str("direction", "bidirectional"), intA("linear_before_reset", lbr))
			full := runOp(t, n, in...)
			for b := 0; b < 3; b++ {
				one := append([]*tensor.Tensor{}, in...)
				one[0] = row(in[0], 1, b)
				one[5] = row(in[5], 1, b)
				if op == "LSTM" {
					one[6] = row(in[6], 1, b)
				}
				got := runOp(t, n, one...)
				if !reflect.DeepEqual(got[0].Data, row(full[0], 2, b).Data) {
					t.Errorf("%s lbr %d: row %d alone differs from the batch", op, lbr, b)
				}
				for k := 1; k < len(got); k++ {
					if !reflect.DeepEqual(got[k].Data, row(full[k], 1, b).Data) {
						t.Errorf("%s: state output %d of row %d differs", op, k, b)
					}
				}
			}
		}
	}
}

func TestSequenceLensAndLayout(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		in := inputs(r, op, 1, 4, 2, 3, 2)
		in[4] = tensor.From([]int32{4, 2}, 2)
		n := node(op, intA("hidden_size", 2), str("direction", "reverse"))
		out := runOp(t, n, in...)
		y := out[0].Data.([]float32) // [seq, 1, batch, hidden]
		for s := 2; s < 4; s++ {
			if v := y[(s*2+1)*2 : (s*2+2)*2]; v[0] != 0 || v[1] != 0 {
				t.Errorf("%s: Y past sequence_lens at step %d = %v, want zeros", op, s, v)
			}
		}
		// Reverse: the final state is the output at step 0.
		if yh := out[1].Data.([]float32); !reflect.DeepEqual(yh[2:4], y[2:4]) {
			t.Errorf("%s: Y_h %v, want Y at step 0 %v", op, yh[2:4], y[2:4])
		}
		// Layout 1 gives the same numbers, batch-major.
		l1 := append([]*tensor.Tensor{}, in...)
		l1[0] = transpose01(in[0])
		l1[5] = transpose01(in[5])
		if op == "LSTM" {
			l1[6] = transpose01(in[6])
		}
		n1 := node(op, intA("hidden_size", 2), str("direction", "reverse"), intA("layout", 1))
		out1 := runOp(t, n1, l1...)
		if !reflect.DeepEqual(out1[1].Data, transpose01(out[1]).Data) {
			t.Errorf("%s: layout 1 Y_h differs", op)
		}
		if want := []int{2, 4, 1, 2}; !reflect.DeepEqual(out1[0].Shape, want) {
			t.Errorf("%s: layout 1 Y shape %v, want %v", op, out1[0].Shape, want)
		}
	}
}

// transpose01 swaps the first two dimensions of a rank-3 tensor.
func transpose01(t *tensor.Tensor) *tensor.Tensor {
	a, b, c := t.Shape[0], t.Shape[1], t.Shape[2]
	out := tensor.New(t.DType, b, a, c)
	src, dst := t.Data.([]float32), out.Data.([]float32)
	for i := 0; i < a; i++ {
		for j := 0; j < b; j++ {
			copy(dst[(j*a+i)*c:(j*a+i+1)*c], src[(i*b+j)*c:(i*b+j+1)*c])
		}
	}
	return out
}

func TestBidirectionalIsReverse(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	in := inputs(r, "GRU", 2, 3, 2, 4, 3)
	bi := runOp(t, node("GRU", intA("hidden_size", 3), str("direction", "bidirectional")), in...)
	rev := make([]*tensor.Tensor, len(in))
	rev[0] = in[0]
	for i := 1; i < len(in); i++ {
		if in[i] != nil {
			rev[i] = row(in[i], 0, 1)
		}
	}
	one := runOp(t, node("GRU", intA("hidden_size", 3), str("direction", "reverse")), rev...)
	if !reflect.DeepEqual(one[0].Data, row(bi[0], 1, 1).Data) {
		t.Error("the backward half of a bidirectional GRU differs from a reverse GRU")
	}
}

func TestActivations(t *testing.T) {
	acts, err := parseActivations([]string{"LeakyRelu", "tanh", "ScaledTanh"}, []float32{0.1, 2}, []float32{3}, []string{"a", "b", "c"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []actSpec{{"leakyrelu", 0.1, 0}, {"tanh", 0, 0}, {"scaledtanh", 2, 3}}
	if !reflect.DeepEqual(acts, want) {
		t.Errorf("got %v, want %v", acts, want)
	}
	cases := []struct {
		s    actSpec
		x    float32
		want float32
	}{
		{actSpec{"relu", 0, 0}, -1, 0},
		{actSpec{"affine", 2, 1}, 3, 7},
		{actSpec{"leakyrelu", 0.5, 0}, -2, -1},
		{actSpec{"thresholdedrelu", 1, 0}, 1, 1},
		{actSpec{"thresholdedrelu", 1, 0}, 0.5, 0},
		{actSpec{"thresholdedrelu", 1, 0}, 1.5, 1.5},
		{actSpec{"hardsigmoid", 0.2, 0.5}, 10, 1},
		{actSpec{"hardsigmoid", 0.5, 0.5}, 0.5, 0.75},
		{actSpec{"elu", 1, 0}, 2, 2},
		{actSpec{"softsign", 0, 0}, 3, 0.75},
		{actSpec{"softplus", 0, 0}, 100, 100},
		{actSpec{"scaledtanh", 2, 0}, 5, 0},
	}
	for _, c := range cases {
		if got := activation(c.s, f32)(c.x); got != c.want {
			t.Errorf("%s(%v) = %v, want %v", c.s.name, c.x, got, c.want)
		}
	}
	if got := activation(actSpec{"softplus", 0, 0}, f64)(0); math.Abs(got-math.Ln2) > 1e-15 {
		t.Errorf("softplus(0) = %v", got)
	}
	if _, err := parseActivations([]string{"Gelu"}, nil, nil, []string{"x"}, 1); err == nil {
		t.Error("unknown activation accepted")
	}
}

func TestErrors(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	in := inputs(r, "LSTM", 1, 2, 1, 3, 2)
	cases := []struct {
		n    *ir.Node
		edit func([]*tensor.Tensor)
		want string
	}{
		{node("LSTM", str("direction", "sideways")), nil, "direction"},
		{node("LSTM", intA("hidden_size", 3)), nil, "want [1 12 3]"},
		{node("LSTM"), func(t []*tensor.Tensor) { t[1] = random(r, 1, 8, 4) }, "W has shape"},
		{node("LSTM"), func(t []*tensor.Tensor) { t[4] = tensor.From([]int32{3}, 1) }, "sequence_lens[0]"},
		{node("LSTM"), func(t []*tensor.Tensor) { t[4] = tensor.From([]int64{1}, 1) }, "int32"},
		{node("LSTM"), func(t []*tensor.Tensor) { t[7] = random(r, 1, 2) }, "P has shape"},
		{node("LSTM", strs("activations", "Sigmoid")), nil, "activations"},
		{node("LSTM", intA("layout", 2)), nil, "layout"},
		{node("LSTM"), func(t []*tensor.Tensor) { t[0] = random(r, 2, 3) }, "rank 3"},
	}
	for _, c := range cases {
		ts := append([]*tensor.Tensor{}, in...)
		if c.edit != nil {
			c.edit(ts)
		}
		_, err := Ops()["LSTM"].Run(nil, c.n, ts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want %q", err, c.want)
		}
	}
}

func TestInfer(t *testing.T) {
	seq := ir.Dim{Value: -1, Param: "T"}
	x := ir.InferInput{Present: true, Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{ir.Fixed(5), seq, ir.Fixed(3)}, RankKnown: true}}
	w := ir.InferInput{Present: true, Type: ir.StaticType(tensor.Float32, []int{2, 16, 3})}
	r := ir.InferInput{Present: true, Type: ir.StaticType(tensor.Float32, []int{2, 16, 4})}
	n := node("LSTM", str("direction", "bidirectional"), intA("layout", 1))
	got, err := Ops()["LSTM"].Infer(n, []ir.InferInput{x, w, r})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"float32[5,T,2,4]", "float32[5,2,4]", "float32[5,2,4]"}
	for i, g := range got {
		if g.String() != want[i] {
			t.Errorf("output %d: %v, want %v", i, g, want[i])
		}
	}
}
