package fused_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// TestAttentionScoresStep: an Attention chain layer whose Div, Add (mask)
// and Softmax run as one scores step gives, on its prepared (fused) runs,
// the bits of its first run, which runs every node's Run in turn, and of
// the nodes run one by one on the portable twins; for masks of every
// broadcast form, both Add operand orders, odd row lengths and row counts
// (tails of the 8-row blocks and of the 8-lane vectors), NaN/Inf/±0
// scores, and Softmax opsets 11 and 13.
func TestAttentionScoresStep(t *testing.T) {
	t.Parallel()
	reg := builtin.Registry()
	att := fused.Ops(reg)["Attention"]
	r := rand.New(rand.NewPCG(21, 22))
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
	type tc struct {
		b, h, s, dh int
		mask        []int
	}
	var cases []tc
	for _, g := range [][4]int{{1, 2, 64, 64}, {2, 3, 13, 5}, {1, 1, 9, 17}, {2, 2, 7, 8}, {1, 4, 1, 3}} {
		b, h, s := g[0], g[1], g[2]
		for _, m := range [][]int{{s}, {1, 1, 1, s}, {b, 1, 1, s}, {b, 1, s, s}, {b, h, s, s}, {1, h, 1, s}, {s, s}} {
			cases = append(cases, tc{g[0], g[1], g[2], g[3], m})
		}
	}
	for ci, c := range cases {
		for _, addFirst := range []bool{true, false} {
			for _, smv := range []int64{11, 13} {
				special := ci%3 == 0
				q, k, v := gen(special, c.b, c.h, c.s, c.dh), gen(false, c.b, c.h, c.dh, c.s), gen(false, c.b, c.h, c.s, c.dh)
				mask, scale := gen(special, c.mask...), tensor.From([]float32{float32(math.Sqrt(float64(c.dh)))})
				addIn := []string{"t", "mask"}
				if !addFirst {
					addIn = []string{"mask", "t"}
				}
				smAttrs := map[string]*ir.Attr{}
				if smv == 11 {
					smAttrs["axis"] = &ir.Attr{Name: "axis", Kind: ir.AttrInt, I: 3}
				}
				nodes := []*ir.Node{
					{Name: "qk", OpType: "MatMul", Version: 13, Inputs: []string{"q", "k"}, Outputs: []string{"s"}, Attrs: map[string]*ir.Attr{}},
					{Name: "div", OpType: "Div", Version: 14, Inputs: []string{"s", "scale"}, Outputs: []string{"t"}, Attrs: map[string]*ir.Attr{}},
					{Name: "add", OpType: "Add", Version: 14, Inputs: addIn, Outputs: []string{"u"}, Attrs: map[string]*ir.Attr{}},
					{Name: "sm", OpType: "Softmax", Version: smv, Inputs: []string{"u"}, Outputs: []string{"p"}, Attrs: smAttrs},
					{Name: "pv", OpType: "MatMul", Version: 13, Inputs: []string{"p", "v"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}},
				}
				names := []string{"q", "k", "scale", "mask", "v"}
				ins := []*tensor.Tensor{q, k, scale, mask, v}
				body := &ir.Graph{Name: "att", Nodes: nodes, Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{},
					Outputs: []*ir.Value{{Name: "y"}}}
				for _, nm := range names {
					body.Inputs = append(body.Inputs, &ir.Value{Name: nm})
				}
				layer := &ir.Node{Name: "att", OpType: "Attention", Domain: fused.Domain, Version: 1, Inputs: names, Outputs: []string{"y"},
					Attrs: map[string]*ir.Attr{"body": {Name: "body", Kind: ir.AttrGraph, G: body}}}
				// The reference: the nodes one by one (Run), portable twins.
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
						t.Fatal(err)
					}
					vals[n.Outputs[0]] = outs[0]
				}
				want := vals["y"].Data.([]float32)
				for _, portable := range kernel.ISAs() {
					for call := 0; call < 3; call++ { // the first call prepares, the others run fused
						y := tensor.New(tensor.Float32, c.b, c.h, c.s, c.dh)
						if err := att.Into(&kernel.Ctx{ISA: portable}, layer, ins, []*tensor.Tensor{y}); err != nil {
							t.Fatal(err)
						}
						for i, g := range y.Data.([]float32) {
							if math.Float32bits(g) != math.Float32bits(want[i]) {
								t.Fatalf("%s: %#x at %d, want %#x", fmt.Sprintf("case %v addFirst %v softmax %d portable %v call %d", c, addFirst, smv, portable, call),
									math.Float32bits(g), i, math.Float32bits(want[i]))
							}
						}
					}
				}
			}
		}
	}
}
