package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// A BERT's integer inputs are staged when every reader takes them so:
// the embedding Gather's indices, the mask's Cast through its views, a
// Shape; any other reader (integer arithmetic, an output, a table that is
// not a weight, bool indices) reads them on the host and the program runs
// no graph.
func TestPlanStages(t *testing.T) {
	emb := tensor.From(make([]float32, 12), 6, 2)
	mk := func(change func(g *ir.Graph, kernel map[*ir.Node]string)) (*ir.Graph, map[*ir.Node]string) {
		nodes := []*ir.Node{
			{Name: "shape", OpType: "Shape", Inputs: []string{"ids"}, Outputs: []string{"s"}},
			{Name: "emb", OpType: "Gather", Inputs: []string{"emb", "ids"}, Outputs: []string{"e"}},
			{Name: "u1", OpType: "Unsqueeze", Inputs: []string{"mask", "one"}, Outputs: []string{"m1"}},
			{Name: "u2", OpType: "Unsqueeze", Inputs: []string{"m1", "one"}, Outputs: []string{"m2"}},
			{Name: "cast", OpType: "Cast", Inputs: []string{"m2"}, Outputs: []string{"mf"}},
		}
		kernel := map[*ir.Node]string{nodes[0]: hostShape, nodes[1]: "vx_gather", nodes[2]: hostView, nodes[3]: hostView, nodes[4]: "vx_cast(int64)"}
		g := &ir.Graph{
			Inputs:       []*ir.Value{{Name: "ids", Type: ir.StaticType(tensor.Int64, []int{1, 4})}, {Name: "mask", Type: ir.StaticType(tensor.Int64, []int{1, 4})}},
			Outputs:      []*ir.Value{{Name: "e"}, {Name: "mf"}},
			Nodes:        nodes,
			Initializers: map[string]*tensor.Tensor{"emb": emb, "one": tensor.From([]int64{1}, 1)},
		}
		if change != nil {
			change(g, kernel)
		}
		return g, kernel
	}
	g, k := mk(nil)
	st, ok := planStages(g, k)
	if !ok || len(st) != 2 || st[0].node.Name != "emb" || !st[0].gather || st[0].D != 6 || st[0].in != 0 || st[1].node.Name != "cast" || st[1].gather || st[1].in != 1 {
		t.Fatalf("stages %+v, %v", st, ok)
	}
	for name, change := range map[string]func(*ir.Graph, map[*ir.Node]string){
		"integer arithmetic": func(g *ir.Graph, k map[*ir.Node]string) {
			n := &ir.Node{Name: "sub", OpType: "Sub", Inputs: []string{"ids", "one"}, Outputs: []string{"d"}}
			g.Nodes = append(g.Nodes, n)
			k[n] = hostShape
		},
		"an output": func(g *ir.Graph, k map[*ir.Node]string) { g.Outputs = append(g.Outputs, &ir.Value{Name: "m1"}) },
		"a CPU reader": func(g *ir.Graph, k map[*ir.Node]string) {
			delete(k, g.Nodes[1])
		},
		"a computed table": func(g *ir.Graph, k map[*ir.Node]string) { g.Nodes[1].Inputs[0] = "e0" },
		"bool indices":     func(g *ir.Graph, k map[*ir.Node]string) { g.Inputs[0].Type.DType = tensor.Bool },
		"float16":          func(g *ir.Graph, k map[*ir.Node]string) { g.Inputs[1].Type.DType = tensor.Float16 },
	} {
		g, k := mk(change)
		if st, ok := planStages(g, k); ok {
			t.Errorf("%s: staged %+v", name, st)
		}
	}
}

// A program whose output is a host layer's runs no graph (a replay hands
// out device buffers); integer outputs of a CPU layer or a GPU kernel do
// not count here.
func TestHostOutputs(t *testing.T) {
	shape := &ir.Node{Name: "shape", OpType: "Shape", Inputs: []string{"x"}, Outputs: []string{"s"}}
	relu := &ir.Node{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}
	g := &ir.Graph{Nodes: []*ir.Node{shape, relu}, Outputs: []*ir.Value{{Name: "y"}}}
	k := map[*ir.Node]string{shape: hostShape, relu: "vx_unary"}
	if hostOutputs(g, k) {
		t.Fatal("a float output from a GPU kernel counted as a host output")
	}
	g.Outputs = append(g.Outputs, &ir.Value{Name: "s"})
	if !hostOutputs(g, k) {
		t.Fatal("Shape's output, a graph output, not seen")
	}
	k[shape] = hostView
	if !hostOutputs(g, k) {
		t.Fatal("a view's output, a graph output, not seen")
	}
}

// A failed driver call is a device fault, wrapped or not; a model's
// refusal of its inputs is not.
func TestDeviceFault(t *testing.T) {
	pr := &Program{}
	drv := &cuda.Error{Call: "cuLaunchKernel", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"}
	if !pr.DeviceFault(drv) || !pr.DeviceFault(fmt.Errorf("engine: layer a (Gather): %w", drv)) {
		t.Fatal("a driver error is not a device fault")
	}
	if pr.DeviceFault(errors.New("engine: layer /pos/Gather (Gather): exact: Gather index 64 out of range for an axis of 64")) {
		t.Fatal("a model error is a device fault")
	}
}

// The values a Gather or Cast uploads once per shape: integer constants
// and host(shape) outputs; never a float weight or a layer's float output.
func TestProgramShapeDerived(t *testing.T) {
	shape := &ir.Node{Name: "shape", OpType: "Shape", Inputs: []string{"x"}, Outputs: []string{"s"}}
	relu := &ir.Node{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}
	pr := &Program{g: &ir.Graph{Nodes: []*ir.Node{shape, relu}, Initializers: map[string]*tensor.Tensor{
		"i": tensor.From([]int64{1}, 1), "w": tensor.From([]float32{1}, 1)}}, kernel: map[*ir.Node]string{shape: hostShape, relu: "vx_unary"}}
	for v, want := range map[string]bool{"i": true, "s": true, "w": false, "y": false, "x": false} {
		if got := pr.shapeDerived(v); got != want {
			t.Errorf("shapeDerived(%s) = %v, want %v", v, got, want)
		}
	}
}
