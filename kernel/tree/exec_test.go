package tree_test

import (
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// TestExecStringLabels runs a classifier with string labels through the
// executor (its arena plans the String output).
func TestExecStringLabels(t *testing.T) {
	ints := func(v ...int64) *ir.Attr { return &ir.Attr{Kind: ir.AttrInts, Ints: v} }
	n := &ir.Node{Name: "c", OpType: "TreeEnsembleClassifier", Domain: "ai.onnx.ml", Version: 3,
		Inputs: []string{"X"}, Outputs: []string{"label", "probabilities"}, Attrs: map[string]*ir.Attr{
			"nodes_treeids": ints(0, 0, 0), "nodes_nodeids": ints(0, 1, 2), "nodes_featureids": ints(0, 0, 0),
			"nodes_modes":  {Kind: ir.AttrStrings, Strings: []string{"BRANCH_LEQ", "LEAF", "LEAF"}},
			"nodes_values": {Kind: ir.AttrFloats, Floats: []float32{1, 0, 0}}, "nodes_truenodeids": ints(1, 0, 0),
			"nodes_falsenodeids": ints(2, 0, 0), "class_treeids": ints(0, 0), "class_nodeids": ints(1, 2),
			"class_ids": ints(0, 1), "class_weights": {Kind: ir.AttrFloats, Floats: []float32{1, 1}},
			"classlabels_strings": {Kind: ir.AttrStrings, Strings: []string{"approve", "decline"}},
		}}
	batch := ir.Dim{Param: "N"}
	g := &ir.Graph{Name: "g", Nodes: []*ir.Node{n},
		Inputs: []*ir.Value{{Name: "X", Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{batch, ir.Fixed(1)}, RankKnown: true}}},
		Outputs: []*ir.Value{{Name: "label", Type: ir.Type{DType: tensor.String, Shape: []ir.Dim{batch}, RankKnown: true}},
			{Name: "probabilities", Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{batch, ir.Fixed(2)}, RankKnown: true}}},
		Types: map[string]ir.Type{}}
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Run(map[string]*tensor.Tensor{"X": tensor.From([]float32{0, 2, 1}, 3, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := out["label"].Data.([]string)
	if l[0] != "approve" || l[1] != "decline" || l[2] != "approve" {
		t.Errorf("labels %v", l)
	}
}
