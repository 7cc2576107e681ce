package ir

import (
	"errors"
	"strings"
	"testing"

	"github.com/vouchml/vouch/tensor"
)

// passInfer gives every output its first input's type, or fails for "Bad".
type passInfer struct{}

func (passInfer) InferNode(n *Node, in []InferInput) ([]Type, error) {
	if n.OpType == "Bad" {
		return nil, errors.New("rank 3 expected")
	}
	return []Type{in[0].Type}, nil
}

func TestInfer(t *testing.T) {
	g := &Graph{
		Name:   "g",
		Inputs: []*Value{{Name: "x", Type: Type{DType: tensor.Float32, Shape: []Dim{{Value: -1, Param: "batch"}, Fixed(3)}, RankKnown: true}}},
		Nodes: []*Node{
			{OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}},
			{OpType: "Relu", Inputs: []string{"y"}, Outputs: []string{"z"}},
		},
		Outputs:      []*Value{{Name: "z", Type: Type{DType: tensor.Float32}}},
		Initializers: map[string]*tensor.Tensor{},
	}
	if err := Verify(g, nil); err != nil {
		t.Fatal(err)
	}
	if err := Infer(g, passInfer{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := g.Types["z"].String(); got != "float32[batch,3]" {
		t.Fatalf("z: %s", got)
	}
	g.Outputs[0].Type = Type{DType: tensor.Int64}
	if err := Infer(g, passInfer{}, nil); err == nil || !strings.Contains(err.Error(), `output "z" declared int64[*], inferred float32[batch,3]`) {
		t.Fatalf("declared/inferred mismatch not reported: %v", err)
	}
	g.Outputs[0].Type = Type{}
	g.Nodes[1].OpType = "Bad"
	g.Nodes[1].Name = "n2"
	if err := Infer(g, passInfer{}, nil); err == nil || !strings.Contains(err.Error(), `Bad node "n2": rank 3 expected`) {
		t.Fatalf("error does not name the node: %v", err)
	}
}

func TestFreeVarsAndSubgraphs(t *testing.T) {
	body := &Graph{
		Name:    "body",
		Nodes:   []*Node{{OpType: "Add", Inputs: []string{"outer", "local"}, Outputs: []string{"r"}}},
		Inputs:  []*Value{{Name: "local"}},
		Outputs: []*Value{{Name: "r"}},
	}
	if fv := FreeVars(body); len(fv) != 1 || fv[0] != "outer" {
		t.Fatalf("free vars %v", fv)
	}
	g := &Graph{
		Name:   "main",
		Inputs: []*Value{{Name: "c"}},
		Nodes: []*Node{
			{OpType: "If", Inputs: []string{"c"}, Outputs: []string{"o"}, Attrs: map[string]*Attr{"then_branch": {Name: "then_branch", Kind: AttrGraph, G: body}}},
			{OpType: "Relu", Inputs: []string{"c"}, Outputs: []string{"outer"}},
		},
		Outputs: []*Value{{Name: "o"}},
	}
	if err := Verify(g, nil); err != nil {
		t.Fatal(err)
	}
	if g.Nodes[0].OpType != "Relu" {
		t.Fatal("the producer of a subgraph's outer reference must run first")
	}
	body.Nodes[0].Inputs[0] = "nowhere"
	if err := Verify(g, nil); err == nil || !strings.Contains(err.Error(), `input "nowhere" is not defined`) {
		t.Fatalf("undefined outer reference: %v", err)
	}
}
