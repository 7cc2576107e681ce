package fast

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// The INT8 kernels' arithmetic is kernel/q8's: a Q8 layer (vouch's CPU
// int8 Conv and Gemm, at every ISA level) with the same int8 weights,
// weight scales, activation scale and bias gives Int8Conv's bits, so a
// fast int8 layer and the CPU int8 plan's layer of the same calibration
// agree bit for bit (specials in the input included).
func TestInt8ConvEqualsQ8(t *testing.T) {
	reg := builtin.Registry()
	r := rand.New(rand.NewSource(11))
	for i := range 24 {
		kind := []int{kindConv, kind1x1, kindWide, kindGemm}[i%4]
		c := randCase8(r, Tile{64, 64}, kind)
		c.res, c.act = nil, exact.Act{}
		if c.bias == nil {
			c.bias = make([]float32, c.g.M)
		}
		w := c.weights(t)
		want, err := Int8Conv(c.g, c.x, w, c.sx, c.bias, nil, exact.Act{})
		if err != nil {
			t.Fatal(err)
		}
		attrs := map[string]*ir.Attr{
			"base":    {Name: "base", Kind: ir.AttrString, S: "Conv"},
			"x_scale": {Name: "x_scale", Kind: ir.AttrFloat, F: c.sx},
			"layout":  {Name: "layout", Kind: ir.AttrInts, Ints: []int64{4, 0, 0}},
		}
		g := c.g
		x := tensor.From(c.x, g.N, g.C, g.H, g.W)
		wt := tensor.From(w.Q, g.M, g.C, g.KH, g.KW)
		if kind == kindGemm {
			attrs["base"].S = "Gemm"
			x, wt = tensor.From(c.x, g.N, g.C), tensor.From(w.Q, g.M, g.C)
			attrs["transB"] = &ir.Attr{Name: "transB", Kind: ir.AttrInt, I: 1}
		} else {
			attrs["strides"] = &ir.Attr{Name: "strides", Kind: ir.AttrInts, Ints: []int64{int64(g.SH), int64(g.SW)}}
			attrs["pads"] = &ir.Attr{Name: "pads", Kind: ir.AttrInts, Ints: []int64{int64(g.PH), int64(g.PW), int64(g.PH), int64(g.PW)}}
			attrs["dilations"] = &ir.Attr{Name: "dilations", Kind: ir.AttrInts, Ints: []int64{int64(g.DH), int64(g.DW)}}
		}
		node := &ir.Node{Name: "q", OpType: "Q8", Domain: "vouch", Version: 1, Inputs: []string{"x", "w", "s", "b"}, Outputs: []string{"y"}, Attrs: attrs}
		op, err := reg.Lookup(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []kernel.ISA{kernel.ISAPortable, kernel.ISABest} {
			out, err := op.Run(&kernel.Ctx{ISA: l}, node, []*tensor.Tensor{x, wt, tensor.From(w.Scale, g.M), tensor.From(c.bias, g.M)})
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			got := out[0].Data.([]float32)
			if len(got) != len(want) {
				t.Fatalf("%v: %d outputs, want %d", c, len(got), len(want))
			}
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("%v ISA %v: output %d: q8 %#08x (%g), Int8Conv %#08x (%g)", c, l, j, math.Float32bits(got[j]), got[j], math.Float32bits(want[j]), want[j])
				}
			}
		}
	}
}
