package compile_test

import (
	"math"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/kernel/builtin"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// TestFuseScaleShift: a BatchNormalization that reads no convolution
// (pre-activation, as in DenseNet) becomes one ScaleShift layer with the
// Relu that reads it, and one without a Relu alone, with the graph's bits
// (check with exact = true); one that reads a Conv is still folded.
func TestFuseScaleShift(t *testing.T) {
	bn := func(b *gb, x, tag string) string {
		return b.node("BatchNormalization", []string{x,
			b.constant(tag+"_gamma", []int{3}), b.constant(tag+"_beta", []int{3}),
			b.constant(tag+"_mean", []int{3}), b.constant(tag+"_var", []int{3}, 1.2, 0.8, 2.5)}, tag)
	}
	b := newGB([]int{2, 3, 5, 7})
	y := b.node("Relu", []string{bn(b, "x", "bn1")}, "y")
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "ScaleShift" {
		t.Fatalf("BatchNormalization + Relu became %v", kinds)
	}
	b = newGB([]int{1, 3, 4, 4})
	y = b.node("Sigmoid", []string{bn(b, "x", "bn2")}, "y")
	if kinds := b.check(t, y, true); len(kinds) != 2 || kinds[0] != "ScaleShift" {
		t.Fatalf("BatchNormalization + Sigmoid became %v", kinds)
	}
	// The Relu's input is also read elsewhere: the Relu stays (an elementwise layer with the Add).
	b = newGB([]int{1, 3, 4, 4})
	h := bn(b, "x", "bn3")
	y = b.node("Add", []string{b.node("Relu", []string{h}, "r"), h}, "y")
	if kinds := b.check(t, y, true); len(kinds) != 2 || kinds[0] != "ScaleShift" {
		t.Fatalf("BatchNormalization read twice became %v", kinds)
	}
	// After a Conv it is folded, as before.
	b = newGB([]int{1, 2, 6, 6})
	h = b.node("Conv", []string{"x", b.constant("w", []int{3, 2, 3, 3})}, "h", &ir.Attr{Name: "pads", Kind: ir.AttrInts, Ints: []int64{1, 1, 1, 1}})
	y = b.node("Relu", []string{bn(b, h, "bn4")}, "y")
	if kinds := b.check(t, y, false); len(kinds) != 1 || kinds[0] == "ScaleShift" {
		t.Fatalf("Conv + BatchNormalization + Relu became %v", kinds)
	}
}

// TestEliminateNoopPad: a Pad of all-zero pads goes (its reader reads its
// input); one that pads does not.
func TestEliminateNoopPad(t *testing.T) {
	b := newGB([]int{1, 2, 4, 4})
	p := b.node("Pad", []string{"x", b.int64s("zero_pads", 0, 0, 0, 0, 0, 0, 0, 0)}, "p")
	y := b.node("AveragePool", []string{p}, "y", ints("kernel_shape", 2, 2), ints("strides", 2, 2))
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "AveragePool" {
		t.Fatalf("zero Pad + AveragePool became %v", kinds)
	}
	b = newGB([]int{1, 2, 4, 4})
	p = b.node("Pad", []string{"x", b.int64s("pads", 0, 0, 1, 1, 0, 0, 1, 1)}, "p")
	y = b.node("MaxPool", []string{p}, "y", ints("kernel_shape", 2, 2), ints("strides", 2, 2))
	if kinds := b.check(t, y, true); len(kinds) != 2 || kinds[0] != "Pad" {
		t.Fatalf("Pad + MaxPool became %v", kinds)
	}
}

// int64s adds an int64 initializer.
func (b *gb) int64s(name string, v ...int64) string {
	b.g.Initializers[name] = tensor.From(v, len(v))
	return name
}

// TestDropPaddingTaps: a dilated 3x3 Conv whose outer taps only ever read
// padding becomes a 1x1 one with the graph's bits; with an infinite weight
// it is left alone (FMA(0, Inf, acc) is NaN); a 3x3 Conv of pads 1 keeps
// every tap.
func TestDropPaddingTaps(t *testing.T) {
	cropped := func(b *gb, out string) []map[string]any {
		t.Helper()
		b.g.Outputs = []*ir.Value{{Name: out, Type: ir.Type{DType: tensor.Float32}}}
		opts := compile.DefaultOptions()
		log := buildlog.New(nil)
		if _, err := compile.Build(&ir.Model{Graph: b.g, Opsets: map[string]int64{"": 17}}, []byte("t"), "t", "test", opts, builtin.Registry(), log); err != nil {
			t.Fatal(err)
		}
		var recs []map[string]any
		for _, r := range log.Records {
			if r.Pass == "drop-padding-taps" && r.Event == "cropped" {
				recs = append(recs, r.Fields)
			}
		}
		return recs
	}
	dil := func(w []float32, d, pad int64) (*gb, string) {
		b := newGB([]int{1, 2, 6, 7})
		y := b.node("Conv", []string{"x", b.constant("w", []int{3, 2, 3, 3}, w...)}, "y",
			ints("dilations", d, d), ints("pads", pad, pad, pad, pad))
		return b, y
	}
	b, y := dil(nil, 8, 8)
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "Conv" {
		t.Fatalf("dilated Conv became %v", kinds)
	}
	if b, y = dil(nil, 8, 8); len(cropped(b, y)) != 1 {
		t.Error("the dilation-8 Conv over 6x7 was not cropped")
	}
	w := make([]float32, 54)
	for i := range w {
		w[i] = float32(i%5) - 2
	}
	w[0] = float32(math.Inf(1))
	if b, y = dil(w, 8, 8); len(cropped(b, y)) != 0 {
		t.Error("a Conv with an infinite weight was cropped")
	}
	if b, y = dil(nil, 1, 1); len(cropped(b, y)) != 0 {
		t.Error("a 3x3 Conv of pads 1 was cropped")
	}
	// A dynamic batch: the spatial sizes are enough.
	b, y = dil(nil, 8, 8)
	b.g.Inputs[0].Type.Shape[0] = ir.Dim{Value: -1, Param: "batch"}
	if len(cropped(b, y)) != 1 {
		t.Error("the dilation-8 Conv of a dynamic batch was not cropped")
	}
	// Dilation 4 on 6 rows: the outer taps are read by some outputs.
	b, y = dil(nil, 4, 4)
	if kinds := b.check(t, y, true); len(kinds) != 1 {
		t.Fatalf("dilation-4 Conv became %v", kinds)
	}
}
