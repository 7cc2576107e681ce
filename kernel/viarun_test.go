package kernel

import (
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func TestViaRun(t *testing.T) {
	n := &ir.Node{OpType: "Probe"}
	run := func(c *Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		return []*tensor.Tensor{
			{DType: tensor.Float32, Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}},
			{DType: tensor.Int32, Shape: []int{3}, Data: []int32{7, 8, 9}},
		}, nil
	}
	f := &tensor.Tensor{DType: tensor.Float32, Shape: []int{4}, Data: make([]float32, 4)}
	g := &tensor.Tensor{DType: tensor.Int32, Shape: []int{3}, Data: make([]int32, 3)}
	if err := ViaRun(run, nil, n, nil, []*tensor.Tensor{f, g}); err != nil {
		t.Fatal(err)
	}
	if d := f.Data.([]float32); d[0] != 1 || d[3] != 4 {
		t.Fatalf("float32 slot %v", d)
	}
	if d := g.Data.([]int32); d[0] != 7 || d[2] != 9 {
		t.Fatalf("int32 slot %v", d)
	}
	// A nil slot is skipped; a slot of the wrong size or type is refused by name.
	if err := ViaRun(run, nil, n, nil, []*tensor.Tensor{nil, g}); err != nil {
		t.Fatal(err)
	}
	bad := &tensor.Tensor{DType: tensor.Float32, Shape: []int{3}, Data: make([]float32, 3)}
	if err := ViaRun(run, nil, n, nil, []*tensor.Tensor{bad}); err == nil || !strings.Contains(err.Error(), "Probe: output 0") {
		t.Fatalf("short slot: %v", err)
	}
	three := []*tensor.Tensor{f, g, g}
	if err := ViaRun(run, nil, n, nil, three); err == nil || !strings.Contains(err.Error(), "no result for output 2") {
		t.Fatalf("missing result: %v", err)
	}
}
