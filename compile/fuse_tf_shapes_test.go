package compile_test

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
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

// TestFoldDimReshapes: with a symbolic batch, a Reshape target assembled
// from Shape(x)[0] and constants, and the shape computations that measure
// the Reshape's output (its -1 dimension, halved into a Slice's end), fold:
// the plan has no Shape, Gather, Unsqueeze or Concat layer and gives the
// graph's bits at batch 1 and 3.
func TestFoldDimReshapes(t *testing.T) {
	b := newGB([]int{1, 4, 5, 6})
	b.g.Inputs[0].Type.Shape[0] = ir.Dim{Value: -1, Param: "N"}
	n := b.node("Unsqueeze", []string{b.node("Gather", []string{b.node("Shape", []string{"x"}, "s"), b.tensorScalar("i0", 0)}, "n0"), b.int64s("ax0", 0)}, "n")
	tgt := b.node("Concat", []string{n, b.int64s("rest", 2, 2, -1)}, "tgt", &ir.Attr{Name: "axis", Kind: ir.AttrInt, I: 0})
	r := b.node("Reshape", []string{"x", tgt}, "r")
	ch := b.node("Gather", []string{b.node("Shape", []string{r}, "rs"), b.int64s("i3", 3)}, "ch") // the -1, 4·5·6/(2·2)
	half := b.node("Div", []string{ch, b.int64s("two", 2)}, "half")
	y := b.node("Relu", []string{b.node("Slice", []string{r, b.int64s("st", 0), half, b.int64s("ax", 3)}, "sl")}, "y")
	b.g.Outputs = []*ir.Value{{Name: y, Type: ir.Type{DType: tensor.Float32}}}
	ref, err := exec.New(b.g, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	opts := compile.DefaultOptions()
	opts.Tactics = "heuristic"
	res, err := compile.Build(&ir.Model{Graph: b.g, Opsets: map[string]int64{"": 17}}, []byte("t"), "t", "test", opts, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range p.Header.Graph.Layers {
		if k := l.Kind; k == "Shape" || k == "Gather" || k == "Unsqueeze" || k == "Concat" || k == "Div" {
			t.Fatalf("a shape computation is left: %s (%s)", l.Name, k)
		}
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 3} {
		x := tensor.New(tensor.Float32, batch, 4, 5, 6)
		for i, d := 0, x.Data.([]float32); i < len(d); i++ {
			d[i] = float32(b.r.NormFloat64())
		}
		want, err := ref.Run(map[string]*tensor.Tensor{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ex.Run(map[string]*tensor.Tensor{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		if !sameBits(got[y], want[y]) {
			t.Fatalf("batch %d: the plan's output differs from the graph's", batch)
		}
	}
}

// tensorScalar adds a scalar int64 initializer.
func (b *gb) tensorScalar(name string, v int64) string {
	b.g.Initializers[name] = tensor.Scalar(v)
	return name
}
