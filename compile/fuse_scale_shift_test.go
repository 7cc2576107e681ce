package compile_test

import (
	"testing"

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
	y = b.node("AveragePool", []string{p}, "y", ints("kernel_shape", 2, 2), ints("strides", 2, 2))
	if kinds := b.check(t, y, true); len(kinds) != 2 || kinds[0] != "Pad" {
		t.Fatalf("Pad + AveragePool became %v", kinds)
	}
}

// int64s adds an int64 initializer.
func (b *gb) int64s(name string, v ...int64) string {
	b.g.Initializers[name] = tensor.From(v, len(v))
	return name
}
