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

// TestFusedMatMulTwoAdds: a Fused MatMul with two Adds (layout [2, 2, k]:
// a bias, then a residual, y = (x·W + b) + r, then an optional
// activation), whose Adds MatMul's Into applies as ColBias and Residual2,
// gives the bits of its nodes run one by one on the portable twins: on
// the vector kernels and on the twins, with 1, 2 and 8 workers, Into and
// Run, for shapes with a last row panel of fewer than 6 rows, several row
// groups, k in one block and in several, batches folded into rows and
// batched B (where Residual2 does not apply and the Add runs as its own
// pass), a residual that broadcasts (its own pass too), and NaN/Inf
// operands. Into allocates nothing on the vector kernels.
func TestFusedMatMulTwoAdds(t *testing.T) {
	reg := builtin.Registry()
	r := rand.New(rand.NewPCG(21, 22))
	shapes := []struct{ a, b []int }{
		{[]int{1, 64, 128}, []int{128, 128}},
		{[]int{64, 512}, []int{512, 128}},
		{[]int{1, 13, 7}, []int{7, 37}},
		{[]int{101, 40}, []int{40, 600}},
		{[]int{2, 9, 24}, []int{24, 16}},
		{[]int{2, 9, 24}, []int{2, 24, 16}},
		{[]int{4, 5}, []int{5, 21}},
	}
	acts := []string{"", "Relu", "Gelu"}
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for si, sh := range shapes {
		n := sh.b[len(sh.b)-1]
		ys := append(append([]int{}, sh.a[:len(sh.a)-1]...), n)
		if len(sh.b) > len(sh.a) || len(sh.b) == len(sh.a) && len(sh.b) > 2 {
			ys = append(append([]int{}, sh.b[:len(sh.b)-2]...), sh.a[len(sh.a)-2], n)
		}
		for ai, act := range acts {
			for ri, rShape := range [][]int{ys, {n}} {
				{
					name := fmt.Sprintf("shape %d act %q residual %d", si, act, ri)
					vals := map[string]*tensor.Tensor{
						"x": randomTensor(r, sh.a...), "w": randomTensor(r, sh.b...),
						"b": randomTensor(r, n), "r": randomTensor(r, rShape...),
					}
					if si < 2 && ai == 2 {
						// Gelu over long chains of specials is NaN nearly
						// everywhere: finite operands.
						for _, k := range []string{"x", "w"} {
							for i, d := 0, vals[k].Data.([]float32); i < len(d); i++ {
								d[i] = float32(r.NormFloat64() * 0.2)
							}
						}
					}
					addIn := []string{"y", "b"}
					nodes := []*ir.Node{
						{Name: "m", OpType: "MatMul", Version: 13, Inputs: []string{"x", "w"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}},
						{Name: "a1", OpType: "Add", Version: 14, Inputs: addIn, Outputs: []string{"z"}, Attrs: map[string]*ir.Attr{}},
						{Name: "a2", OpType: "Add", Version: 14, Inputs: []string{"z", "r"}, Outputs: []string{"u"}, Attrs: map[string]*ir.Attr{}},
					}
					f := &ir.Node{Name: "f", OpType: "Fused", Domain: fused.Domain, Version: 1, Inputs: []string{"x", "w", "b", "r"}, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{
						"base":         {Name: "base", Kind: ir.AttrString, S: "MatMul"},
						"base_version": {Name: "base_version", Kind: ir.AttrInt, I: 13},
						"layout":       {Name: "layout", Kind: ir.AttrInts, Ints: []int64{2, 2, 0}},
					}}
					if act != "" {
						nodes = append(nodes, &ir.Node{Name: "act", OpType: act, Version: 20, Inputs: []string{"u"}, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{}})
						f.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: act}
						f.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: 20}
					} else {
						nodes[2].Outputs[0] = "out"
					}
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
							t.Fatalf("%s: %s: %v", name, nd.Name, err)
						}
						vals[nd.Outputs[0]] = outs[0]
					}
					want := vals["out"]
					in := []*tensor.Tensor{vals["x"], vals["w"], vals["b"], vals["r"]}
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
	}
}
