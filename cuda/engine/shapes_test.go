package engine_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// ShapeValue, which reads a value's shape without its data, gives
// kernel/shape's Shape and Size on random shapes, starts and ends.
func TestShapeValue(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for i := range 400 {
		sh := make([]int, r.Intn(6))
		for j := range sh {
			sh[j] = r.Intn(4)
		}
		n := &ir.Node{Name: fmt.Sprint("shape", i), OpType: "Shape", Version: 15, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y"}}
		if i%7 == 6 {
			n.OpType, n.Version = "Size", 13
		}
		if r.Intn(2) == 0 {
			n.Attrs["start"] = &ir.Attr{Name: "start", Kind: ir.AttrInt, I: int64(r.Intn(15) - 7)}
		}
		if r.Intn(2) == 0 {
			n.Attrs["end"] = &ir.Attr{Name: "end", Kind: ir.AttrInt, I: int64(r.Intn(15) - 7)}
		}
		want, err := cpuRun(n, []*tensor.Tensor{tensor.From(make([]float32, tensor.NumElems(sh)), sh...)})
		if err != nil {
			t.Fatalf("%s %v: CPU: %v", n.OpType, n.Attrs, err)
		}
		got, err := ShapeValue(n, sh)
		if err != nil {
			t.Fatal(err)
		}
		w, g := want[0].Data.([]int64), got.Data.([]int64)
		if !slices.Equal(w, g) || !slices.Equal(want[0].Shape, got.Shape) {
			t.Fatalf("%s of %v (start %v, end %v): %v %v, the CPU's %v %v", n.OpType, sh, n.Attrs["start"], n.Attrs["end"], got.Shape, g, want[0].Shape, w)
		}
	}
}

// Integer layers are host(shape) when their inputs derive from shapes and
// constants, host(view) when they only view integer data; integer
// arithmetic on data stays on the CPU.
func TestPlaceShapes(t *testing.T) {
	f3 := ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Value: -1, Param: "batch"}, ir.Fixed(8), ir.Fixed(4)}}
	i1 := ir.StaticType(tensor.Int64, []int{1})
	i3 := ir.StaticType(tensor.Int64, []int{3})
	types := map[string]ir.Type{"x": f3, "ids": ir.StaticType(tensor.Int64, []int{2, 8}), "s": i3, "d": i1, "u": i1,
		"ids1": ir.StaticType(tensor.Int64, []int{2, 1, 8}), "sub": i1, "r": ir.StaticType(tensor.Int64, []int{8}),
		"f": ir.StaticType(tensor.Float32, []int{2, 8}), "bad": i1}
	node := func(name, op string, in, out []string) *ir.Node {
		return &ir.Node{Name: name, OpType: op, Version: 14, Attrs: map[string]*ir.Attr{}, Inputs: in, Outputs: out}
	}
	g := &ir.Graph{
		Inputs: []*ir.Value{{Name: "x", Type: f3}, {Name: "ids", Type: types["ids"]}},
		Nodes: []*ir.Node{
			node("shape", "Shape", []string{"x"}, []string{"s"}),
			node("gather", "Gather", []string{"s", "one"}, []string{"d"}),
			node("unsq", "Unsqueeze", []string{"d", "zero"}, []string{"u"}),
			node("range", "Range", []string{"zero0", "d0", "one0"}, []string{"r"}),
			node("view", "Unsqueeze", []string{"ids", "one"}, []string{"ids1"}),
			node("sub", "Sub", []string{"ids", "one"}, []string{"sub"}),
			node("cos", "ConstantOfShape", []string{"s"}, []string{"f"}),
			node("data", "Unsqueeze", []string{"sub", "zero"}, []string{"bad"}),
		},
		Initializers: map[string]*tensor.Tensor{"one": tensor.From([]int64{1}, 1), "zero": tensor.From([]int64{0}, 1),
			"zero0": tensor.Scalar(int64(0)), "one0": tensor.Scalar(int64(1)), "d0": tensor.Scalar(int64(8))},
	}
	want := map[string]string{"shape": "host(shape)", "gather": "host(shape)", "unsq": "host(shape)", "range": "host(shape)",
		"view": "host(view)", "sub": "", "cos": "", "data": "host(view)"}
	for _, p := range Place(g, types) {
		w := want[p.Layer]
		switch {
		case w == "" && p.Backend != plan.BackendCPU:
			t.Errorf("%s: placed %s %q, want the CPU", p.Layer, p.Backend, p.Kernel)
		case w != "" && (p.Backend != plan.BackendCUDA || p.Kernel != w):
			t.Errorf("%s: placed %s %q (%s), want cuda %q", p.Layer, p.Backend, p.Kernel, p.Reason, w)
		}
	}
}
