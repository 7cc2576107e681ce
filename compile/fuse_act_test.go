package compile_test

import (
	"math"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// layerSuffixes builds b's graph (output out) and returns each plan
// layer's op type with its fused suffix ("Fused+Add+HardSigmoidMul").
func layerSuffixes(t *testing.T, b *gb, out string) []string {
	t.Helper()
	res, err := compile.Build(&ir.Model{Graph: b.g, Opsets: map[string]int64{"": 17}}, []byte("t"), "t", "test", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, n := range p.Graph.Nodes {
		k := n.OpType
		if l, ok := fused.LayerOf(n); ok {
			k += l.Suffix()
		}
		ks = append(ks, k)
	}
	return ks
}

// TestFuseHardSwish: a Conv (with and without its bias Add fused first)
// followed by x·HardSigmoid(x), in either Mul operand order, becomes one
// layer, with the graph's bits; a HardSigmoid whose output is also read
// elsewhere is left alone.
func TestFuseHardSwish(t *testing.T) {
	hsw := func(b *gb, v string, sigFirst bool, tag string) string {
		h := b.node("HardSigmoid", []string{v}, tag+"_hs",
			&ir.Attr{Name: "alpha", Kind: ir.AttrFloat, F: 1.0 / 6}, &ir.Attr{Name: "beta", Kind: ir.AttrFloat, F: 0.5})
		if sigFirst {
			return b.node("Mul", []string{h, v}, tag)
		}
		return b.node("Mul", []string{v, h}, tag)
	}
	conv := func(b *gb, x, tag string, cin, cout, k int, group int64) string {
		p := int64(k / 2)
		return b.node("Conv", []string{x, b.constant(tag+"_w", []int{cout, cin / int(group), k, k}), b.constant(tag+"_b", []int{cout})}, tag,
			ints("pads", p, p, p, p), &ir.Attr{Name: "group", Kind: ir.AttrInt, I: group})
	}
	for _, sigFirst := range []bool{false, true} {
		// A dense 3x3 Conv, then a depthwise 5x5 one, each with HardSwish.
		b := newGB([]int{1, 4, 9, 11})
		y := hsw(b, conv(b, "x", "c1", 4, 16, 3, 1), sigFirst, "y1")
		y = hsw(b, conv(b, y, "c2", 16, 16, 5, 16), sigFirst, "y2")
		b.check(t, y, true)
		if kinds := layerSuffixes(t, b, y); len(kinds) != 2 || kinds[0] != "Fused+HardSigmoidMul" || kinds[1] != kinds[0] {
			t.Fatalf("sigFirst %v: Conv + HardSwish twice became %v", sigFirst, kinds)
		}
		// A residual Add fused first.
		b = newGB([]int{1, 8, 7, 7})
		a := b.node("Add", []string{conv(b, "x", "c3", 8, 8, 1, 1), "x"}, "a")
		y = hsw(b, a, sigFirst, "y3")
		b.check(t, y, true)
		if kinds := layerSuffixes(t, b, y); len(kinds) != 1 || kinds[0] != "Fused+Add+HardSigmoidMul" {
			t.Fatalf("sigFirst %v: Conv + Add + HardSwish became %v", sigFirst, kinds)
		}
	}
	// The HardSigmoid is also read by another node: no fusion.
	b := newGB([]int{1, 4, 6, 6})
	v := conv(b, "x", "c4", 4, 4, 3, 1)
	h := b.node("HardSigmoid", []string{v}, "hs")
	y := b.node("Add", []string{b.node("Mul", []string{v, h}, "m"), h}, "y")
	b.check(t, y, true)
	for _, k := range layerSuffixes(t, b, y) {
		if k == "Fused+HardSigmoidMul" {
			t.Fatal("a HardSigmoid read twice was fused")
		}
	}
}

// TestFuseChannelMul: a squeeze-excitation block's Mul (x by the gate of
// its global average, [N, C, 1, 1]), in either operand order, becomes a
// ChannelMul layer with the graph's bits; a Mul of two full tensors, or
// by a [N, 1, H, W] operand, stays a Mul.
func TestFuseChannelMul(t *testing.T) {
	for _, first := range []bool{false, true} {
		b := newGB([]int{1, 4, 6, 7})
		h := b.node("Conv", []string{"x", b.constant("w1", []int{8, 4, 3, 3})}, "h", ints("pads", 1, 1, 1, 1))
		p := b.node("GlobalAveragePool", []string{h}, "p")
		g := b.node("Sigmoid", []string{b.node("Conv", []string{p, b.constant("w2", []int{8, 8, 1, 1})}, "q")}, "g")
		in := []string{h, g}
		if first {
			in = []string{g, h}
		}
		y := b.node("Mul", in, "y")
		b.check(t, y, true)
		ks := layerSuffixes(t, b, y)
		if len(ks) == 0 || ks[len(ks)-1] != "ChannelMul" {
			t.Fatalf("first %v: the SE block became %v", first, ks)
		}
	}
	b := newGB([]int{1, 4, 6, 6})
	y := b.node("Mul", []string{b.node("Relu", []string{"x"}, "r"), "x"}, "y")
	b.check(t, y, true)
	for _, k := range layerSuffixes(t, b, y) {
		if k == "ChannelMul" {
			t.Fatal("a Mul of two full tensors became a ChannelMul")
		}
	}
	b = newGB([]int{1, 4, 6, 6})
	m := b.node("ReduceMean", []string{"x"}, "m", ints("axes", 1))
	y = b.node("Mul", []string{"x", m}, "y")
	b.check(t, y, true)
	for _, k := range layerSuffixes(t, b, y) {
		if k == "ChannelMul" {
			t.Fatal("a Mul by a [N, 1, H, W] operand became a ChannelMul")
		}
	}
}

// TestSplitPaddingTaps: a large dilated 3x3 Conv (with a bias, then a
// Relu) whose outer taps read the input only for the outputs near the
// edges is split into Convs over regions of outputs, their Concats in its
// place, with the graph's bits; at stride 2 too; a small one, or one that
// would lose too little work, is left alone.
func TestSplitPaddingTaps(t *testing.T) {
	for _, st := range []int64{1, 2} {
		c := 128 * int(st) // stride 2 has a quarter of the outputs: as much work
		b := newGB([]int{1, c, 16, 15})
		h := b.node("Conv", []string{"x", b.constant("w", []int{c, c, 3, 3}), b.constant("bias", []int{c})}, "h",
			ints("dilations", 12, 12), ints("pads", 12, 12, 12, 12), ints("strides", st, st))
		y := b.node("Relu", []string{h}, "y")
		b.check(t, y, true)
		convs := 0
		for _, k := range layerSuffixes(t, b, y) {
			if k == "Conv" || k == "Fused" {
				convs++
			}
		}
		if convs < 2 {
			t.Fatalf("stride %d: the dilated Conv was not split: %v", st, layerSuffixes(t, b, y))
		}
	}
	// Dilation 1: every output but the border's reads all nine taps.
	b := newGB([]int{1, 128, 16, 16})
	y := b.node("Conv", []string{"x", b.constant("w", []int{128, 128, 3, 3})}, "y", ints("pads", 1, 1, 1, 1))
	b.check(t, y, true)
	if ks := layerSuffixes(t, b, y); len(ks) != 1 {
		t.Fatalf("a 3x3 Conv of pads 1 became %v", ks)
	}
}

// TestPointGemm: a squeeze-excitation block's 1x1 Convs on the global
// average (with a bias, then Relu; then Sigmoid) become Gemms, with the
// graph's bits; one with an infinite bias, or on a larger map, stays a
// Conv.
func TestPointGemm(t *testing.T) {
	gemms := func(b *gb, y string) int {
		k := 0
		for _, s := range layerSuffixes(t, b, y) {
			if s == "Gemm" || s == "Fused" {
				k++
			}
		}
		return k
	}
	b := newGB([]int{1, 24, 5, 5})
	p := b.node("GlobalAveragePool", []string{"x"}, "p")
	h := b.node("Relu", []string{b.node("Conv", []string{p, b.constant("w1", []int{6, 24, 1, 1}), b.constant("b1", []int{6})}, "c1")}, "h")
	y := b.node("Sigmoid", []string{b.node("Conv", []string{h, b.constant("w2", []int{24, 6, 1, 1}), b.constant("b2", []int{24})}, "c2")}, "y")
	b.check(t, y, true)
	if k := gemms(b, y); k < 2 {
		t.Fatalf("the SE convolutions became %v", layerSuffixes(t, b, y))
	}
	for _, k := range layerSuffixes(t, b, y) {
		if k == "Conv" {
			t.Fatalf("a Conv is left: %v", layerSuffixes(t, b, y))
		}
	}
	b = newGB([]int{1, 24, 5, 5})
	y = b.node("Conv", []string{"x", b.constant("w3", []int{6, 24, 1, 1})}, "y")
	b.check(t, y, true)
	if ks := layerSuffixes(t, b, y); len(ks) != 1 || ks[0] != "Conv" {
		t.Fatalf("a 1x1 Conv on 5x5 became %v", ks)
	}
	b = newGB([]int{1, 24, 1, 1})
	b.g.Initializers["b4"] = tensor.From([]float32{float32(math.Inf(1)), 0, 0, 0, 0, 0}, 6)
	y = b.node("Conv", []string{"x", b.constant("w4", []int{6, 24, 1, 1}), "b4"}, "y")
	b.check(t, y, true)
	if ks := layerSuffixes(t, b, y); len(ks) != 1 || ks[0] != "Conv" {
		t.Fatalf("a 1x1 Conv with an infinite bias became %v", ks)
	}
}
