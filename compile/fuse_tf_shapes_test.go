package compile_test

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// TestFoldShapesFixpoint: Swin's window padding in small. The pads come
// from Shape(x) (folded by the first rounds), and a Reshape's target from
// Shape of the Pad's output, which is static only once the pads are
// constants: the fixpoint folds it too, the all-zero Pad goes, and the plan
// has the graph's bits with no shape computation left.
func TestFoldShapesFixpoint(t *testing.T) {
	for _, w := range []int{7, 5} { // 7: the pads are 0, the Pad goes; 5: it pads 2 columns
		b := newGB([]int{1, 2, 3, w})
		width := b.node("Gather", []string{b.node("Shape", []string{"x"}, "s"), b.int64s("i3", 3)}, "w")
		padW := b.node("Mod", []string{b.node("Sub", []string{b.int64s("seven", 7), b.node("Mod", []string{width, b.int64s("m7", 7)}, "wm")}, "d"), b.int64s("m7b", 7)}, "pw")
		pads := b.node("Concat", []string{b.int64s("z7", 0, 0, 0, 0, 0, 0, 0), padW}, "pads", &ir.Attr{Name: "axis", Kind: ir.AttrInt, I: 0})
		p := b.node("Pad", []string{"x", pads}, "p")
		pw := b.node("Gather", []string{b.node("Shape", []string{p}, "ps"), b.int64s("j3", 3)}, "pwid")
		target := b.node("Concat", []string{b.int64s("lead", 1, 6, -1), pw}, "tgt", &ir.Attr{Name: "axis", Kind: ir.AttrInt, I: 0})
		y := b.node("Relu", []string{b.node("Reshape", []string{p, target}, "r")}, "y")
		kinds := b.check(t, y, true)
		for _, k := range kinds {
			if k == "Shape" || k == "Gather" || k == "Concat" || k == "Mod" {
				t.Fatalf("width %d: a shape computation is left: %v", w, kinds)
			}
		}
		if hasPad := slices.Contains(kinds, "Pad"); hasPad != (w == 5) {
			t.Fatalf("width %d: layers %v", w, kinds)
		}
	}
}

// TestDropInferenceDropout: a Dropout of constant ratio 0 (in training
// mode too) or of constant training_mode false, whose mask is unread, goes;
// one whose mask is read stays.
func TestDropInferenceDropout(t *testing.T) {
	dropout := func(b *gb, ratio float32, training bool, mask string) string {
		b.g.Initializers["ratio"] = tensor.Scalar(ratio)
		b.g.Initializers["training"] = tensor.Scalar(training)
		b.g.Nodes = append(b.g.Nodes, &ir.Node{Name: "drop", OpType: "Dropout", Version: 13,
			Inputs: []string{"x", "ratio", "training"}, Outputs: []string{"d", mask}, Attrs: map[string]*ir.Attr{}})
		return "d"
	}
	for _, c := range []struct {
		ratio    float32
		training bool
	}{{0, true}, {0, false}, {0.25, false}} {
		b := newGB([]int{2, 3, 4})
		y := b.node("Relu", []string{dropout(b, c.ratio, c.training, "mask")}, "y")
		if kinds := b.check(t, y, true); len(kinds) != 1 || kinds[0] != "Relu" {
			t.Errorf("ratio %g training %v: layers %v, want the Dropout gone", c.ratio, c.training, kinds)
		}
	}
	b := newGB([]int{2, 3, 4})
	d := dropout(b, 0, true, "mask")
	y := b.node("Where", []string{"mask", b.node("Relu", []string{d}, "r"), "x"}, "y")
	if kinds := b.check(t, y, true); !slices.Contains(kinds, "Dropout") {
		t.Errorf("a Dropout whose mask is read became %v", kinds)
	}
}
