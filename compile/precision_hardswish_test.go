package compile

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/tensor"
)

// q8HardSwishGraph is x → Q8 (3×3 conv, 16 channels) → HardSigmoid → Mul
// (the Mul's operands in order first), and a second reader of the Q8
// output when shared.
func q8HardSwishGraph(first, shared bool) *ir.Graph {
	r := rand.New(rand.NewPCG(4, 5))
	w := make([]int8, 16*8*9)
	for i := range w {
		w[i] = int8(r.IntN(255) - 127)
	}
	ws, b := make([]float32, 16), make([]float32, 16)
	for i := range ws {
		ws[i], b[i] = float32(0.001+r.Float64()*0.01), float32(r.NormFloat64())
	}
	q := &ir.Node{Name: "q", OpType: fused.OpQ8, Domain: fused.Domain, Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"},
		Attrs: map[string]*ir.Attr{
			fused.AttrBase:   {Name: fused.AttrBase, Kind: ir.AttrString, S: "Conv"},
			fused.AttrLayout: {Name: fused.AttrLayout, Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
			"x_scale":        {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
			"pads":           {Name: "pads", Kind: ir.AttrInts, Ints: []int64{1, 1, 1, 1}},
		}}
	h := &ir.Node{Name: "h", OpType: "HardSigmoid", Version: 6, Inputs: []string{"y"}, Outputs: []string{"hs"},
		Attrs: map[string]*ir.Attr{"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: 1.0 / 6}}}
	mulIn := []string{"y", "hs"}
	if first {
		mulIn = []string{"hs", "y"}
	}
	m := &ir.Node{Name: "m", OpType: "Mul", Version: 14, Inputs: mulIn, Outputs: []string{"z"}, Attrs: map[string]*ir.Attr{}}
	g := &ir.Graph{Name: "hs", Inputs: []*ir.Value{{Name: "x"}}, Outputs: []*ir.Value{{Name: "z"}}, Nodes: []*ir.Node{q, h, m},
		Initializers: map[string]*tensor.Tensor{"w": tensor.From(w, 16, 8, 3, 3), "s": tensor.From(ws, 16), "b": tensor.From(b, 16)},
		Types:        map[string]ir.Type{}}
	if shared {
		g.Nodes = append(g.Nodes, &ir.Node{Name: "n", OpType: "Neg", Version: 13, Inputs: []string{"y"}, Outputs: []string{"v"}, Attrs: map[string]*ir.Attr{}})
		g.Outputs = append(g.Outputs, &ir.Value{Name: "v"})
	}
	return g
}

// TestFuseQ8HardSwish: the HardSigmoid and Mul after an int8 layer fold
// into its activation (both operand orders) with the same output bits; a
// Q8 output read elsewhere too stays unfolded.
func TestFuseQ8HardSwish(t *testing.T) {
	x := make([]float32, 8*12*12)
	r := rand.New(rand.NewPCG(6, 7))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	in := map[string]*tensor.Tensor{"x": tensor.From(x, 1, 8, 12, 12)}
	run := func(g *ir.Graph) []float32 {
		t.Helper()
		e, err := exec.New(g, builtin.Registry())
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		return out["z"].Data.([]float32)
	}
	for _, first := range []bool{false, true} {
		want := run(q8HardSwishGraph(first, false))
		g := q8HardSwishGraph(first, false)
		if n := fuseQ8HardSwish(g, buildlog.New(nil)); n != 1 || len(g.Nodes) != 1 {
			t.Fatalf("first %v: folded %d, %d nodes left", first, n, len(g.Nodes))
		}
		q := g.Nodes[0]
		if q.String(fused.AttrActivation, "") != q8.ActHardSwish || q.Outputs[0] != "z" || (q.Int(fused.AttrSigmoidFirst, 0) == 1) != first {
			t.Fatalf("first %v: folded layer %v", first, q.Attrs)
		}
		got := run(g)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("first %v: z[%d] = %v, unfolded %v", first, i, got[i], want[i])
			}
		}
	}
	g := q8HardSwishGraph(false, true)
	if n := fuseQ8HardSwish(g, buildlog.New(nil)); n != 0 || len(g.Nodes) != 4 {
		t.Fatalf("a shared Q8 output: folded %d, %d nodes", n, len(g.Nodes))
	}
}
