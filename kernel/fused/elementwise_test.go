package fused_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// chain builds a body graph node by node.
type chain struct {
	g   *ir.Graph
	ins map[string]bool
}

func newChain(inputs ...string) *chain {
	c := &chain{g: &ir.Graph{Name: "body", Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}, ins: map[string]bool{}}
	for _, in := range inputs {
		c.g.Inputs = append(c.g.Inputs, &ir.Value{Name: in})
	}
	return c
}

func (c *chain) op(op string, out string, in []string, attrs ...*ir.Attr) string {
	n := &ir.Node{Name: out, OpType: op, Version: 17, Inputs: in, Outputs: []string{out}, Attrs: map[string]*ir.Attr{}}
	if op == "Gelu" {
		n.Version = 20
	}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	c.g.Nodes = append(c.g.Nodes, n)
	return out
}

func (c *chain) layer(out string) *ir.Node {
	c.g.Outputs = []*ir.Value{{Name: out}}
	var ins []string
	for _, v := range c.g.Inputs {
		ins = append(ins, v.Name)
	}
	return &ir.Node{Name: "ew", OpType: "Elementwise", Domain: fused.Domain, Version: 1, Inputs: ins, Outputs: []string{out},
		Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: c.g}}}
}

func fattr(name string, v float32) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrFloat, F: v} }
func sattr(name, v string) *ir.Attr         { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }

// unfused runs the body node by node, each through its own Run.
func unfused(t *testing.T, reg *kernel.Registry, g *ir.Graph, in []*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	vals := map[string]*tensor.Tensor{}
	for i, v := range g.Inputs {
		vals[v.Name] = in[i]
	}
	for _, n := range g.Nodes {
		op, err := reg.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		args := make([]*tensor.Tensor, len(n.Inputs))
		for j, name := range n.Inputs {
			if name != "" {
				args[j] = vals[name]
			}
		}
		outs, err := op.Run(&kernel.Ctx{}, n, args)
		if err != nil {
			t.Fatalf("%s: %v", n.OpType, err)
		}
		vals[n.Outputs[0]] = outs[0]
	}
	return vals[g.Outputs[0].Name]
}

// special values every input mixes in.
var special = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
	1e-40, -1e-40, 1e30, -1e30, 88.7, -88.7, 1, -1, 0.5}

func randomTensor(r *rand.Rand, shape ...int) *tensor.Tensor {
	t := tensor.New(tensor.Float32, shape...)
	d := t.Data.([]float32)
	for i := range d {
		if r.IntN(10) == 0 {
			d[i] = special[r.IntN(len(special))]
		} else {
			d[i] = float32(r.NormFloat64() * 3)
		}
	}
	return t
}

func sameBits(a, b *tensor.Tensor) error {
	x, y := a.Data.([]float32), b.Data.([]float32)
	if len(x) != len(y) || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
		return fmt.Errorf("shape %v vs %v", a.Shape, b.Shape)
	}
	for i := range x {
		if !sameFloat(x[i], y[i]) {
			return fmt.Errorf("element %d: %g (%08x) vs %g (%08x)", i, x[i], math.Float32bits(x[i]), y[i], math.Float32bits(y[i]))
		}
	}
	return nil
}

// sameFloat reports whether a and b have the same bits. Under the race
// detector two NaNs of different payloads also count as the same: which
// operand's NaN Go's compiled float code propagates is not fixed, and a
// -race build changes it (docs/determinism.md: NaN payloads are the
// contract's one exception, outside the kernels that canonicalise them).
// A NaN against a number is a difference in every build.
func sameFloat(a, b float32) bool {
	if math.Float32bits(a) == math.Float32bits(b) {
		return true
	}
	return raceEnabled && a != a && b != b
}

type bodyCase struct {
	name  string
	build func() (*ir.Node, []string) // the layer, and "s" (scalar) or "f" (full) per input
}

func bodyCases() []bodyCase {
	return []bodyCase{
		{"add-relu-mul-sigmoid", func() (*ir.Node, []string) {
			c := newChain("x", "k", "y")
			v := c.op("Add", "a", []string{"x", "k"})
			v = c.op("Relu", "r", []string{v})
			v = c.op("Mul", "m", []string{"y", v})
			v = c.op("Sigmoid", "s", []string{v})
			return c.layer(v), []string{"f", "s", "f"}
		}},
		{"silu", func() (*ir.Node, []string) {
			c := newChain("x")
			s := c.op("Sigmoid", "s", []string{"x"})
			return c.layer(c.op("Mul", "m", []string{"x", s})), []string{"f"}
		}},
		{"tree", func() (*ir.Node, []string) {
			c := newChain("x", "y", "half", "two", "lo", "hi")
			a := c.op("Add", "a", []string{"x", "y"})
			b := c.op("Tanh", "b", []string{"x"})
			b = c.op("Sub", "b2", []string{b, "half"})
			m := c.op("Mul", "m", []string{a, b})
			p := c.op("Pow", "p", []string{m, "two"})
			d := c.op("Div", "d", []string{"y", p})
			e := c.op("Clip", "e", []string{d, "lo", "hi"})
			e = c.op("Exp", "e2", []string{e})
			l := c.op("Log", "l", []string{"x"})
			l = c.op("Abs", "l2", []string{l})
			l = c.op("Sqrt", "l3", []string{l})
			return c.layer(c.op("Sub", "z", []string{e, l})), []string{"f", "f", "s", "s", "s", "s"}
		}},
		{"activations", func() (*ir.Node, []string) {
			c := newChain("x", "k")
			v := c.op("LeakyRelu", "a", []string{"x"}, fattr("alpha", 0.1))
			v = c.op("HardSigmoid", "b", []string{v}, fattr("alpha", 0.3), fattr("beta", 0.4))
			v = c.op("Mul", "c", []string{"k", v})
			v = c.op("HardSwish", "d", []string{v})
			v = c.op("Gelu", "e", []string{v}, sattr("approximate", "tanh"))
			v = c.op("Erf", "f", []string{v})
			v = c.op("Neg", "g", []string{v})
			v = c.op("Reciprocal", "h", []string{v})
			v = c.op("Softplus", "i", []string{v})
			v = c.op("Gelu", "j", []string{v})
			return c.layer(c.op("Clip", "l", []string{v, "", "k"})), []string{"f", "s"}
		}},
		{"fallback-elu", func() (*ir.Node, []string) {
			c := newChain("x", "k")
			v := c.op("Mul", "a", []string{"x", "k"})
			v = c.op("Elu", "b", []string{v}, fattr("alpha", 0.7))
			return c.layer(c.op("Tanh", "c", []string{v})), []string{"f", "s"}
		}},
	}
}

// TestElementwiseBits: an Elementwise layer, through Run and through Into,
// gives the bits of its body's nodes run one by one, on random inputs with
// NaN, infinities, zeros and subnormals, at sizes around the block size,
// on one worker and on several.
func TestElementwiseBits(t *testing.T) {
	reg := builtin.Registry()
	op, err := reg.Lookup(&ir.Node{OpType: "Elementwise", Domain: fused.Domain, Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][]int{{1}, {7}, {3, 5}, {fused.BlockSize - 1}, {fused.BlockSize}, {fused.BlockSize + 1}, {2, fused.BlockSize + 3}, {5, 4096}, {3, 7, 1001}}
	pools := []*parallel.Pool{parallel.New(1), parallel.New(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, bc := range bodyCases() {
		for _, shape := range shapes {
			n, kinds := bc.build()
			in := make([]*tensor.Tensor, len(kinds))
			for i, k := range kinds {
				if k == "s" {
					in[i] = randomTensor(r)
					if i%2 == 0 {
						in[i] = in[i].Reshaped(1, 1)
					}
				} else {
					in[i] = randomTensor(r, shape...)
				}
			}
			want := unfused(t, reg, n.Attrs["body"].G, in)
			for _, pool := range pools {
				c := &kernel.Ctx{Pool: pool, State: new(kernel.State)}
				got, err := op.Run(c, n, in)
				if err != nil {
					t.Fatalf("%s %v: Run: %v", bc.name, shape, err)
				}
				if err := sameBits(got[0], want); err != nil {
					t.Fatalf("%s %v: Run: %v", bc.name, shape, err)
				}
				out := tensor.New(tensor.Float32, want.Shape...)
				if err := op.Into(c, n, in, []*tensor.Tensor{out}); err != nil {
					t.Fatalf("%s %v: Into: %v", bc.name, shape, err)
				}
				if err := sameBits(out, want); err != nil {
					t.Fatalf("%s %v: Into: %v", bc.name, shape, err)
				}
			}
		}
	}
}

// TestElementwiseIntoAllocs: after warm-up, Into allocates nothing (which
// also shows that it ran blockwise: the unblocked path allocates), on one
// worker and on several.
func TestElementwiseIntoAllocs(t *testing.T) {
	reg := builtin.Registry()
	op, _ := reg.Lookup(&ir.Node{OpType: "Elementwise", Domain: fused.Domain, Version: 1})
	r := rand.New(rand.NewPCG(3, 4))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, bc := range bodyCases() {
		if bc.name == "fallback-elu" {
			continue
		}
		n, kinds := bc.build()
		in := make([]*tensor.Tensor, len(kinds))
		for i, k := range kinds {
			if k == "s" {
				in[i] = randomTensor(r)
			} else {
				in[i] = randomTensor(r, 3, fused.BlockSize+5)
			}
		}
		want := unfused(t, reg, n.Attrs["body"].G, in)
		out := []*tensor.Tensor{tensor.New(tensor.Float32, want.Shape...)}
		for _, pool := range pools {
			c := &kernel.Ctx{Pool: pool, State: new(kernel.State)}
			for range 5 { // warm-up, on every worker
				if err := op.Into(c, n, in, out); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(20, func() {
				if err := op.Into(c, n, in, out); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 && !raceEnabled {
				t.Errorf("%s, %d workers: Into allocates %v times per call", bc.name, pool.Workers(), allocs)
			}
			if err := sameBits(out[0], want); err != nil {
				t.Errorf("%s: %v", bc.name, err)
			}
		}
	}
}

// TestElementwiseInPlace: the output may share the storage of a full
// input (kernel.Op.InPlace).
func TestElementwiseInPlace(t *testing.T) {
	reg := builtin.Registry()
	op, _ := reg.Lookup(&ir.Node{OpType: "Elementwise", Domain: fused.Domain, Version: 1})
	if !op.InPlace {
		t.Fatal("Elementwise is not marked InPlace")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, bc := range bodyCases() {
		n, kinds := bc.build()
		in := make([]*tensor.Tensor, len(kinds))
		for i, k := range kinds {
			if k == "s" {
				in[i] = randomTensor(r)
			} else {
				in[i] = randomTensor(r, 2*fused.BlockSize+17)
			}
		}
		want := unfused(t, reg, n.Attrs["body"].G, in)
		for i, k := range kinds {
			if k != "f" {
				continue
			}
			args := append([]*tensor.Tensor{}, in...)
			args[i] = in[i].Clone()
			if err := op.Into(&kernel.Ctx{}, n, args, []*tensor.Tensor{args[i]}); err != nil {
				t.Fatal(err)
			}
			if err := sameBits(args[i], want); err != nil {
				t.Errorf("%s, output over input %d: %v", bc.name, i, err)
			}
		}
	}
}

func TestElementwiseInfer(t *testing.T) {
	reg := builtin.Registry()
	n, _ := bodyCases()[0].build()
	batch := ir.Dim{Value: -1, Param: "batch"}
	x := ir.Type{DType: tensor.Float32, Shape: []ir.Dim{batch, ir.Fixed(8)}, RankKnown: true}
	k := ir.StaticType(tensor.Float32, nil)
	got, err := reg.InferNode(n, []ir.InferInput{{Present: true, Type: x}, {Present: true, Type: k}, {Present: true, Type: x}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].String() != x.String() {
		t.Fatalf("inferred %v, want %v", got, x)
	}
}

// siluGraph is base (+ Add) then x·Sigmoid(x), as separate nodes, and the
// same as one Fused layer.
func siluCase(base string, add, sigFirst bool) (nodes []*ir.Node, f *ir.Node) {
	b := &ir.Node{Name: "b", OpType: base, Version: 13, Inputs: []string{"x", "w"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}
	if base == "Conv" {
		b.Attrs["pads"] = &ir.Attr{Name: "pads", Kind: ir.AttrInts, Ints: []int64{1, 1, 1, 1}}
		b.Version = 11
	}
	nodes = append(nodes, b)
	v := "y"
	fin := []string{"x", "w"}
	layout := []int64{2, 0, 0}
	if add {
		nodes = append(nodes, &ir.Node{Name: "a", OpType: "Add", Version: 14, Inputs: []string{v, "r"}, Outputs: []string{"z"}, Attrs: map[string]*ir.Attr{}})
		v = "z"
		fin = append(fin, "r")
		layout[1] = 1
	}
	mulIn := []string{v, "s"}
	first := int64(0)
	if sigFirst {
		mulIn, first = []string{"s", v}, 1
	}
	nodes = append(nodes,
		&ir.Node{Name: "sig", OpType: "Sigmoid", Version: 13, Inputs: []string{v}, Outputs: []string{"s"}, Attrs: map[string]*ir.Attr{}},
		&ir.Node{Name: "mul", OpType: "Mul", Version: 14, Inputs: mulIn, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{}})
	f = &ir.Node{Name: "f", OpType: "Fused", Domain: fused.Domain, Version: 1, Inputs: fin, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{
		"base":              {Name: "base", Kind: ir.AttrString, S: base},
		"base_version":      {Name: "base_version", Kind: ir.AttrInt, I: b.Version},
		"layout":            {Name: "layout", Kind: ir.AttrInts, Ints: layout},
		"activation":        {Name: "activation", Kind: ir.AttrString, S: fused.SiLU},
		"act_version":       {Name: "act_version", Kind: ir.AttrInt, I: 13},
		"act_sigmoid_first": {Name: "act_sigmoid_first", Kind: ir.AttrInt, I: first},
	}}
	for k, a := range b.Attrs {
		f.Attrs[k] = a
	}
	return nodes, f
}

// TestFusedSiLU: a Fused layer with activation SiLU gives the bits of its
// nodes run one by one (Run and Into), and Into allocates nothing.
func TestFusedSiLU(t *testing.T) {
	reg := builtin.Registry()
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		base          string
		x, w, res     []int
		add, sigFirst bool
	}{
		{"Gemm", []int{4, 30}, []int{30, 16}, []int{16}, true, false},
		{"MatMul", []int{3, 5, 20}, []int{20, 700}, nil, false, true},
		{"Conv", []int{1, 3, 40, 40}, []int{8, 3, 3, 3}, []int{1, 8, 40, 40}, true, true},
	} {
		nodes, f := siluCase(tc.base, tc.add, tc.sigFirst)
		vals := map[string]*tensor.Tensor{"x": randomTensor(r, tc.x...), "w": randomTensor(r, tc.w...)}
		if tc.add {
			vals["r"] = randomTensor(r, tc.res...)
		}
		for _, n := range nodes {
			op, err := reg.Lookup(n)
			if err != nil {
				t.Fatal(err)
			}
			args := make([]*tensor.Tensor, len(n.Inputs))
			for j, name := range n.Inputs {
				args[j] = vals[name]
			}
			outs, err := op.Run(&kernel.Ctx{}, n, args)
			if err != nil {
				t.Fatal(err)
			}
			vals[n.Outputs[0]] = outs[0]
		}
		want := vals["out"]
		in := make([]*tensor.Tensor, len(f.Inputs))
		for i, name := range f.Inputs {
			in[i] = vals[name]
		}
		op, err := reg.Lookup(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := op.Run(&kernel.Ctx{}, f, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameBits(got[0], want); err != nil {
			t.Fatalf("%s: Run: %v", tc.base, err)
		}
		types := make([]ir.InferInput, len(in))
		for i, x := range in {
			types[i] = ir.InferInput{Present: true, Type: ir.TensorType(x)}
		}
		ts, err := reg.InferNode(f, types)
		if err != nil || ts[0].String() != ir.TensorType(want).String() {
			t.Fatalf("%s: Infer gave %v, %v; want %v", tc.base, ts, err, ir.TensorType(want))
		}
		out := []*tensor.Tensor{tensor.New(tensor.Float32, want.Shape...)}
		c := &kernel.Ctx{State: new(kernel.State)}
		for range 5 { // warm-up, on every worker
			if err := op.Into(c, f, in, out); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(10, func() {
			if err := op.Into(c, f, in, out); err != nil {
				t.Fatal(err)
			}
		})
		if err := sameBits(out[0], want); err != nil {
			t.Fatalf("%s: Into: %v", tc.base, err)
		}
		if allocs != 0 && !raceEnabled {
			t.Errorf("%s: Into allocates %v times per call", tc.base, allocs)
		}
	}
}
