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

// TestFusedSiLUEpilogue: a Fused Conv (+ Add) + SiLU or HardSigmoidMul
// layer, whose activation Conv's Into applies as the epilogue's Act (in the GEMM tiles, the direct and
// depthwise kernels' planes), gives the bits of its nodes (Conv, Add,
// Sigmoid or HardSigmoid, Mul) run one by one on the portable twins, at every
// instruction-set level, at 1 and 2 threads, in both Mul operand
// orders: 1x1 (GEMM), dense 3x3, depthwise 3x3 at strides 1 and 2 (the
// row and flat kernels), 5x5 at strides 1 and 2 and dilated (dwAny), and
// it allocates nothing on the vector kernels.
func TestFusedSiLUEpilogue(t *testing.T) {
	reg := builtin.Registry()
	r := rand.New(rand.NewPCG(16, 16))
	convs := []struct {
		x, w          []int
		group         int64
		pads, strides []int64
		dil           []int64
	}{
		{[]int{1, 16, 9, 11}, []int{24, 16, 1, 1}, 1, []int64{0, 0, 0, 0}, []int64{1, 1}, nil},
		{[]int{1, 5, 11, 13}, []int{7, 5, 3, 3}, 1, []int64{1, 1, 1, 1}, []int64{1, 1}, nil},
		{[]int{1, 6, 9, 21}, []int{6, 1, 3, 3}, 6, []int64{1, 1, 1, 1}, []int64{1, 1}, nil},
		{[]int{2, 7, 14, 14}, []int{7, 1, 3, 3}, 7, []int64{1, 1, 1, 1}, []int64{1, 1}, nil},
		{[]int{1, 5, 28, 28}, []int{5, 1, 3, 3}, 5, []int64{1, 1, 1, 1}, []int64{2, 2}, nil},
		{[]int{1, 4, 13, 15}, []int{4, 1, 3, 3}, 4, []int64{0, 1, 1, 1}, []int64{2, 2}, nil},
		{[]int{1, 6, 14, 14}, []int{6, 1, 5, 5}, 6, []int64{2, 2, 2, 2}, []int64{1, 1}, nil},
		{[]int{1, 6, 15, 17}, []int{6, 1, 5, 5}, 6, []int64{1, 2, 2, 1}, []int64{2, 2}, nil},
		{[]int{1, 3, 12, 12}, []int{3, 1, 3, 3}, 3, []int64{2, 2, 2, 2}, []int64{1, 1}, []int64{2, 2}},
	}
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2)}
	hsAttrs := map[string]*ir.Attr{"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: 1.0 / 6}, "beta": {Name: "beta", Kind: ir.AttrFloat, F: 0.5}}
	for ci, cv := range convs {
		for _, add := range []bool{false, true} {
			for _, gi := range []int{0, 1, 2, 3} {
				sigFirst, hard := gi%2 == 1, gi >= 2
				name := fmt.Sprintf("conv%d/add=%v/sigFirst=%v/hard=%v", ci, add, sigFirst, hard)
				attrs := map[string]*ir.Attr{
					"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: cv.pads},
					"strides": {Name: "strides", Kind: ir.AttrInts, Ints: cv.strides},
					"group":   {Name: "group", Kind: ir.AttrInt, I: cv.group},
				}
				if cv.dil != nil {
					attrs["dilations"] = &ir.Attr{Name: "dilations", Kind: ir.AttrInts, Ints: cv.dil}
				}
				b := &ir.Node{Name: "b", OpType: "Conv", Version: 11, Inputs: []string{"x", "w", "bias"}, Outputs: []string{"y"}, Attrs: attrs}
				vals := map[string]*tensor.Tensor{"x": randomTensor(r, cv.x...), "w": randomTensor(r, cv.w...), "bias": randomTensor(r, cv.w[0])}
				nodes := []*ir.Node{b}
				fin := []string{"x", "w", "bias"}
				lay := fused.Layer{Base: "Conv", BaseVersion: 11, BaseInputs: 3, Activation: fused.SiLU, ActVersion: 13, SigmoidFirst: sigFirst}
				gate := &ir.Node{Name: "sig", OpType: "Sigmoid", Version: 13, Outputs: []string{"s"}, Attrs: map[string]*ir.Attr{}}
				if hard {
					lay.Activation, lay.ActVersion = fused.HardSigmoidMul, 6
					gate = &ir.Node{Name: "sig", OpType: "HardSigmoid", Version: 6, Outputs: []string{"s"}, Attrs: hsAttrs}
				}
				v := "y"
				if add {
					// The residual has the output's shape: run the Conv
					// alone first to learn it.
					out, err := runNode(reg, b, vals)
					if err != nil {
						t.Fatal(err)
					}
					vals["r"] = randomTensor(r, out.Shape...)
					nodes = append(nodes, &ir.Node{Name: "a", OpType: "Add", Version: 14, Inputs: []string{v, "r"}, Outputs: []string{"z"}, Attrs: map[string]*ir.Attr{}})
					v = "z"
					fin = append(fin, "r")
					lay.Adds = 1
				}
				mulIn := []string{v, "s"}
				if sigFirst {
					mulIn = []string{"s", v}
				}
				gate.Inputs = []string{v}
				nodes = append(nodes, gate,
					&ir.Node{Name: "mul", OpType: "Mul", Version: 14, Inputs: mulIn, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{}})
				for _, n := range nodes {
					out, err := runNode(reg, n, vals)
					if err != nil {
						t.Fatal(err)
					}
					vals[n.Outputs[0]] = out
				}
				want := vals["out"]
				f := &ir.Node{Name: "f", OpType: fused.OpFused, Domain: fused.Domain, Version: 1, Inputs: fin, Outputs: []string{"out"}, Attrs: map[string]*ir.Attr{}}
				for k, a := range attrs {
					f.Attrs[k] = a
				}
				if hard {
					for k, a := range hsAttrs {
						c := fused.ActAttr(k, a)
						f.Attrs[c.Name] = c
					}
				}
				lay.SetAttrs(f.Attrs)
				in := make([]*tensor.Tensor, len(fin))
				for i, nm := range fin {
					in[i] = vals[nm]
				}
				op, err := reg.Lookup(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range kernel.ISAs() {
					for _, pool := range pools {
						out := []*tensor.Tensor{tensor.New(tensor.Float32, want.Shape...)}
						c := &kernel.Ctx{ISA: l, Pool: pool, State: new(kernel.State)}
						if err := op.Into(c, f, in, out); err != nil {
							t.Fatal(err)
						}
						if err := sameBits(out[0], want); err != nil {
							t.Fatalf("%s, %v, %d workers: Into: %v", name, l, pool.Workers(), err)
						}
						got, err := op.Run(c, f, in)
						if err != nil {
							t.Fatal(err)
						}
						if err := sameBits(got[0], want); err != nil {
							t.Fatalf("%s, %v, %d workers: Run: %v", name, l, pool.Workers(), err)
						}
						// Below AVX-512 a depthwise convolution other than
						// undilated 3x3 runs the scalar depthwiseInto, which
						// allocates its index arrays.
						if l == kernel.ISAPortable || raceEnabled || l == kernel.ISAAVX2 && cv.group > 1 && (cv.w[2] != 3 || cv.dil != nil) {
							continue
						}
						for range 3 {
							_ = op.Into(c, f, in, out)
						}
						if allocs := testing.AllocsPerRun(5, func() { _ = op.Into(c, f, in, out) }); allocs != 0 {
							t.Errorf("%s, %v: Into allocates %v times per call", name, l, allocs)
						}
					}
				}
			}
		}
	}
}

// runNode runs n through reg on the portable twins, its inputs from vals.
func runNode(reg *kernel.Registry, n *ir.Node, vals map[string]*tensor.Tensor) (*tensor.Tensor, error) {
	op, err := reg.Lookup(n)
	if err != nil {
		return nil, err
	}
	args := make([]*tensor.Tensor, len(n.Inputs))
	for j, name := range n.Inputs {
		args[j] = vals[name]
	}
	outs, err := op.Run(&kernel.Ctx{ISA: kernel.ISAPortable}, n, args)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}
