package exec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

func addGraph() *ir.Graph {
	f32 := func(dims ...ir.Dim) ir.Type { return ir.Type{DType: tensor.Float32, Shape: dims, RankKnown: true} }
	g := &ir.Graph{
		Name:         "g",
		Inputs:       []*ir.Value{{Name: "x", Type: f32(ir.Dim{Value: -1, Param: "n"}, ir.Fixed(2))}},
		Outputs:      []*ir.Value{{Name: "y", Type: f32()}},
		Initializers: map[string]*tensor.Tensor{"b": tensor.From([]float32{10, 20}, 2)},
		Nodes:        []*ir.Node{{Name: "add", OpType: "Add", Version: 14, Inputs: []string{"x", "b"}, Outputs: []string{"y"}}},
	}
	if err := ir.Verify(g, nil); err != nil {
		panic(err)
	}
	return g
}

func TestRun(t *testing.T) {
	ex, err := exec.New(addGraph(), builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Run(map[string]*tensor.Tensor{"x": tensor.From([]float32{1, 2, 3, 4}, 2, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out["y"].Data.([]float32); got[3] != 24 {
		t.Fatalf("got %v", got)
	}
}

func TestInputErrors(t *testing.T) {
	ex, err := exec.New(addGraph(), builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in   map[string]*tensor.Tensor
		want string
	}{
		{map[string]*tensor.Tensor{}, `missing input "x" (float32[n,2])`},
		{map[string]*tensor.Tensor{"x": tensor.From([]int64{1, 2}, 1, 2)}, `input "x": expected dtype float32, got int64`},
		{map[string]*tensor.Tensor{"x": tensor.From([]float32{1, 2, 3}, 1, 3)}, `input "x": dimension 1: expected 2, got 3`},
		{map[string]*tensor.Tensor{"x": tensor.From([]float32{1, 2}, 2)}, `input "x": expected shape float32[n,2] (rank 2), got [2]`},
		{map[string]*tensor.Tensor{"x": tensor.From([]float32{1, 2}, 1, 2), "z": tensor.Scalar(float32(1))}, `unknown input "z"`},
		{map[string]*tensor.Tensor{"x": {DType: tensor.Float32, Shape: []int{1, 2}, Data: []float32{1}}}, `1 elements for shape [1 2]`},
	}
	for _, c := range cases {
		_, err := ex.Run(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, exec.ErrInput) {
			t.Errorf("got %v, want an ErrInput containing %q", err, c.want)
		}
	}
}

func TestUnsupportedAndPanickingKernels(t *testing.T) {
	g := addGraph()
	g.Nodes[0].OpType = "NoSuchOp"
	if _, err := exec.New(g, builtin.Registry()); err == nil || !strings.Contains(err.Error(), `NoSuchOp node "add": kernel: unsupported operator NoSuchOp`) {
		t.Fatalf("unsupported op: %v", err)
	}
	reg := kernel.NewRegistry("", kernel.Table{"Add": {Run: func(*kernel.Ctx, *ir.Node, []*tensor.Tensor) ([]*tensor.Tensor, error) {
		var s []int
		_ = s[3] // a kernel bug
		return nil, nil
	}}})
	ex, err := exec.New(addGraph(), reg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Run(map[string]*tensor.Tensor{"x": tensor.From([]float32{1, 2}, 1, 2)})
	if err == nil || !strings.Contains(err.Error(), `Add node "add": kernel panicked`) {
		t.Fatalf("panic not contained: %v", err)
	}
}

// TestConstInputTactics: a tactic that packs its weights once
// (kernel.RegisterConstInputs) is refused where the weights are not an
// initializer, and accepted where they are.
func TestConstInputTactics(t *testing.T) {
	f32 := func(dims ...int) ir.Type {
		d := make([]ir.Dim, len(dims))
		for i, v := range dims {
			d[i] = ir.Fixed(v)
		}
		return ir.Type{DType: tensor.Float32, Shape: d, RankKnown: true}
	}
	build := func(wInit bool) *ir.Graph {
		g := &ir.Graph{
			Name:         "g",
			Inputs:       []*ir.Value{{Name: "x", Type: f32(1, 2, 4, 4)}},
			Outputs:      []*ir.Value{{Name: "y", Type: f32()}},
			Initializers: map[string]*tensor.Tensor{},
			Nodes: []*ir.Node{{Name: "conv", OpType: "Conv", Version: 11, Inputs: []string{"x", "w"}, Outputs: []string{"y"},
				Attrs: map[string]*ir.Attr{kernel.TacticAttr: {Name: kernel.TacticAttr, Kind: ir.AttrString, S: "conv.direct"}}}},
		}
		w := tensor.New(tensor.Float32, 3, 2, 1, 1)
		if wInit {
			g.Initializers["w"] = w
		} else {
			g.Inputs = append(g.Inputs, &ir.Value{Name: "w", Type: f32(3, 2, 1, 1)})
		}
		return g
	}
	if _, err := exec.New(build(false), builtin.Registry()); err == nil || !strings.Contains(err.Error(), `tactic "conv.direct" needs input 1 ("w") to be an initializer`) {
		t.Fatalf("weights as a graph input: %v", err)
	}
	if _, err := exec.New(build(true), builtin.Registry()); err != nil {
		t.Fatalf("weights as an initializer: %v", err)
	}
}
