package compile_test

import (
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/conformance"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// gb builds small graphs for pass tests.
type gb struct {
	g *ir.Graph
	r *rand.Rand
}

func newGB(in []int) *gb {
	return &gb{g: &ir.Graph{Name: "t", Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{},
		Inputs: []*ir.Value{{Name: "x", Type: ir.StaticType(tensor.Float32, in)}}}, r: rand.New(rand.NewPCG(5, 6))}
}

func (b *gb) node(op string, in []string, out string, attrs ...*ir.Attr) string {
	n := &ir.Node{Name: out + "_node", OpType: op, Version: 17, Inputs: in, Outputs: []string{out}, Attrs: map[string]*ir.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	b.g.Nodes = append(b.g.Nodes, n)
	return out
}

func (b *gb) constant(name string, shape []int, vals ...float32) string {
	if shape == nil && len(vals) == 1 {
		b.g.Initializers[name] = tensor.Scalar(vals[0])
		return name
	}
	if vals == nil {
		vals = make([]float32, tensor.NumElems(shape))
		for i := range vals {
			vals[i] = float32(b.r.NormFloat64())
		}
	}
	b.g.Initializers[name] = tensor.From(vals, shape...)
	return name
}

func ints(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }

// check builds the graph, runs plan and graph on the same random input and
// returns the plan's layer kinds; exact demands identical bits.
func (b *gb) check(t *testing.T, out string, exact bool) []string {
	t.Helper()
	b.g.Outputs = []*ir.Value{{Name: out, Type: ir.Type{DType: tensor.Float32}}}
	if err := ir.Verify(b.g, nil); err != nil {
		t.Fatal(err)
	}
	shape, _ := b.g.Inputs[0].Type.Static()
	x := tensor.New(tensor.Float32, shape...)
	for i, d := 0, x.Data.([]float32); i < len(d); i++ {
		d[i] = float32(b.r.NormFloat64())
	}
	ref, err := exec.New(b.g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	res, err := compile.Build(&ir.Model{Graph: b.g, Opsets: map[string]int64{"": 17}}, []byte("t"), "t", "test", opts, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	got, err := ex.Run(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	if exact && !sameBits(got[out], want[out]) {
		t.Fatal("the pass changed the output's bits")
	}
	if err := conformance.Compare(got[out], want[out], 1e-5, 1e-6); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range p.Header.Graph.Layers {
		kinds = append(kinds, l.Kind)
	}
	return kinds
}

func TestFoldLayout(t *testing.T) {
	b := newGB([]int{2, 3, 4})
	y := b.node("Transpose", []string{"x"}, "t1", ints("perm", 0, 2, 1))
	y = b.node("Transpose", []string{y}, "t2", ints("perm", 0, 2, 1))
	y = b.node("Relu", []string{y}, "y")
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "Relu" {
		t.Fatalf("cancelling transposes left %v", kinds)
	}
	b = newGB([]int{2, 3, 4})
	y = b.node("Transpose", []string{"x"}, "t1", ints("perm", 1, 0, 2))
	y = b.node("Transpose", []string{y}, "t2", ints("perm", 0, 2, 1))
	if kinds := b.check(t, y, true); len(kinds) != 1 {
		t.Fatalf("two transposes became %v", kinds)
	}
	b = newGB([]int{2, 6})
	y = b.node("Reshape", []string{"x", "s1"}, "r1")
	b.g.Initializers["s1"] = tensor.From([]int64{3, 4}, 2)
	b.g.Initializers["s2"] = tensor.From([]int64{4, -1}, 2)
	y = b.node("Reshape", []string{y, "s2"}, "r2")
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "Reshape" {
		t.Fatalf("two reshapes became %v", kinds)
	}
}

func TestFuseGeluTanh(t *testing.T) {
	b := newGB([]int{4, 8})
	p := b.node("Pow", []string{"x", b.constant("three", nil, 3)}, "p")
	c := b.node("Mul", []string{p, b.constant("k", nil, 0.044715)}, "c")
	i := b.node("Add", []string{"x", c}, "i")
	s := b.node("Mul", []string{i, b.constant("sq", nil, 0.7978845608)}, "s")
	th := b.node("Tanh", []string{s}, "th")
	o := b.node("Add", []string{th, b.constant("one", nil, 1)}, "o")
	m := b.node("Mul", []string{"x", o}, "m")
	y := b.node("Mul", []string{m, b.constant("half", nil, 0.5)}, "y")
	if kinds := b.check(t, y, false); len(kinds) != 1 || kinds[0] != "Gelu" {
		t.Fatalf("GELU (tanh) chain became %v", kinds)
	}
}

func TestFoldBatchNormGemm(t *testing.T) {
	b := newGB([]int{4, 5})
	h := b.node("Gemm", []string{"x", b.constant("w", []int{5, 3}), b.constant("b", []int{3})}, "h")
	scale := b.constant("gamma", []int{3}, 1.5, 0.5, 2)
	bias := b.constant("beta", []int{3}, 0.1, -0.2, 0.3)
	mean := b.constant("mean", []int{3}, 0.2, 0.1, -0.4)
	vr := b.constant("var", []int{3}, 1.2, 0.8, 2.5)
	y := b.node("BatchNormalization", []string{h, scale, bias, mean, vr}, "y")
	if kinds := b.check(t, y, false); len(kinds) != 1 || kinds[0] != "Gemm" {
		t.Fatalf("Gemm + BatchNormalization became %v", kinds)
	}
}
