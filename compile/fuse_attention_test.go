package compile_test

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
)

// TestFuseAttentionMasks: scaled dot-product attention whose scores take
// several additive masks with Reshapes between them (Swin's shifted
// windows: a relative-position bias, then a window mask added in a view of
// five dimensions), or a mask of one value a row, or a mask computed after
// the first MatMul (ir.Verify's topological sort puts it first), becomes
// one Attention layer with the graph's bits.
func TestFuseAttentionMasks(t *testing.T) {
	const nb, nw, h, s = 2, 4, 3, 7 // batches of windows, windows, heads, tokens (= head size)
	for _, c := range []string{"swin", "row-mask", "late-mask", "div"} {
		b := newGB([]int{nb * nw, h, s, s})
		kt := b.node("Transpose", []string{"x"}, "kt", ints("perm", 0, 1, 3, 2))
		sc := b.node("MatMul", []string{"x", kt}, "sc")
		switch c {
		case "swin":
			u := b.node("Add", []string{sc, b.constant("bias", []int{1, h, s, s})}, "u")
			v5 := b.node("Reshape", []string{u, b.int64s("shape5", nb, nw, h, s, s)}, "v5")
			w5 := b.node("Add", []string{b.constant("mask", []int{1, nw, 1, s, s}), v5}, "w5")
			sc = b.node("Reshape", []string{w5, b.int64s("shape4", -1, h, s, s)}, "w")
		case "row-mask":
			sc = b.node("Add", []string{sc, b.constant("rows", []int{nb * nw, 1, s, 1})}, "u")
		case "late-mask":
			sc = b.node("Add", []string{sc, b.node("Sigmoid", []string{"x"}, "sig")}, "u")
		case "div":
			sc = b.node("Div", []string{sc, b.constant("scale", nil, 2.5)}, "t")
			sc = b.node("Add", []string{sc, b.constant("bias", []int{h, s, s})}, "u")
			sc = b.node("Add", []string{b.constant("bias2", []int{s}), sc}, "u2")
		}
		p := b.node("Softmax", []string{sc}, "p", &ir.Attr{Name: "axis", Kind: ir.AttrInt, I: -1})
		y := b.node("Relu", []string{b.node("MatMul", []string{p, "x"}, "pv")}, "y")
		kinds := b.check(t, y, true)
		if !slices.Contains(kinds, "Attention") || slices.Contains(kinds, "Softmax") || slices.Contains(kinds, "Reshape") {
			t.Errorf("%s: layers %v, want the attention fused", c, kinds)
		}
	}
}
