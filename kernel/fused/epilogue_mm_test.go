package fused_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestFusedMatMulEpilogue: a Fused MatMul + Add + activation layer, whose
// Add (a column bias [N] / [1, N], or a residual) MatMul's Into applies in
// its tile stores and whose activation is a clamp there or its own pass
// (Gelu), gives the bits of its nodes run one by one on the portable
// twins, on the vector kernels and on the twins, with 1, 2 and 8 workers,
// for shapes with edge tiles, fewer rows than a tile, batches, several
// column blocks and row groups, and NaN/Inf operands; and allocates
// nothing on the vector kernels. A Gelu goes into MatMul's epilogue as
// kernel.Epilogue.Act; the reference runs it as its own node.
func TestFusedMatMulEpilogue(t *testing.T) {
	reg := builtin.Registry()
	r := rand.New(rand.NewPCG(11, 12))
	scalar := func(v float32) *tensor.Tensor { return tensor.From([]float32{v}) }
	type act struct {
		op      string
		version int64
		attrs   map[string]*ir.Attr
		in      []*tensor.Tensor
	}
	acts := []act{
		{"", 0, nil, nil},
		{"Relu", 14, nil, nil},
		{"Clip", 13, nil, []*tensor.Tensor{scalar(-0.5), scalar(6)}},
		{"Gelu", 20, nil, nil},
		{"Gelu", 20, map[string]*ir.Attr{"approximate": {Name: "approximate", Kind: ir.AttrString, S: "tanh"}}, nil},
	}
	// clean shapes take finite operands (a long chain of random specials
	// is NaN nearly everywhere): several column blocks and row groups, so
	// that an activation in the epilogue (Gelu) runs on finished blocks
	// of real values, edges included.
	shapes := []struct {
		a, b  []int
		clean bool
	}{
		{[]int{64, 32}, []int{32, 128}, false},
		{[]int{1, 13, 7}, []int{7, 37}, false},
		{[]int{3, 5}, []int{5, 21}, false},
		{[]int{2, 9, 24}, []int{2, 24, 16}, false},
		{[]int{17, 300}, []int{300, 40}, false},
		{[]int{1, 64, 128}, []int{128, 512}, true},
		{[]int{101, 40}, []int{40, 600}, true},
	}
	clean := func(shape ...int) *tensor.Tensor {
		t := tensor.New(tensor.Float32, shape...)
		for i, d := 0, t.Data.([]float32); i < len(d); i++ {
			d[i] = float32(r.NormFloat64() * 0.3)
		}
		return t
	}
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	for si, sh := range shapes {
		n := sh.b[len(sh.b)-1]
		ys := append(append([]int{}, sh.a[:len(sh.a)-1]...), n)
		if len(sh.b) > len(sh.a) {
			ys = append(append([]int{}, sh.b[:len(sh.b)-2]...), ys...)
		}
		for ai, a := range acts {
			for ak, addShape := range [][]int{nil, {n}, {1, n}, ys} {
				if a.op == "" && addShape == nil {
					continue
				}
				name := fmt.Sprintf("shape %d act %d add %d", si, ai, ak)
				b := &ir.Node{Name: "b", OpType: "MatMul", Version: 13, Inputs: []string{"x", "w"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}
				nodes := []*ir.Node{b}
				vals := map[string]*tensor.Tensor{"x": randomTensor(r, sh.a...), "w": randomTensor(r, sh.b...)}
				if sh.clean {
					vals["x"], vals["w"] = clean(sh.a...), clean(sh.b...)
				}
				fin := []string{"x", "w"}
				layout := []int64{2, 0, 0}
				v := "y"
				if addShape != nil {
					vals["r"] = randomTensor(r, addShape...)
					nodes = append(nodes, &ir.Node{Name: "a", OpType: "Add", Version: 14, Inputs: []string{v, "r"}, Outputs: []string{"z"}, Attrs: map[string]*ir.Attr{}})
					v = "z"
					fin = append(fin, "r")
					layout[1] = 1
				}
				f := &ir.Node{Name: "f", OpType: "Fused", Domain: fused.Domain, Version: 1, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{
					"base":         {Name: "base", Kind: ir.AttrString, S: "MatMul"},
					"base_version": {Name: "base_version", Kind: ir.AttrInt, I: 13},
				}}
				if a.op != "" {
					an := &ir.Node{Name: "act", OpType: a.op, Version: a.version, Inputs: []string{v}, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{}}
					for k, at := range a.attrs {
						an.Attrs[k] = at
						c := *at
						c.Name = "act_" + k
						f.Attrs[c.Name] = &c
					}
					for i, bt := range a.in {
						nm := []string{"lo", "hi"}[i]
						vals[nm] = bt
						an.Inputs = append(an.Inputs, nm)
						fin = append(fin, nm)
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
				// The reference: the nodes one by one, on the portable twins.
				for _, nd := range nodes {
					op, err := reg.Lookup(nd)
					if err != nil {
						t.Fatal(err)
					}
					args := make([]*tensor.Tensor, len(nd.Inputs))
					for j, nm := range nd.Inputs {
						args[j] = vals[nm]
					}
					outs, err := op.Run(&kernel.Ctx{ISA: kernel.ISAPortable}, nd, args)
					if err != nil {
						t.Fatal(err)
					}
					vals[nd.Outputs[0]] = outs[0]
				}
				want := vals["out"]
				in := make([]*tensor.Tensor, len(fin))
				for i, nm := range fin {
					in[i] = vals[nm]
				}
				op, err := reg.Lookup(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, portable := range kernel.ISAs() {
					for _, p := range pools {
						out := []*tensor.Tensor{tensor.New(tensor.Float32, want.Shape...)}
						c := &kernel.Ctx{Pool: p, ISA: portable, State: new(kernel.State)}
						if err := op.Into(c, f, in, out); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if err := sameBits(out[0], want); err != nil {
							t.Fatalf("%s, %v, %d workers: Into: %v", name, portable, p.Workers(), err)
						}
						if c.Epilogue.Active() || c.Epilogue.Applied {
							t.Fatalf("Ctx.Epilogue left set: %+v", c.Epilogue)
						}
						res, err := op.Run(c, f, in)
						if err != nil {
							t.Fatal(err)
						}
						if err := sameBits(res[0], want); err != nil {
							t.Fatalf("%s, %v: Run: %v", name, portable, err)
						}
						if portable != kernel.ISAPortable && p.Workers() == 1 {
							for range 3 {
								_ = op.Into(c, f, in, out)
							}
							if allocs := testing.AllocsPerRun(5, func() { _ = op.Into(c, f, in, out) }); allocs != 0 && !raceEnabled {
								t.Errorf("%s: Into allocates %v times per call", name, allocs)
							}
						}
					}
				}
			}
		}
	}
	for _, p := range pools {
		p.Close()
	}
}
