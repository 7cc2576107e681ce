package bench

import (
	"reflect"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func bertLike() *ir.Graph {
	dyn := func(p string) ir.Dim { return ir.Dim{Value: -1, Param: p} }
	typ := ir.Type{DType: tensor.Int64, Shape: []ir.Dim{dyn("batch"), dyn("seq")}, RankKnown: true}
	return &ir.Graph{
		Inputs: []*ir.Value{
			{Name: "input_ids", Type: typ},
			{Name: "attention_mask", Type: typ},
			{Name: "token_type_ids", Type: typ},
			{Name: "image", Type: ir.Type{DType: tensor.Float32, Shape: []ir.Dim{{Value: 1}, {Value: 3}, dyn("h")}, RankKnown: true}},
		},
		Initializers: map[string]*tensor.Tensor{"emb": tensor.New(tensor.Float32, 30, 4)},
		Nodes:        []*ir.Node{{Name: "g", OpType: "Gather", Inputs: []string{"emb", "input_ids"}, Outputs: []string{"x"}}},
	}
}

func TestInputs(t *testing.T) {
	g := bertLike()
	feeds, err := Inputs(g, Shape{Batch: 1, Seq: 5}, 7)
	if err != nil {
		t.Fatal(err)
	}
	ids := feeds["input_ids"]
	if !reflect.DeepEqual(ids.Shape, []int{1, 5}) || ids.DType != tensor.Int64 {
		t.Fatalf("input_ids is %v", ids)
	}
	for _, v := range ids.Data.([]int64) {
		if v < 0 || v >= 30 {
			t.Errorf("id %d outside the embedding table's 30 rows", v)
		}
	}
	for _, v := range feeds["attention_mask"].Data.([]int64) {
		if v != 1 {
			t.Errorf("mask value %d, want 1", v)
		}
	}
	for _, v := range feeds["token_type_ids"].Data.([]int64) {
		if v != 0 {
			t.Errorf("token type %d, want 0", v)
		}
	}
	img := feeds["image"]
	if !reflect.DeepEqual(img.Shape, []int{1, 3, 5}) {
		t.Fatalf("image shape %v", img.Shape)
	}
	for _, v := range img.Data.([]float32) {
		if v < -1 || v >= 1 {
			t.Errorf("float %v outside [-1, 1)", v)
		}
	}

	again, err := Inputs(g, Shape{Batch: 1, Seq: 5}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(feeds, again) {
		t.Error("same seed gave different inputs")
	}
	other, _ := Inputs(g, Shape{Batch: 1, Seq: 5}, 8)
	if reflect.DeepEqual(feeds["image"], other["image"]) {
		t.Error("another seed gave the same floats")
	}
}

func TestInputsBatch(t *testing.T) {
	g := bertLike()
	if _, err := Inputs(g, Shape{Batch: 8}, 1); err == nil {
		t.Fatal("batch 8 on a fixed batch-1 input: want an error")
	}
	RelaxBatch(g)
	feeds, err := Inputs(g, Shape{Batch: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := feeds["image"].Shape; !reflect.DeepEqual(got, []int{8, 3, 64}) {
		t.Errorf("image shape %v, want [8 3 64] (default seq 64)", got)
	}
	if got := feeds["input_ids"].Shape; !reflect.DeepEqual(got, []int{8, 64}) {
		t.Errorf("input_ids shape %v", got)
	}
}
