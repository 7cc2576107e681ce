package engine

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// TestCPULayerGetsCapturedOuterValues: a layer the plan keeps on the CPU
// whose subgraph reads values of the enclosing graph (a Loop body reading
// a value a GPU layer produced, and an initializer) gets them as its outer
// scope; body-local names and names the graph does not hold stay out.
func TestCPULayerGetsCapturedOuterValues(t *testing.T) {
	body := &ir.Graph{
		Name:   "body",
		Inputs: []*ir.Value{{Name: "i"}, {Name: "cond"}, {Name: "acc"}},
		Nodes: []*ir.Node{
			{OpType: "Add", Inputs: []string{"acc", "delta"}, Outputs: []string{"t"}},
			{OpType: "Mul", Inputs: []string{"t", "scale"}, Outputs: []string{"acc_out"}},
			{OpType: "Identity", Inputs: []string{"cond"}, Outputs: []string{"cond_out"}},
			{OpType: "Identity", Inputs: []string{"elsewhere"}, Outputs: []string{"unused"}},
		},
		Outputs: []*ir.Value{{Name: "cond_out"}, {Name: "acc_out"}},
	}
	loop := &ir.Node{OpType: "Loop", Name: "loop", Inputs: []string{"n", "c", "a"}, Outputs: []string{"y"},
		Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
	delta := tensor.From([]float32{2, 3}, 2)
	scale := tensor.From([]float32{0.5}, 1)
	g := &ir.Graph{Initializers: map[string]*tensor.Tensor{"scale": scale}}
	var got map[string]*tensor.Tensor
	pr := &Program{cpu: func(_ context.Context, n *ir.Node, in []*tensor.Tensor, outer map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
		got = outer
		return []*tensor.Tensor{tensor.From([]float32{1}, 1)}, nil
	}}
	one := tensor.From([]float32{1}, 1)
	s := &state{pr: pr, ctx: context.Background(), g: g, vals: map[string]*val{
		"n": {shape: []int{1}, host: one}, "c": {shape: []int{1}, host: one}, "a": {shape: []int{2}, host: delta},
		"delta": {shape: []int{2}, host: delta},
	}}
	if err := s.cpu(loop); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range got {
		names = append(names, k)
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"delta", "scale"}) {
		t.Fatalf("outer scope holds %v, want [delta scale]", names)
	}
	if got["delta"] != delta || got["scale"] != scale {
		t.Fatalf("outer values are not the graph's: %v", got)
	}
	if s.vals["y"] == nil || s.vals["y"].host == nil {
		t.Fatal("the layer's output was not recorded")
	}
	// A layer without subgraphs gets an empty scope.
	add := &ir.Node{OpType: "Add", Inputs: []string{"a", "delta"}, Outputs: []string{"z"}}
	if err := s.cpu(add); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("a layer without subgraphs got outer values %v", got)
	}
}
