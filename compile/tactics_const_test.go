package compile

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"

	_ "github.com/vouchml/vouch/kernel/nn" // registers conv.direct's constant weights
)

// TestConstCands: conv.direct is offered only where the weights are an
// initializer.
func TestConstCands(t *testing.T) {
	g := &ir.Graph{Initializers: map[string]*tensor.Tensor{"w": tensor.New(tensor.Float32, 1)}}
	cands := []string{"conv.direct", "conv.im2col-gemm"}
	n := &ir.Node{OpType: "Conv", Inputs: []string{"x", "w"}}
	if got := constCands(g, n, cands); !slices.Equal(got, cands) {
		t.Errorf("constant weights: %v", got)
	}
	n.Inputs[1] = "computed"
	if got := constCands(g, n, cands); !slices.Equal(got, []string{"conv.im2col-gemm"}) {
		t.Errorf("computed weights: %v", got)
	}
	if !slices.Equal(cands, []string{"conv.direct", "conv.im2col-gemm"}) {
		t.Errorf("constCands changed its argument: %v", cands)
	}
}
