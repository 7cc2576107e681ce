package fused_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// TestConvChainBatch: a ConvChain layer bound at batch 3 (the blocked
// kernels image by image where the CPU has AVX-512) gives the bits of
// its convolutions as plain nodes, through bound execution, on the vector
// kernels and on the portable twins, and the same bits for an image run
// alone.
func TestConvChainBatch(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(41, 42))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	inits := map[string]*tensor.Tensor{
		"w1": tensor.From(rnd(32*16*9), 32, 16, 3, 3), "b1": tensor.From(rnd(32), 32),
		"w2": tensor.From(rnd(32*32*9), 32, 32, 3, 3),
		"w3": tensor.From(rnd(16*32), 16, 32, 1, 1), "b3": tensor.From(rnd(16), 16),
	}
	conv := func(name, x, w, b, y string, k, s, p int64) *ir.Node {
		in := []string{x, w}
		if b != "" {
			in = append(in, b)
		}
		return &ir.Node{Name: name, OpType: "Conv", Version: 13, Inputs: in, Outputs: []string{y}, Attrs: map[string]*ir.Attr{
			"kernel_shape": {Name: "kernel_shape", Kind: ir.AttrInts, Ints: []int64{k, k}},
			"strides":      {Name: "strides", Kind: ir.AttrInts, Ints: []int64{s, s}},
			"pads":         {Name: "pads", Kind: ir.AttrInts, Ints: []int64{p, p, p, p}},
		}}
	}
	nodes := func() []*ir.Node {
		return []*ir.Node{conv("c1", "x", "w1", "b1", "t1", 3, 1, 1), conv("c2", "t1", "w2", "", "t2", 3, 2, 1), conv("c3", "t2", "w3", "b3", "y", 1, 1, 0)}
	}
	xType := ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Param: "n"}, {Value: 16}, {Value: 11}, {Value: 13}}}
	yType := ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Param: "n"}, {Value: 16}, {Value: 6}, {Value: 7}}}
	plain := &ir.Graph{Name: "plain", Nodes: nodes(), Initializers: inits, Types: map[string]ir.Type{},
		Inputs: []*ir.Value{{Name: "x", Type: xType}}, Outputs: []*ir.Value{{Name: "y", Type: yType}}}
	body := &ir.Graph{Name: "body", Nodes: nodes(), Initializers: inits, Types: map[string]ir.Type{},
		Inputs: []*ir.Value{{Name: "x", Type: xType}}, Outputs: []*ir.Value{{Name: "y", Type: yType}}}
	for _, n := range body.Nodes {
		n.Attrs[kernel.TacticAttr] = &ir.Attr{Name: kernel.TacticAttr, Kind: ir.AttrString, S: nn.TacticDirect}
	}
	chained := &ir.Graph{Name: "chained", Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{},
		Nodes: []*ir.Node{{Name: "chain", OpType: fused.ConvChain, Domain: fused.Domain, Version: 1, Inputs: []string{"x"}, Outputs: []string{"y"},
			Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}},
		Inputs: []*ir.Value{{Name: "x", Type: xType}}, Outputs: []*ir.Value{{Name: "y", Type: yType}}}
	var level kernel.ISA
	run := func(g *ir.Graph, x []float32, n int) []float32 {
		t.Helper()
		e, err := exec.New(g, builtin.Registry())
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SetCPU(exec.CPU{ISA: level}); err != nil {
			t.Fatal(err)
		}
		b, err := e.Bind([][]int{{n, 16, 11, 13}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.Execute([]*tensor.Tensor{tensor.From(x, n, 16, 11, 13)})
		if err != nil {
			t.Fatal(err)
		}
		return out[0].Data.([]float32)
	}
	x := rnd(3 * 16 * 11 * 13)
	for _, portable := range kernel.ISAs() {
		level = portable
		want := run(plain, x, 3)
		got := run(chained, x, 3)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: batch of 3: y[%d] = %g, plain nodes %g", portable, i, got[i], want[i])
			}
		}
		per := len(want) / 3
		one := run(chained, x[16*11*13:2*16*11*13], 1)
		for i := range one {
			if math.Float32bits(one[i]) != math.Float32bits(want[per+i]) {
				t.Fatalf("%v: image 1 alone: y[%d] = %g, in the batch %g", portable, i, one[i], want[per+i])
			}
		}
	}
}
