package fused_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// TestAttentionScoresMasks: an Attention chain layer whose scores take
// several additive masks, with Reshapes between them (Swin's shifted
// windows: a relative-position bias, then a window mask added in a view of
// five dimensions), with or without a Div, masks of every broadcast form
// (the last axis whole or 1), both Add operand orders, runs them as one
// scores step on its prepared runs (the step list shows it) and gives the
// bits of the nodes run one by one on the portable twins, at every level.
func TestAttentionScoresMasks(t *testing.T) {
	t.Parallel()
	reg := builtin.Registry()
	att := fused.Ops(reg)["Attention"]
	r := rand.New(rand.NewPCG(31, 32))
	sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 3e38, -1e4}
	gen := func(special bool, shape ...int) *tensor.Tensor {
		x := tensor.New(tensor.Float32, shape...)
		d := x.Data.([]float32)
		for i := range d {
			d[i] = float32(r.NormFloat64() * 3)
			if special && r.IntN(30) == 0 {
				d[i] = sp[r.IntN(len(sp))]
			}
		}
		return x
	}
	i64 := func(v ...int) *tensor.Tensor {
		d := make([]int64, len(v))
		for i, x := range v {
			d[i] = int64(x)
		}
		return tensor.From(d, len(v))
	}
	type tc struct {
		nb, nw, h, s, dh int   // batches of windows, windows, heads, tokens, head size
		bias, mask       []int // the two masks' shapes (bias on the 4-D scores, mask on the 5-D view)
		div, swap        bool
	}
	var cases []tc
	for gi, g := range [][5]int{{1, 4, 3, 49, 32}, {2, 2, 2, 9, 5}, {1, 3, 1, 7, 8}, {2, 1, 2, 17, 3}} {
		nb, nw, h, s := g[0], g[1], g[2], g[3]
		for mi, m := range [][2][]int{
			{{1, h, s, s}, {1, nw, 1, s, s}}, // Swin's
			{{h, s, s}, {nw, 1, s, s}},
			{{nb * nw, 1, 1, s}, {nb, nw, h, s, 1}}, // a padding mask; one value a row
			{{s}, {1}},
			{{nb * nw, h, s, s}, {nb, nw, h, s, s}},
			{{1, 1, s, 1}, {s, s}},
		} {
			cases = append(cases, tc{g[0], g[1], g[2], g[3], g[4], m[0], m[1], (gi+mi)%2 == 0, mi%3 == 1})
		}
	}
	for ci, c := range cases {
		special := ci%3 == 0
		b := c.nb * c.nw
		q, k, v := gen(special, b, c.h, c.s, c.dh), gen(false, b, c.h, c.dh, c.s), gen(false, b, c.h, c.s, c.dh)
		bias, mask := gen(special, c.bias...), gen(special, c.mask...)
		scale := tensor.From([]float32{float32(math.Sqrt(float64(c.dh)))})
		a1, a2 := []string{"t", "bias"}, []string{"v5", "mask"}
		if c.swap {
			a1, a2 = []string{"bias", "t"}, []string{"mask", "v5"}
		}
		nodes := []*ir.Node{{Name: "qk", OpType: "MatMul", Version: 13, Inputs: []string{"q", "k"}, Outputs: []string{"s"}}}
		if c.div {
			nodes = append(nodes, &ir.Node{Name: "div", OpType: "Div", Version: 14, Inputs: []string{"s", "scale"}, Outputs: []string{"t"}})
		} else {
			a1 = slices.Clone(a1)
			a1[slices.Index(a1, "t")] = "s"
		}
		nodes = append(nodes,
			&ir.Node{Name: "add1", OpType: "Add", Version: 14, Inputs: a1, Outputs: []string{"u"}},
			&ir.Node{Name: "r5", OpType: "Reshape", Version: 14, Inputs: []string{"u", "shape5"}, Outputs: []string{"v5"}},
			&ir.Node{Name: "add2", OpType: "Add", Version: 14, Inputs: a2, Outputs: []string{"w5"}},
			&ir.Node{Name: "r4", OpType: "Reshape", Version: 14, Inputs: []string{"w5", "shape4"}, Outputs: []string{"w"}},
			&ir.Node{Name: "sm", OpType: "Softmax", Version: 13, Inputs: []string{"w"}, Outputs: []string{"p"}},
			&ir.Node{Name: "pv", OpType: "MatMul", Version: 13, Inputs: []string{"p", "v"}, Outputs: []string{"y"}})
		for _, n := range nodes {
			n.Attrs = map[string]*ir.Attr{}
		}
		names := []string{"q", "k", "scale", "bias", "mask", "shape5", "shape4", "v"}
		ins := []*tensor.Tensor{q, k, scale, bias, mask, i64(c.nb, c.nw, c.h, c.s, c.s), i64(-1, c.h, c.s, c.s), v}
		if !c.div {
			names = slices.Delete(names, 2, 3)
			ins = slices.Delete(ins, 2, 3)
		}
		body := &ir.Graph{Name: "att", Nodes: nodes, Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{},
			Outputs: []*ir.Value{{Name: "y"}}}
		for _, nm := range names {
			body.Inputs = append(body.Inputs, &ir.Value{Name: nm})
		}
		layer := &ir.Node{Name: "att", OpType: "Attention", Domain: fused.Domain, Version: 1, Inputs: names, Outputs: []string{"y"},
			Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
		vals := map[string]*tensor.Tensor{}
		for i, nm := range names {
			vals[nm] = ins[i]
		}
		for _, n := range nodes {
			op, err := reg.Lookup(n)
			if err != nil {
				t.Fatal(err)
			}
			args := make([]*tensor.Tensor, len(n.Inputs))
			for i, nm := range n.Inputs {
				args[i] = vals[nm]
			}
			outs, err := op.Run(&kernel.Ctx{ISA: kernel.ISAPortable}, n, args)
			if err != nil {
				t.Fatalf("case %v: %s: %v", c, n.Name, err)
			}
			vals[n.Outputs[0]] = outs[0]
		}
		want := vals["y"].Data.([]float32)
		for _, level := range kernel.ISAs() {
			ctx := &kernel.Ctx{ISA: level, State: new(kernel.State)}
			for call := 0; call < 3; call++ { // the first call prepares, the others run fused
				y := tensor.New(tensor.Float32, b, c.h, c.s, c.dh)
				if err := att.Into(ctx, layer, ins, []*tensor.Tensor{y}); err != nil {
					t.Fatal(err)
				}
				for i, g := range y.Data.([]float32) {
					if math.Float32bits(g) != math.Float32bits(want[i]) {
						t.Fatalf("%s: %#x at %d, want %#x", fmt.Sprintf("case %v level %v call %d", c, level, call),
							math.Float32bits(g), i, math.Float32bits(want[i]))
					}
				}
			}
			if steps := fused.ChainSteps(ctx, layer); !slices.Equal(steps, []string{"MatMul", "scores", "MatMul"}) {
				t.Fatalf("case %v: steps %v, want the scores fused", c, steps)
			}
		}
	}
}
