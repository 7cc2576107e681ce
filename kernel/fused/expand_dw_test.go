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

// TestExpandDepthwiseTwin: an ExpandDepthwise layer's Into (the banded
// fast path, nn.ExpandDepthwise) gives the bits of its two parts run one
// after the other on the portable twins, at every level and with 1, 2
// and 8 workers: plain
// Conv parts and Fused parts with Relu or Clip (opset 11 bounds as
// inputs), SiLU or HardSigmoidMul (both Mul orders), with and without biases, strides 1 and 2, pads 0 and 1 at the
// bottom and right, widths around the vector size, expansions wide enough
// that the buffer slides, NaN/Inf in the data.
func TestExpandDepthwiseTwin(t *testing.T) {
	t.Parallel()
	reg := builtin.Registry()
	r := rand.New(rand.NewPCG(31, 32))
	pools := []*parallel.Pool{parallel.New(1), parallel.New(2), parallel.New(8)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	ints := func(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }
	fastRuns := 0
	for ci := 0; ci < 40; ci++ {
		n, cin, e := 1+r.IntN(2), 1+r.IntN(20), 1+r.IntN(40)
		h, w := 8+r.IntN(40), 8+r.IntN(40)
		if ci%10 == 9 {
			// A wide expansion: the kernel's buffer holds only a few rows
			// per channel, so rows are kept and slid band by band.
			e, w, h = 200+r.IntN(40), 90+r.IntN(30), 20+r.IntN(20)
		}
		s := int64(1 + r.IntN(2))
		pb, pr := int64(r.IntN(2)), int64(r.IntN(2))
		vals := map[string]*tensor.Tensor{
			"x": randomTensor(r, n, cin, h, w), "w1": randomTensor(r, e, cin, 1, 1), "b1": randomTensor(r, e),
			"w2": randomTensor(r, e, 1, 3, 3), "b2": randomTensor(r, e),
			"lo": tensor.From([]float32{0}), "hi": tensor.From([]float32{6}),
		}
		a := &ir.Node{Name: "a", OpType: "Conv", Version: 11, Inputs: []string{"x", "w1", "b1"}, Outputs: []string{"m"}, Attrs: map[string]*ir.Attr{}}
		b := &ir.Node{Name: "b", OpType: "Conv", Version: 11, Inputs: []string{"m", "w2", "b2"}, Outputs: []string{"y"},
			Attrs: map[string]*ir.Attr{"group": {Name: "group", Kind: ir.AttrInt, I: int64(e)}, "strides": ints("strides", s, s),
				"pads": ints("pads", 1, 1, pb, pr)}}
		if ci%3 == 1 {
			a.Inputs = a.Inputs[:2]
			b.Inputs = b.Inputs[:2]
		}
		// Fused parts: the expansion with Clip(0, 6), the depthwise with
		// Relu, or the other way round.
		fuse := func(x *ir.Node, act string) *ir.Node {
			f := &ir.Node{Name: x.Name, OpType: "Fused", Domain: fused.Domain, Version: 1, Inputs: append([]string{}, x.Inputs...),
				Outputs: x.Outputs, Attrs: map[string]*ir.Attr{}}
			for k, v := range x.Attrs {
				f.Attrs[k] = v
			}
			f.Attrs["base"] = &ir.Attr{Name: "base", Kind: ir.AttrString, S: "Conv"}
			f.Attrs["base_version"] = &ir.Attr{Name: "base_version", Kind: ir.AttrInt, I: 11}
			f.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: act}
			f.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: 13}
			if act == fused.SiLU || act == fused.HardSigmoidMul {
				f.Attrs["act_sigmoid_first"] = &ir.Attr{Name: "act_sigmoid_first", Kind: ir.AttrInt, I: int64(ci % 2)}
			}
			if act == fused.HardSigmoidMul {
				f.Attrs["act_version"].I = 6
				f.Attrs["act_alpha"] = &ir.Attr{Name: "act_alpha", Kind: ir.AttrFloat, F: 1.0 / 6}
				f.Attrs["act_beta"] = &ir.Attr{Name: "act_beta", Kind: ir.AttrFloat, F: 0.5}
			}
			nact := int64(0)
			if act == "Clip" {
				f.Inputs = append(f.Inputs, "lo", "hi")
				nact = 2
			}
			f.Attrs["layout"] = &ir.Attr{Name: "layout", Kind: ir.AttrInts, Ints: []int64{int64(len(x.Inputs)), 0, nact}}
			return f
		}
		switch ci % 6 {
		case 1:
			a, b = fuse(a, "Clip"), fuse(b, "Relu")
		case 2:
			a, b = fuse(a, "Relu"), fuse(b, "Clip")
		case 3:
			b = fuse(b, "Clip")
		case 4:
			a, b = fuse(a, fused.SiLU), fuse(b, fused.HardSigmoidMul)
		case 5:
			a, b = fuse(a, fused.HardSigmoidMul), fuse(b, fused.SiLU)
		}
		layer := fused.ExpandDepthwiseNode(a, b)
		op, err := reg.Lookup(layer)
		if err != nil {
			t.Fatal(err)
		}
		in := make([]*tensor.Tensor, len(layer.Inputs))
		for i, name := range layer.Inputs {
			in[i] = vals[name]
		}
		name := fmt.Sprintf("case %d (x %dx%dx%dx%d, e %d, stride %d, pads bottom %d right %d)", ci, n, cin, h, w, e, s, pb, pr)
		want, err := op.Run(&kernel.Ctx{ISA: kernel.ISAPortable}, layer, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, l := range kernel.ISAs() {
			for _, p := range pools {
				y := tensor.New(tensor.Float32, want[0].Shape...)
				if err := op.Into(&kernel.Ctx{Pool: p, ISA: l}, layer, in, []*tensor.Tensor{y}); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if err := sameBits(y, want[0]); err != nil {
					t.Fatalf("%s, %v, %d workers: %v", name, l, p.Workers(), err)
				}
			}
		}
		if (int(w)+1+int(pr)-3)/int(s)+1 >= 8 {
			fastRuns++
		}
	}
	if fastRuns < 20 {
		t.Fatalf("only %d cases wide enough for the fast path", fastRuns)
	}
}

// BenchmarkExpandDepthwise is mobilenet_v2's fused blocks (Clip(0, 6) on
// both parts) through Into, one worker.
func BenchmarkExpandDepthwise(b *testing.B) {
	reg := builtin.Registry()
	for _, c := range []struct {
		name          string
		cin, e, hw, s int
	}{{"f2_16to96_112s2", 16, 96, 112, 2}, {"f3_24to144_56s1", 24, 144, 56, 1}, {"f4_24to144_56s2", 24, 144, 56, 2}} {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			vals := map[string]*tensor.Tensor{
				"x": randomTensor(r, 1, c.cin, c.hw, c.hw), "w1": randomTensor(r, c.e, c.cin, 1, 1), "b1": randomTensor(r, c.e),
				"w2": randomTensor(r, c.e, 1, 3, 3), "b2": randomTensor(r, c.e),
				"lo": tensor.From([]float32{0}), "hi": tensor.From([]float32{6}),
			}
			clip := func(name string, in []string, attrs map[string]*ir.Attr) *ir.Node {
				f := &ir.Node{Name: name, OpType: "Fused", Domain: fused.Domain, Version: 1, Inputs: append(in, "lo", "hi"),
					Outputs: []string{name}, Attrs: attrs}
				f.Attrs["base"] = &ir.Attr{Name: "base", Kind: ir.AttrString, S: "Conv"}
				f.Attrs["base_version"] = &ir.Attr{Name: "base_version", Kind: ir.AttrInt, I: 11}
				f.Attrs["activation"] = &ir.Attr{Name: "activation", Kind: ir.AttrString, S: "Clip"}
				f.Attrs["act_version"] = &ir.Attr{Name: "act_version", Kind: ir.AttrInt, I: 13}
				f.Attrs["layout"] = &ir.Attr{Name: "layout", Kind: ir.AttrInts, Ints: []int64{3, 0, 2}}
				return f
			}
			s := int64(c.s)
			a := clip("a", []string{"x", "w1", "b1"}, map[string]*ir.Attr{})
			bn := clip("b", []string{"a", "w2", "b2"}, map[string]*ir.Attr{
				"group":   {Name: "group", Kind: ir.AttrInt, I: int64(c.e)},
				"strides": {Name: "strides", Kind: ir.AttrInts, Ints: []int64{s, s}},
				"pads":    {Name: "pads", Kind: ir.AttrInts, Ints: []int64{1, 1, 1, 1}}})
			layer := fused.ExpandDepthwiseNode(a, bn)
			op, err := reg.Lookup(layer)
			if err != nil {
				b.Fatal(err)
			}
			in := make([]*tensor.Tensor, len(layer.Inputs))
			for i, name := range layer.Inputs {
				in[i] = vals[name]
			}
			oh := (c.hw-1)/c.s + 1
			y := tensor.New(tensor.Float32, 1, c.e, oh, oh)
			p := parallel.New(1)
			defer p.Close()
			ctx := &kernel.Ctx{Pool: p}
			for i := 0; i < b.N; i++ {
				if err := op.Into(ctx, layer, in, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
