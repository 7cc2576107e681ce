package exec_test

import (
	"math/rand"
	"runtime"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

func node(op string, in []string, out ...string) *ir.Node {
	return &ir.Node{Name: out[0], OpType: op, Version: 17, Inputs: in, Outputs: out}
}

func graphOf(nodes []*ir.Node, outs ...string) *ir.Graph {
	g := &ir.Graph{
		Name:         "g",
		Inputs:       []*ir.Value{{Name: "x", Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{{Value: -1, Param: "n"}, ir.Fixed(3)}, RankKnown: true}}},
		Initializers: map[string]*tensor.Tensor{"shape32": tensor.From([]int64{3, -1}, 2), "shape23": tensor.From([]int64{2, 3}, 2)},
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

// bindAndCompare runs g through a Bound and through Executor.Run and
// requires the same bits; it returns the Bound's arena.
func bindAndCompare(t *testing.T, g *ir.Graph) *exec.Bound {
	t.Helper()
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	x := tensor.New(tensor.Float32, 2, 3)
	for i := range x.Data.([]float32) {
		x.Data.([]float32)[i] = float32(r.NormFloat64())
	}
	ref, err := ex.Run(map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ex.Bind([][]int{{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Allocating(); len(n) != 0 {
		t.Fatalf("nodes without Into: %v", n[0].OpType)
	}
	for round := 0; round < 2; round++ {
		out, err := b.Execute([]*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range g.Outputs {
			if !sameBits(out[i], ref[o.Name]) {
				t.Fatalf("output %q: Execute gives %v, Run gives %v", o.Name, out[i].Data, ref[o.Name].Data)
			}
		}
	}
	return b
}

func TestInPlaceReuse(t *testing.T) {
	// A chain of elementwise ops, each input dying at its reader: all of
	// them share one slot.
	g := graphOf([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Sigmoid", []string{"a"}, "b"),
		node("Tanh", []string{"b"}, "c"),
		node("Relu", []string{"c"}, "y"),
	}, "y")
	b := bindAndCompare(t, g)
	s := b.Arena().Slots
	if s["a"] != s["b"] || s["b"] != s["c"] || s["c"] != s["y"] {
		t.Errorf("chain not computed in place: %v", s)
	}
	if b.Arena().PeakBytes != 64 {
		t.Errorf("peak %d bytes, want one 64-byte slot", b.Arena().PeakBytes)
	}
}

func TestInPlaceNeverCorrupts(t *testing.T) {
	// a is read again after Sigmoid, which could run in place: it must not.
	g := graphOf([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Sigmoid", []string{"a"}, "b"),
		node("Add", []string{"a", "b"}, "y"),
	}, "y")
	b := bindAndCompare(t, g)
	if s := b.Arena().Slots; s["a"] == s["b"] {
		t.Errorf("b overwrote a, which is read later: %v", s)
	}

	// r is a view of a (Reshape shares its storage), and is read after
	// Exp reads a for the last time: Exp must not write over a.
	g = graphOf([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Reshape", []string{"a", "shape32"}, "r"),
		node("Exp", []string{"a"}, "e"),
		node("Neg", []string{"r"}, "y1"),
		node("Relu", []string{"e"}, "y2"),
	}, "y1", "y2")
	b = bindAndCompare(t, g)
	s := b.Arena().Slots
	if s["r"] != s["a"] {
		t.Errorf("Reshape not planned as a view: %v", s)
	}
	if s["e"] == s["a"] {
		t.Errorf("e overwrote a while its view r is read later: %v", s)
	}

	// Add(a, a) may run in place; Add(a, v) with v a view of a under
	// another shape may not.
	g = graphOf([]*ir.Node{
		node("Neg", []string{"x"}, "a"),
		node("Reshape", []string{"a", "shape32"}, "r"),
		node("Reshape", []string{"r", "shape23"}, "v"),
		node("Add", []string{"a", "v"}, "y"),
	}, "y")
	b = bindAndCompare(t, g)
	if s := b.Arena().Slots; s["y"] == s["a"] {
		// v has a's shape and storage: writing y over a while reading v at
		// the same offsets is still elementwise-safe, but only the same
		// value is allowed, to keep the rule simple.
		t.Errorf("y planned over a although v aliases a: %v", s)
	}
}

func TestBindErrors(t *testing.T) {
	g := graphOf([]*ir.Node{node("Relu", []string{"x"}, "y")}, "y")
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Bind([][]int{{2, 4}}); err == nil {
		t.Error("bound a shape that does not fit the declared one")
	}
	b, err := ex.Bind([][]int{{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Execute([]*tensor.Tensor{tensor.New(tensor.Float32, 3, 3)}); err == nil {
		t.Error("executed an input of another shape than the bound one")
	}
	if _, err := b.Execute([]*tensor.Tensor{tensor.New(tensor.Float64, 2, 3)}); err == nil {
		t.Error("executed an input of another dtype")
	}
}

// TestArenaAliasListsStayBounded: the storages an allocating kernel's
// output may alias are listed once each. A chain of allocating nodes that
// each read their input twice doubled the list at every node before
// (swin_t's 6,623 nodes made the planner ask for 23 GB); the layout of a
// 25-node chain now takes a few kilobytes (it took 2^24 list entries).
func TestArenaAliasListsStayBounded(t *testing.T) {
	nodes := []*ir.Node{node("Relu", []string{"x"}, "y0")}
	types := map[string]ir.Type{"x": {DType: tensor.Float32, Shape: []ir.Dim{ir.Fixed(2), ir.Fixed(3)}, RankKnown: true}}
	types["y0"] = types["x"]
	prev := "y0"
	for i := 1; i <= 24; i++ {
		// No type for these values: not static, so their kernels allocate.
		o := "y" + string(rune('a'+i%26)) + string(rune('0'+i/26))
		nodes = append(nodes, node("Mul", []string{prev, prev}, o))
		prev = o
	}
	g := graphOf(nodes, prev)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a := exec.PlanArena(g, types, builtin.Registry())
	runtime.ReadMemStats(&after)
	if _, ok := a.Slots["y0"]; !ok {
		t.Fatal("the static Relu's output has no slot")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("planning a 25-node graph allocated %d bytes", got)
	}
}
