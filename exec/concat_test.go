package exec_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// catGraph is a graph of nodes over one input x of shape [N,16] (64 bytes a
// row), with w16 ([16,16]) and w32 ([32,16]) initializers for MatMuls back
// to 16 columns.
func catGraph(nodes []*ir.Node, outs ...string) *ir.Graph {
	r := rand.New(rand.NewSource(3))
	weight := func(k int) *tensor.Tensor {
		w := tensor.New(tensor.Float32, k, 16)
		for i := range w.Data.([]float32) {
			w.Data.([]float32)[i] = float32(r.NormFloat64())
		}
		return w
	}
	g := &ir.Graph{
		Name:         "g",
		Inputs:       []*ir.Value{{Name: "x", Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{{Value: -1, Param: "n"}, ir.Fixed(16)}, RankKnown: true}}},
		Initializers: map[string]*tensor.Tensor{"w16": weight(16), "w32": weight(32), "w48": weight(48), "w64": weight(64)},
		Nodes:        nodes,
	}
	for _, o := range outs {
		g.Outputs = append(g.Outputs, &ir.Value{Name: o})
	}
	if err := ir.Verify(g, nil); err != nil {
		panic(err)
	}
	return g
}

func cat(in []string, out string) *ir.Node {
	n := node("Concat", in, out)
	n.Attrs = map[string]*ir.Attr{"axis": {Name: "axis", Kind: ir.AttrInt, I: 1}}
	return n
}

// catRun binds g at batch rows and checks, at 1 and 2 threads and on two
// runs each, that Execute gives Executor.Run's bits with the Concats
// planned in place and with every Concat copying; it returns the in-place
// Bound.
func catRun(t *testing.T, g *ir.Graph, batch int) *exec.Bound {
	t.Helper()
	r := rand.New(rand.NewSource(int64(batch)))
	x := tensor.New(tensor.Float32, batch, 16)
	for i := range x.Data.([]float32) {
		x.Data.([]float32)[i] = float32(r.NormFloat64())
	}
	var first *exec.Bound
	for _, copyAll := range []bool{false, true} {
		for _, threads := range []int{1, 2} {
			ex := concatExecutor(t, g, copyAll, threads)
			ref, err := ex.Run(map[string]*tensor.Tensor{"x": x})
			if err != nil {
				t.Fatal(err)
			}
			b, err := ex.Bind([][]int{{batch, 16}})
			if err != nil {
				t.Fatal(err)
			}
			if n := b.Allocating(); len(n) != 0 {
				t.Fatalf("nodes without Into: %v", n[0].OpType)
			}
			if copyAll && (b.Concats().InPlace != 0 || b.Concats().Partial != 0) {
				t.Fatalf("SetCopyConcats(true) still plans Concats in place: %+v", b.Concats())
			}
			for round := 0; round < 2; round++ {
				out, err := b.Execute([]*tensor.Tensor{x})
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range g.Outputs {
					if !sameBits(out[i], ref[o.Name]) {
						t.Fatalf("copy all %v, %d threads, round %d: output %q: Execute gives %v, Run gives %v", copyAll, threads, round, o.Name, out[i].Data, ref[o.Name].Data)
					}
				}
			}
			if first == nil {
				first = b
			}
		}
	}
	return first
}

// concatExecutor returns an executor of g at threads threads, its Concats
// planned in place or (copyAll) copying.
func concatExecutor(t *testing.T, g *ir.Graph, copyAll bool, threads int) *exec.Executor {
	t.Helper()
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	ex.SetCopyConcats(copyAll)
	if err := ex.SetCPU(exec.CPU{Threads: threads}); err != nil {
		t.Fatal(err)
	}
	return ex
}

// inside reports whether slot a lies in b at byte offset off of b.
func inside(a, b plan.Slot, off int64) bool {
	return a.Offset == b.Offset+off && a.Offset+a.Bytes <= b.Offset+b.Bytes
}

func TestConcatInPlace(t *testing.T) {
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"a", "b"}, "c"),
		node("MatMul", []string{"c", "w32"}, "y"),
	}, "y")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	if !inside(s["a"], s["c"], 0) || !inside(s["b"], s["c"], 64) {
		t.Errorf("inputs not placed in the Concat's output: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{InPlace: 1}) {
		t.Errorf("concats %+v, want one in place", st)
	}
	// At batch 2 the inputs are strided in the output: the Concat copies.
	b = catRun(t, g, 2)
	if st := b.Concats(); st != (exec.ConcatStats{Copied: 1}) {
		t.Errorf("batch 2: concats %+v, want one copied", st)
	}
	if s := b.Arena().Slots; s["a"].Offset >= s["c"].Offset && s["a"].Offset < s["c"].Offset+s["c"].Bytes {
		t.Errorf("batch 2: a placed inside c: %v", s)
	}
}

func TestConcatInputTwice(t *testing.T) {
	// a is read twice by one Concat: it lives at its first block, and the
	// Concat copies it into the second.
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"a", "b", "a"}, "c"),
		node("MatMul", []string{"c", "w48"}, "y"),
	}, "y")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	if !inside(s["a"], s["c"], 0) || !inside(s["b"], s["c"], 64) {
		t.Errorf("inputs not placed: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{Partial: 1}) {
		t.Errorf("concats %+v, want one partial", st)
	}
	// The copy of the second block allocates nothing.
	x := []*tensor.Tensor{tensor.New(tensor.Float32, 1, 16)}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := b.Execute(x); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("Execute allocates %v times a run", allocs)
	}
}

func TestConcatReadersAfter(t *testing.T) {
	// a is read after the Concat, by a kernel that may run in place: while
	// c is read later (it is a graph output), Sigmoid must not write over a.
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"a", "b"}, "c"),
		node("Sigmoid", []string{"a"}, "s"),
	}, "c", "s")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	if s["s"] == s["a"] {
		t.Errorf("s written over a, inside the graph output c: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{InPlace: 1}) {
		t.Errorf("concats %+v, want one in place", st)
	}
	// Once c is read for the last time, a's block may be overwritten.
	g = catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"a", "b"}, "c"),
		node("MatMul", []string{"c", "w32"}, "m"),
		node("Sigmoid", []string{"a"}, "s"),
		node("Add", []string{"s", "m"}, "y"),
	}, "y")
	catRun(t, g, 1)
	// b is read by a node between its producer and the Concat, which may
	// run in place: it must not, b's block is the Concat's.
	g = catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		node("Tanh", []string{"b"}, "t"),
		cat([]string{"a", "b"}, "c"),
		node("MatMul", []string{"c", "w32"}, "m"),
		node("Add", []string{"t", "m"}, "y"),
	}, "y")
	b = catRun(t, g, 1)
	if s := b.Arena().Slots; s["t"] == s["b"] {
		t.Errorf("t written over b: %v", s)
	}
}

func TestConcatViewInput(t *testing.T) {
	// r is a view of a (Flatten): it is not written by its producer, so the
	// Concat copies it; b is still placed.
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Flatten", []string{"a"}, "r"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"r", "b"}, "c"),
		node("MatMul", []string{"c", "w32"}, "m"),
		node("Add", []string{"a", "m"}, "y"),
	}, "y")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	if s["r"] != s["a"] || inside(s["a"], s["c"], 0) {
		t.Errorf("the view r or its input a placed in c: %v", s)
	}
	if !inside(s["b"], s["c"], 64) {
		t.Errorf("b not placed: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{Partial: 1}) {
		t.Errorf("concats %+v, want one partial", st)
	}
	// A view of a placed value is a view of its block.
	g = catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"a", "b"}, "c"),
		node("Flatten", []string{"b"}, "r"),
		node("MatMul", []string{"c", "w32"}, "m"),
		node("Add", []string{"r", "m"}, "y"),
	}, "y")
	b = catRun(t, g, 1)
	if s := b.Arena().Slots; s["r"] != s["b"] || !inside(s["b"], s["c"], 64) {
		t.Errorf("r not a view of b's block: %v", s)
	}
}

func TestConcatProducerInPlace(t *testing.T) {
	// Sigmoid could write b over a (a dies there): b's place is the
	// Concat's block instead.
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Sigmoid", []string{"a"}, "b"),
		node("Relu", []string{"x"}, "d"),
		cat([]string{"b", "d"}, "c"),
		node("MatMul", []string{"c", "w32"}, "y"),
	}, "y")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	if !inside(s["b"], s["c"], 0) || s["a"] == s["b"] {
		t.Errorf("b not placed in c: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{InPlace: 1}) {
		t.Errorf("concats %+v, want one in place", st)
	}
}

func TestConcatOutside(t *testing.T) {
	// Graph inputs, initializers and graph outputs keep their own storage:
	// the Concat copies them.
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		node("MatMul", []string{"b", "w16"}, "o"),
		cat([]string{"x", "a", "o"}, "c"),
		node("MatMul", []string{"c", "w48"}, "y"),
	}, "y", "o")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	if !inside(s["a"], s["c"], 64) || inside(s["o"], s["c"], 128) {
		t.Errorf("a not placed, or the graph output o placed: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{Partial: 1}) {
		t.Errorf("concats %+v, want one partial", st)
	}
	// A Concat that is a graph output holds its inputs.
	g = catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"a", "b"}, "c"),
	}, "c")
	if st := catRun(t, g, 1).Concats(); st != (exec.ConcatStats{InPlace: 1}) {
		t.Errorf("output Concat: %+v, want one in place", st)
	}
}

func TestConcatNested(t *testing.T) {
	// p feeds c: p lies in c's first block, a and b in p.
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Relu", []string{"x"}, "b"),
		cat([]string{"a", "b"}, "p"),
		node("Tanh", []string{"x"}, "d"),
		cat([]string{"p", "d"}, "c"),
		node("MatMul", []string{"p", "w32"}, "m"),
		node("Flatten", []string{"c"}, "f"),
		node("MatMul", []string{"f", "w48"}, "n"),
		node("Add", []string{"m", "n"}, "y"),
	}, "y")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	if !inside(s["p"], s["c"], 0) || !inside(s["a"], s["c"], 0) || !inside(s["b"], s["c"], 64) || !inside(s["d"], s["c"], 128) {
		t.Errorf("nested Concat not placed: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{InPlace: 2}) {
		t.Errorf("concats %+v, want two in place", st)
	}
}

func TestConcatDenseBlock(t *testing.T) {
	// densenet: layer k reads the Concat of the block's first k features,
	// and the block ends with the Concat of all of them. Every Concat is a
	// prefix of the last one and copies nothing.
	g := catGraph([]*ir.Node{
		node("Neg", []string{"x"}, "x0"),
		cat([]string{"x0"}, "c1"),
		node("MatMul", []string{"c1", "w16"}, "x1"),
		cat([]string{"x0", "x1"}, "c2"),
		node("MatMul", []string{"c2", "w32"}, "x2"),
		cat([]string{"x0", "x1", "x2"}, "c3"),
		node("MatMul", []string{"c3", "w48"}, "x3"),
		cat([]string{"x0", "x1", "x2", "x3"}, "f"),
		node("MatMul", []string{"f", "w64"}, "y"),
	}, "y")
	b := catRun(t, g, 1)
	s := b.Arena().Slots
	for k, v := range []string{"x0", "x1", "x2", "x3"} {
		if !inside(s[v], s["f"], int64(64*k)) {
			t.Errorf("%s not at block %d of f: %v", v, k, s)
		}
	}
	for _, v := range []string{"c1", "c2", "c3"} {
		if s[v].Offset != s["f"].Offset {
			t.Errorf("%s is not a prefix of f: %v", v, s)
		}
	}
	if st := b.Concats(); st != (exec.ConcatStats{InPlace: 4}) {
		t.Errorf("concats %+v, want four in place", st)
	}
	if p := b.Arena().PeakBytes; p > 4*64+2*64 {
		t.Errorf("peak %d bytes: the block's features are not shared", p)
	}
}

func TestConcatUnaligned(t *testing.T) {
	// Blocks of 12 bytes: only the first input's offset is aligned.
	g := &ir.Graph{
		Name:   "g",
		Inputs: []*ir.Value{{Name: "x", Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{ir.Fixed(1), ir.Fixed(3)}, RankKnown: true}}},
		Nodes: []*ir.Node{
			node("Neg", []string{"x"}, "a"),
			node("Relu", []string{"x"}, "b"),
			node("Tanh", []string{"x"}, "d"),
			cat([]string{"a", "b", "d"}, "c"),
			node("Sigmoid", []string{"c"}, "y"),
		},
		Outputs: []*ir.Value{{Name: "y"}},
	}
	if err := ir.Verify(g, nil); err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.From([]float32{-1, 2, -3}, 1, 3)
	ref, err := ex.Run(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ex.Bind([][]int{{1, 3}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Execute([]*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(out[0], ref["y"]) {
		t.Fatalf("Execute gives %v, Run gives %v", out[0].Data, ref["y"].Data)
	}
	s := b.Arena().Slots
	if s["a"].Offset != s["c"].Offset || s["b"].Offset%exec.Alignment != 0 || s["d"].Offset%exec.Alignment != 0 {
		t.Errorf("unaligned placement: %v", s)
	}
	if st := b.Concats(); st != (exec.ConcatStats{Partial: 1}) {
		t.Errorf("concats %+v, want one partial", st)
	}
}

func TestConcatLifetime(t *testing.T) {
	// a is written long before the Concat, and many values live and die
	// between: none may be planned over a's block or over the blocks the
	// later inputs will fill, from a's write on.
	nodes := []*ir.Node{node("Neg", []string{"x"}, "a")}
	prev := "x"
	for i := 0; i < 8; i++ {
		o := fmt.Sprintf("t%d", i)
		nodes = append(nodes, node("MatMul", []string{prev, "w16"}, o))
		prev = o
	}
	nodes = append(nodes,
		node("Relu", []string{prev}, "b"),
		cat([]string{"a", "b"}, "c"),
		node("MatMul", []string{"c", "w32"}, "y"))
	b := catRun(t, catGraph(nodes, "y"), 1)
	s := b.Arena().Slots
	for i := 0; i < 8; i++ {
		v := s[fmt.Sprintf("t%d", i)]
		if v.Offset < s["c"].Offset+s["c"].Bytes && s["c"].Offset < v.Offset+v.Bytes {
			t.Errorf("t%d planned over c, which is live from a's write: %v", i, s)
		}
	}
}

// TestConcatRandomGraphs: random graphs of Concats (nested, repeated
// inputs, outputs read again), views, in-place elementwise ops and MatMuls
// give Executor.Run's bits at batch 1 and 2, planned in place or not.
func TestConcatRandomGraphs(t *testing.T) {
	unary := []string{"Neg", "Relu", "Sigmoid", "Tanh", "Flatten"}
	total := exec.ConcatStats{}
	for seed := int64(0); seed < 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		width := map[string]int{"x": 1}
		names := []string{"x"}
		var nodes []*ir.Node
		pick := func() string { return names[r.Intn(len(names))] }
		for i := 0; i < 14; i++ {
			o := fmt.Sprintf("v%d", i)
			switch k := r.Intn(10); {
			case k < 4:
				x := pick()
				nodes = append(nodes, node(unary[r.Intn(len(unary))], []string{x}, o))
				width[o] = width[x]
			case k < 5:
				x := pick()
				var y string
				for _, c := range names {
					if width[c] == width[x] && r.Intn(2) == 0 {
						y = c
					}
				}
				if y == "" {
					y = x
				}
				nodes = append(nodes, node("Add", []string{x, y}, o))
				width[o] = width[x]
			case k < 6:
				x := pick()
				nodes = append(nodes, node("MatMul", []string{x, fmt.Sprintf("w%d", 16*width[x])}, o))
				width[o] = 1
			default:
				var in []string
				w := 0
				for len(in) == 0 || (r.Intn(2) == 0 && len(in) < 3) {
					x := pick()
					if w+width[x] > 4 {
						break
					}
					in = append(in, x)
					w += width[x]
				}
				if len(in) == 0 {
					in, w = []string{"x"}, 1
				}
				nodes = append(nodes, cat(in, o))
				width[o] = w
			}
			names = append(names, o)
		}
		outs := []string{names[len(names)-1]}
		for _, v := range names[1 : len(names)-1] {
			if r.Intn(5) == 0 {
				outs = append(outs, v)
			}
		}
		g := catGraph(nodes, outs...)
		for _, batch := range []int{1, 2} {
			t.Run(fmt.Sprintf("seed%d/b%d", seed, batch), func(t *testing.T) {
				st := catRun(t, g, batch).Concats()
				total.InPlace += st.InPlace
				total.Partial += st.Partial
				total.Copied += st.Copied
			})
		}
	}
	if total.InPlace == 0 || total.Partial == 0 {
		t.Errorf("the random graphs never planned a Concat in place, or never partly: %+v", total)
	}
	t.Logf("concats over all graphs: %+v", total)
}
