package fused_test

import (
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// TestFusedEpilogue: a Fused Conv (+ Add) + Relu / Clip layer, whose Add
// and activation Conv's Into applies in its tile stores (the epilogue),
// gives the bits of its nodes run one by one, on the vector kernels and
// on the portable twins, for shapes with edge tiles, depthwise and
// grouped convolutions, and allocates nothing on the vector kernels.
func TestFusedEpilogue(t *testing.T) {
	reg := builtin.Registry()
	r := rand.New(rand.NewPCG(9, 10))
	scalar := func(v float32) *tensor.Tensor { return tensor.From([]float32{v}) }
	type act struct {
		op      string
		version int64
		attrs   map[string]*ir.Attr
		in      []*tensor.Tensor // Clip's bounds (nil: absent)
	}
	acts := []act{
		{"", 0, nil, nil},
		{"Relu", 14, nil, nil},
		{"Clip", 6, map[string]*ir.Attr{"min": {Name: "min", Kind: ir.AttrFloat, F: 0}, "max": {Name: "max", Kind: ir.AttrFloat, F: 6}}, nil},
		{"Clip", 13, nil, []*tensor.Tensor{scalar(0), scalar(6)}},
		{"Clip", 13, nil, []*tensor.Tensor{nil, scalar(0.5)}},
		{"Clip", 13, nil, []*tensor.Tensor{scalar(-0.25)}},
	}
	convs := []struct {
		x, w  []int
		group int64
		pads  []int64
	}{
		{[]int{1, 5, 11, 13}, []int{7, 5, 3, 3}, 1, []int64{1, 1, 1, 1}},
		{[]int{1, 16, 7, 7}, []int{24, 16, 1, 1}, 1, []int64{0, 0, 0, 0}},
		{[]int{1, 6, 9, 21}, []int{6, 1, 3, 3}, 6, []int64{1, 1, 1, 1}},
		{[]int{2, 8, 10, 10}, []int{12, 4, 3, 3}, 2, []int64{1, 1, 1, 1}},
	}
	for _, portable := range kernel.ISAs() {
		for ci, cv := range convs {
			for ai, a := range acts {
				for _, add := range []bool{false, true} {
					if a.op == "" && !add {
						continue
					}
					b := &ir.Node{Name: "b", OpType: "Conv", Version: 11, Inputs: []string{"x", "w", "bias"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{
						"pads":  {Name: "pads", Kind: ir.AttrInts, Ints: cv.pads},
						"group": {Name: "group", Kind: ir.AttrInt, I: cv.group},
					}}
					nodes := []*ir.Node{b}
					vals := map[string]*tensor.Tensor{"x": randomTensor(r, cv.x...), "w": randomTensor(r, cv.w...), "bias": randomTensor(r, cv.w[0])}
					fin := []string{"x", "w", "bias"}
					layout := []int64{3, 0, 0}
					v := "y"
					ys := []int{cv.x[0], cv.w[0], cv.x[2], cv.x[3]}
					if add {
						vals["r"] = randomTensor(r, ys...)
						nodes = append(nodes, &ir.Node{Name: "a", OpType: "Add", Version: 14, Inputs: []string{v, "r"}, Outputs: []string{"z"}, Attrs: map[string]*ir.Attr{}})
						v = "z"
						fin = append(fin, "r")
						layout[1] = 1
					}
					f := &ir.Node{Name: "f", OpType: "Fused", Domain: fused.Domain, Version: 1, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{
						"base":         {Name: "base", Kind: ir.AttrString, S: "Conv"},
						"base_version": {Name: "base_version", Kind: ir.AttrInt, I: 11},
					}}
					for k, at := range b.Attrs {
						f.Attrs[k] = at
					}
					if a.op != "" {
						an := &ir.Node{Name: "act", OpType: a.op, Version: a.version, Inputs: []string{v}, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{}}
						for k, at := range a.attrs {
							an.Attrs[k] = at
							c := *at
							c.Name = "act_" + k
							f.Attrs[c.Name] = &c
						}
						for i, bt := range a.in {
							name := ""
							if bt != nil {
								name = []string{"lo", "hi"}[i]
								vals[name] = bt
							}
							an.Inputs = append(an.Inputs, name)
							fin = append(fin, name)
							layout[2]++
						}
						nodes = append(nodes, an)
						f.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: a.op}
						f.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: a.version}
					} else {
						nodes[len(nodes)-1].Outputs[0] = "out"
					}
					f.Inputs = fin
					f.Attrs["layout"] = &ir.Attr{Name: "layout", Kind: ir.AttrInts, Ints: layout}
					for _, n := range nodes {
						op, err := reg.Lookup(n)
						if err != nil {
							t.Fatal(err)
						}
						args := make([]*tensor.Tensor, len(n.Inputs))
						for j, name := range n.Inputs {
							args[j] = vals[name]
						}
						outs, err := op.Run(&kernel.Ctx{ISA: portable}, n, args)
						if err != nil {
							t.Fatal(err)
						}
						vals[n.Outputs[0]] = outs[0]
					}
					want := vals["out"]
					in := make([]*tensor.Tensor, len(fin))
					for i, name := range fin {
						in[i] = vals[name]
					}
					op, err := reg.Lookup(f)
					if err != nil {
						t.Fatal(err)
					}
					out := []*tensor.Tensor{tensor.New(tensor.Float32, want.Shape...)}
					c := &kernel.Ctx{ISA: portable, State: new(kernel.State)}
					if err := op.Into(c, f, in, out); err != nil {
						t.Fatal(err)
					}
					if err := sameBits(out[0], want); err != nil {
						t.Fatalf("%v, conv %d, act %d, add %v: Into: %v", portable, ci, ai, add, err)
					}
					if c.Epilogue.Active() || c.Epilogue.Applied {
						t.Fatalf("Ctx.Epilogue left set: %+v", c.Epilogue)
					}
					for range 5 { // warm-up, on every worker
						_ = op.Into(c, f, in, out)
					}
					if allocs := testing.AllocsPerRun(5, func() { _ = op.Into(c, f, in, out) }); allocs != 0 && portable != kernel.ISAPortable && !raceEnabled {
						t.Errorf("conv %d act %d: Into allocates %v times per call", ci, ai, allocs)
					}
				}
			}
		}
	}
}
