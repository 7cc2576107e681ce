package q8

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// TestQ8SiLU: an int8 layer with a SiLU activation (EfficientNet's
// convolutions) gives, at every level and worker count, through Run and
// Into, the bits of the same layer without activation followed by the
// Sigmoid and Mul kernels (pointwise, direct and GEMM convolutions), the
// Mul's operands in either order.
func TestQ8SiLU(t *testing.T) { testQ8Act(t, fused.SiLU) }

// TestQ8HardSwish: the same for MobileNetV3's HardSwish (HardSigmoid with
// alpha 1/6, then Mul), the HardSigmoid's NaN groups included.
func TestQ8HardSwish(t *testing.T) { testQ8Act(t, ActHardSwish) }

func testQ8Act(t *testing.T, actName string) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add(fused.Domain, fused.Ops(reg))
	reg.Add(fused.Domain, Ops(reg))
	r := rand.New(rand.NewPCG(31, 32))
	type cs struct{ c, h, w, m, k, stride int }
	for ci, s := range []cs{{32, 14, 14, 48, 1, 1}, {16, 9, 9, 24, 3, 2}, {5, 6, 6, 7, 3, 1}, {16, 12, 12, 32, 3, 1}} {
		for _, sigFirst := range []int64{0, 1} {
			wq := make([]int8, s.m*s.c*s.k*s.k)
			for i := range wq {
				wq[i] = int8(r.IntN(255) - 127)
			}
			pad := int64(s.k / 2)
			attrs := func(act bool) map[string]*ir.Attr {
				a := map[string]*ir.Attr{
					"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
					"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
					"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
					"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(s.stride), int64(s.stride)}},
					"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{pad, pad, pad, pad}},
				}
				if act {
					a[fused.AttrActivation] = &ir.Attr{Name: fused.AttrActivation, Kind: ir.AttrString, S: actName}
					a[fused.ActPrefix+"alpha"] = &ir.Attr{Name: fused.ActPrefix + "alpha", Kind: ir.AttrFloat, F: 1.0 / 6}
					a[fused.AttrActVersion] = &ir.Attr{Name: fused.AttrActVersion, Kind: ir.AttrInt, I: 13}
					a[fused.AttrSigmoidFirst] = &ir.Attr{Name: fused.AttrSigmoidFirst, Kind: ir.AttrInt, I: sigFirst}
				}
				return a
			}
			node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: attrs(true)}
			plain := &ir.Node{Name: "p", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: attrs(false)}
			x := randF32(r, s.c*s.h*s.w)
			// A NaN bias channel: NaN groups in the activation.
			bias := randF32(r, s.m)
			bias[1] = float32(math.NaN())
			in := []*tensor.Tensor{tensor.From(x, 1, s.c, s.h, s.w), tensor.From(wq, s.m, s.c, s.k, s.k), tensor.From(randPos(r, s.m), s.m), tensor.From(bias, s.m)}
			// The reference: the plain layer, then Sigmoid (HardSigmoid),
			// then Mul.
			pop, err := reg.Lookup(plain)
			if err != nil {
				t.Fatal(err)
			}
			pc := &kernel.Ctx{ISA: kernel.ISAPortable}
			base, err := pop.Run(pc, plain, in)
			if err != nil {
				t.Fatal(err)
			}
			sig := &ir.Node{OpType: "Sigmoid", Version: 13, Attrs: map[string]*ir.Attr{}}
			if actName == ActHardSwish {
				sig = &ir.Node{OpType: "HardSigmoid", Version: 6, Attrs: map[string]*ir.Attr{
					"alpha": {Name: "alpha", Kind: ir.AttrFloat, F: 1.0 / 6}}}
			}
			mul := &ir.Node{OpType: "Mul", Version: 14, Attrs: map[string]*ir.Attr{}}
			sop, _ := reg.Lookup(sig)
			mop, _ := reg.Lookup(mul)
			sg, err := sop.Run(pc, sig, base)
			if err != nil {
				t.Fatal(err)
			}
			args := []*tensor.Tensor{base[0], sg[0]}
			if sigFirst == 1 {
				args = []*tensor.Tensor{sg[0], base[0]}
			}
			ref, err := mop.Run(pc, mul, args)
			if err != nil {
				t.Fatal(err)
			}
			want := ref[0].Data.([]float32)
			op, err := reg.Lookup(node)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []kernel.ISA{kernel.ISAPortable, kernel.ISAAVX2, kernel.ISABest} {
				for _, threads := range []int{1, 2} {
					ctx := ctxAt(parallel.New(threads), l, nil)
					got, err := op.Run(ctx, node, in)
					if err != nil {
						t.Fatal(err)
					}
					out := []*tensor.Tensor{tensor.New(tensor.Float32, ref[0].Shape...)}
					if err := op.Into(ctx, node, in, out); err != nil {
						t.Fatal(err)
					}
					ctx.Pool.Close()
					for v, g := range [][]float32{got[0].Data.([]float32), out[0].Data.([]float32)} {
						for i := range want {
							if math.Float32bits(g[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s case %d sigFirst %d level %v %d workers (%s): y[%d] = %v, want %v", actName, ci, sigFirst, l, threads, []string{"Run", "Into"}[v], i, g[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestQ8Clip: an int8 layer with MobileNetV2's ReLU6 (Clip with bound
// inputs, opset 13; attributes, opset 6; one bound only) gives at every
// level, worker count and path (GEMM, quad, cols), through Run and Into,
// the bits of the layer without activation followed by the Clip node.
func TestQ8Clip(t *testing.T) {
	reg := kernel.NewRegistry("", elementwise.Ops(), nn.Ops())
	reg.Add(fused.Domain, fused.Ops(reg))
	reg.Add(fused.Domain, Ops(reg))
	r := rand.New(rand.NewPCG(41, 42))
	scalar := func(v float32) *tensor.Tensor { return tensor.From([]float32{v}) }
	type cs struct {
		c, h, m, k int
		version    int64
		lo, hi     *tensor.Tensor // opset 13 inputs (nil: absent)
	}
	for ci, s := range []cs{{24, 14, 144, 1, 13, scalar(0), scalar(6)}, {16, 9, 32, 3, 13, nil, scalar(0.5)}, {5, 6, 7, 3, 6, nil, nil}, {32, 6, 8, 1, 13, scalar(-0.25), nil}} {
		wq := make([]int8, s.m*s.c*s.k*s.k)
		for i := range wq {
			wq[i] = int8(r.IntN(255) - 127)
		}
		pad := int64(s.k / 2)
		base := map[string]*ir.Attr{
			"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
			"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: 0.02},
			"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
			"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{pad, pad, pad, pad}},
		}
		attrs := map[string]*ir.Attr{}
		for k, v := range base {
			attrs[k] = v
		}
		attrs[fused.AttrActivation] = &ir.Attr{Name: fused.AttrActivation, Kind: ir.AttrString, S: "Clip"}
		attrs[fused.AttrActVersion] = &ir.Attr{Name: fused.AttrActVersion, Kind: ir.AttrInt, I: s.version}
		clip := &ir.Node{OpType: "Clip", Version: s.version, Attrs: map[string]*ir.Attr{}}
		bias := randF32(r, s.m)
		bias[0] = float32(math.NaN())
		in := []*tensor.Tensor{tensor.From(randF32(r, s.c*s.h*s.h), 1, s.c, s.h, s.h), tensor.From(wq, s.m, s.c, s.k, s.k), tensor.From(randPos(r, s.m), s.m), tensor.From(bias, s.m)}
		inputs := []string{"x", "w", "s", "b"}
		ain := []*tensor.Tensor{}
		if s.version < 11 {
			attrs[fused.ActPrefix+"min"] = &ir.Attr{Name: fused.ActPrefix + "min", Kind: ir.AttrFloat, F: 0}
			attrs[fused.ActPrefix+"max"] = &ir.Attr{Name: fused.ActPrefix + "max", Kind: ir.AttrFloat, F: 1}
			clip.Attrs["min"] = &ir.Attr{Name: "min", Kind: ir.AttrFloat, F: 0}
			clip.Attrs["max"] = &ir.Attr{Name: "max", Kind: ir.AttrFloat, F: 1}
		} else {
			ain = []*tensor.Tensor{s.lo, s.hi}
			inputs = append(inputs, "lo", "hi")
			attrs["layout"] = &ir.Attr{Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 2}}
		}
		node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: inputs, Outputs: []string{"y"}, Attrs: attrs}
		plain := &ir.Node{Name: "p", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: base}
		pop, err := reg.Lookup(plain)
		if err != nil {
			t.Fatal(err)
		}
		pc := &kernel.Ctx{ISA: kernel.ISAPortable}
		y, err := pop.Run(pc, plain, in)
		if err != nil {
			t.Fatal(err)
		}
		cop, err := reg.Lookup(clip)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := cop.Run(pc, clip, append([]*tensor.Tensor{y[0]}, ain...))
		if err != nil {
			t.Fatal(err)
		}
		want := ref[0].Data.([]float32)
		op, err := reg.Lookup(node)
		if err != nil {
			t.Fatal(err)
		}
		full := append(append([]*tensor.Tensor{}, in...), ain...)
		for _, l := range []kernel.ISA{kernel.ISAPortable, kernel.ISAAVX2, kernel.ISABest} {
			for _, f := range []forced{{}, {noQuadQ8: true}} {
				for _, threads := range []int{1, 2} {
					ff := f
					ctx := ctxAt(parallel.New(threads), l, &ff)
					got, err := op.Run(ctx, node, full)
					if err != nil {
						t.Fatal(err)
					}
					out := []*tensor.Tensor{tensor.New(tensor.Float32, ref[0].Shape...)}
					if err := op.Into(ctx, node, full, out); err != nil {
						t.Fatal(err)
					}
					ctx.Pool.Close()
					for v, g := range [][]float32{got[0].Data.([]float32), out[0].Data.([]float32)} {
						for i := range want {
							if math.Float32bits(g[i]) != math.Float32bits(want[i]) {
								t.Fatalf("case %d level %v %+v %d workers (%s): y[%d] = %v, want %v", ci, l, f, threads, []string{"Run", "Into"}[v], i, g[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}
