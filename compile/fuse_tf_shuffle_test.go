package compile_test

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
)

// TestFoldChannelShuffle: ShuffleNet's Concat, Reshape to [N, g, c, H, W],
// Transpose [0, 2, 1, 3, 4] and Reshape back becomes one Concat with the
// graph's bits (2 and 3 groups, batch 1 and 3); a Transpose of another
// perm, or inputs of unequal channel counts, stay.
func TestFoldChannelShuffle(t *testing.T) {
	shuffle := func(b *gb, n int, xs []string, c int64, perm ...int64) string {
		cat := b.node("Concat", xs, "cat", &ir.Attr{Name: "axis", Kind: ir.AttrInt, I: 1})
		g := int64(len(xs))
		r := b.node("Reshape", []string{cat, b.int64s("s1", int64(n), g, c, 5, 6)}, "r1")
		tr := b.node("Transpose", []string{r}, "t", ints("perm", perm...))
		return b.node("Relu", []string{b.node("Reshape", []string{tr, b.int64s("s2", int64(n), -1, 5, 6)}, "r2")}, "y")
	}
	for _, tc := range []struct{ n, g int }{{1, 2}, {3, 2}, {1, 3}} {
		b := newGB([]int{tc.n, 4, 5, 6})
		var xs []string
		for j := 0; j < tc.g; j++ {
			xs = append(xs, b.node("Neg", []string{"x"}, "x"+string(rune('a'+j))))
		}
		kinds := b.check(t, shuffle(b, tc.n, xs, 4, 0, 2, 1, 3, 4), true)
		if slices.Contains(kinds, "Transpose") || !slices.Contains(kinds, "Concat") {
			t.Errorf("batch %d, %d groups: layers %v, want the Transpose folded", tc.n, tc.g, kinds)
		}
	}
	b := newGB([]int{1, 4, 5, 6})
	kinds := b.check(t, shuffle(b, 1, []string{b.node("Neg", []string{"x"}, "xa"), b.node("Abs", []string{"x"}, "xb")}, 4, 0, 1, 2, 4, 3), true)
	if !slices.Contains(kinds, "Transpose") {
		t.Errorf("another perm: layers %v, want the Transpose kept", kinds)
	}
	b = newGB([]int{1, 4, 5, 6}) // channels 4, 2, 2 shuffled in 2 groups of 4
	xa := b.node("Neg", []string{"x"}, "xa")
	xb := b.node("Slice", []string{"x", b.int64s("st", 0), b.int64s("en", 2), b.int64s("ax", 1)}, "xb")
	xc := b.node("Slice", []string{"x", b.int64s("st2", 2), b.int64s("en2", 4), b.int64s("ax2", 1)}, "xc")
	cat := b.node("Concat", []string{xa, xb, xc}, "cat", &ir.Attr{Name: "axis", Kind: ir.AttrInt, I: 1})
	r := b.node("Reshape", []string{cat, b.int64s("s1", 1, 2, 4, 5, 6)}, "r1")
	tr := b.node("Transpose", []string{r}, "t", ints("perm", 0, 2, 1, 3, 4))
	y := b.node("Relu", []string{b.node("Reshape", []string{tr, b.int64s("s2", 1, -1, 5, 6)}, "r2")}, "y")
	if kinds := b.check(t, y, true); !slices.Contains(kinds, "Transpose") {
		t.Errorf("unequal inputs: layers %v, want the Transpose kept", kinds)
	}
}
