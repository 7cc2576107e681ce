package compile_test

import (
	"testing"

	"github.com/vouchml/vouch/ir"
)

// TestFoldPadPool: a zero Pad of the spatial axes before an AveragePool
// becomes the pool's pads (count_include_pad), with the graph's bits, for
// Pad-11's pads input and Pad-2's attribute; a Pad of another value, of
// the channels, before a ceil-mode pool or read twice stays.
func TestFoldPadPool(t *testing.T) {
	pool := func(b *gb, p string, extra ...*ir.Attr) string {
		return b.node("AveragePool", []string{p}, "y", append([]*ir.Attr{ints("kernel_shape", 3, 3), ints("strides", 1, 1)}, extra...)...)
	}
	b := newGB([]int{2, 3, 7, 6})
	y := pool(b, b.node("Pad", []string{"x", b.int64s("pads", 0, 0, 1, 1, 0, 0, 1, 1)}, "p"))
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "AveragePool" {
		t.Fatalf("Pad + AveragePool became %v", kinds)
	}
	b = newGB([]int{1, 2, 9, 8})
	y = pool(b, b.node("Pad", []string{"x", b.int64s("pads", 0, 0, 2, 0, 0, 0, 1, 3), b.constant("v", []int{}, 0)}, "p"), ints("strides", 2, 3))
	if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "AveragePool" {
		t.Fatalf("uneven Pad + strided AveragePool became %v", kinds)
	}
	for name, build := range map[string]func(b *gb) string{
		"value 1": func(b *gb) string {
			return pool(b, b.node("Pad", []string{"x", b.int64s("pads", 0, 0, 1, 1, 0, 0, 1, 1), b.constant("v", []int{}, 1)}, "p"))
		},
		"channels": func(b *gb) string {
			return pool(b, b.node("Pad", []string{"x", b.int64s("pads", 0, 1, 1, 1, 0, 0, 1, 1)}, "p"))
		},
		"ceil mode": func(b *gb) string {
			return pool(b, b.node("Pad", []string{"x", b.int64s("pads", 0, 0, 1, 1, 0, 0, 1, 1)}, "p"), ints("strides", 2, 2), &ir.Attr{Name: "ceil_mode", Kind: ir.AttrInt, I: 1})
		},
		"read twice": func(b *gb) string {
			p := b.node("Pad", []string{"x", b.int64s("pads", 0, 0, 1, 1, 0, 0, 1, 1)}, "p")
			return b.node("Add", []string{pool(b, p), b.node("Slice", []string{p, b.int64s("st", 1, 1), b.int64s("en", 8, 7), b.int64s("ax", 2, 3)}, "s")}, "z")
		},
	} {
		b := newGB([]int{1, 3, 7, 6})
		y := build(b)
		kinds := b.check(t, y, true)
		if len(kinds) < 2 || kinds[0] != "Pad" {
			t.Errorf("%s: became %v, want the Pad kept", name, kinds)
		}
	}
}
