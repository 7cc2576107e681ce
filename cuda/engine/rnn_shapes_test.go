package engine

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/rnn"
	"github.com/vouchml/vouch/tensor"
)

// The GPU layer's outputs have the CPU kernel's shapes, for every
// operator, direction and layout.
func TestRNNShapes(t *testing.T) {
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		for _, dir := range []string{"forward", "bidirectional"} {
			for layout := 0; layout < 2; layout++ {
				n := &ir.Node{OpType: op, Version: 14, Attrs: map[string]*ir.Attr{
					"direction": {Name: "direction", Kind: ir.AttrString, S: dir},
					"layout":    {Name: "layout", Kind: ir.AttrInt, I: int64(layout)},
				}}
				dirs := map[string]int{"forward": 1, "bidirectional": 2}[dir]
				G := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[op] * 5
				xs := []int{3, 2, 4}
				if layout == 1 {
					xs = []int{2, 3, 4}
				}
				in := []*tensor.Tensor{tensor.New(tensor.Float32, xs...), tensor.New(tensor.Float32, dirs, G, 4), tensor.New(tensor.Float32, dirs, G, 5)}
				out, err := rnn.Ops()[op].Run(&kernel.Ctx{}, n, in)
				if err != nil {
					t.Fatal(err)
				}
				geo, _, err := rnn.Setup(n, []*tensor.Tensor{{DType: tensor.Float32, Shape: xs}, {DType: tensor.Float32, Shape: in[1].Shape}, {DType: tensor.Float32, Shape: in[2].Shape}})
				if err != nil {
					t.Fatal(err)
				}
				g, err := exact.RNNGeomOf(geo)
				if err != nil {
					t.Fatal(err)
				}
				y, st := rnnShapes(g)
				if !slices.Equal(y, out[0].Shape) || !slices.Equal(st, out[1].Shape) || g.YLen() != out[0].Len() || g.StateLen() != out[1].Len() {
					t.Errorf("%s %s layout %d: GPU shapes %v %v, CPU %v %v", op, dir, layout, y, st, out[0].Shape, out[1].Shape)
				}
			}
		}
	}
}
