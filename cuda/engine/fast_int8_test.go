package engine_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// inputScales gives every Conv and Gemm of g, ConvChain bodies included,
// a scale for its data input (what a calibration of all of them gives).
func inputScales(g *ir.Graph) map[string]float32 {
	s := map[string]float32{}
	var walk func(nodes []*ir.Node)
	walk = func(nodes []*ir.Node) {
		for _, n := range nodes {
			if b := fused.BaseOf(n); b == "Conv" || b == "Gemm" {
				s[n.Input(0)] = 0.05
			}
			if a := n.Attrs["body"]; a != nil && a.G != nil {
				walk(a.G.Nodes)
			}
		}
	}
	walk(g.Nodes)
	return s
}

// With a scale for every input, ResNet-18's convolutions (the stem, every
// body convolution of its chain) and its classifier get INT8 kernels of
// the 16-bit kernels' tiles; a body convolution without a scale stays
// exact inside the chain, the stem without one stays exact with a note.
func TestPlaceFastInt8ResNet(t *testing.T) {
	res := build(t, "resnet18")
	g := res.Graph
	exact := Place(g, g.Types)
	fp16, _ := PlaceFast(g, g.Types, FastOptions{Precision: plan.FP16})
	sc := inputScales(g)
	got, notes := PlaceFast(g, g.Types, FastOptions{Precision: plan.Int8, Scales: sc})
	if len(notes) != 0 {
		t.Errorf("notes: %v", notes)
	}
	nfast := 0
	for i, l := range got {
		want := exact[i].Kernel
		if strings.HasPrefix(fp16[i].Kernel, "fast.fp16.") {
			want = strings.Replace(fp16[i].Kernel, "fast.fp16.", "fast.int8.", 1)
			nfast++
		}
		if l.Layer != exact[i].Layer || l.Backend != exact[i].Backend || strings.ReplaceAll(l.Kernel, " x=3d4ccccd", "") != want {
			t.Errorf("layer %d: %+v, want kernel %q", i, l, want)
		}
	}
	if nfast != 3 {
		t.Errorf("%d int8 layers, want the stem, the chain and the classifier", nfast)
	}
	chain := "/layer1/layer1.0/conv1/Conv"
	body := g.Nodes[slices.IndexFunc(g.Nodes, func(n *ir.Node) bool { return n.Name == chain })].Attrs["body"].G
	delete(sc, g.Nodes[0].Input(0)) // the stem's input
	second := body.Nodes[1]
	if fused.BaseOf(second) != "Conv" {
		t.Fatalf("body node 1 is %s", second.OpType)
	}
	delete(sc, second.Input(0))
	got, notes = PlaceFast(g, g.Types, FastOptions{Precision: plan.Int8, Scales: sc})
	if got[0].Kernel != exact[0].Kernel || len(notes) != 1 || notes[0].Layer != g.Nodes[0].Name || !strings.Contains(notes[0].Reason, "no int8 scale for its input") {
		t.Errorf("stem without a scale: %+v, notes %v", got[0], notes)
	}
	for i, l := range got {
		if l.Layer != chain {
			continue
		}
		tiles := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l.Kernel, "fast.int8.conv(chain "), ")"), ",")
		if len(tiles) != len(body.Nodes) || tiles[1] != "exact" || !strings.HasSuffix(tiles[0], " x=3d4ccccd") {
			t.Errorf("chain with body conv 1 unscaled: %q (fp16 %q)", l.Kernel, fp16[i].Kernel)
		}
	}
	// fp16 by default, int8 for the classifier alone.
	got, _ = PlaceFast(g, g.Types, FastOptions{Precision: plan.FP16, Layers: map[string]plan.Precision{"/fc/Gemm": plan.Int8}, Scales: sc})
	for _, l := range got {
		if l.Layer == "/fc/Gemm" && l.Kernel != "fast.int8.gemm(64x32 x=3d4ccccd)" || l.Layer == chain && !strings.HasPrefix(l.Kernel, "fast.fp16.conv(chain ") {
			t.Errorf("%s: %q", l.Layer, l.Kernel)
		}
	}
}

// Layer by layer: what the INT8 kernels take, and why the rest stays exact.
func TestPlaceFastInt8Ops(t *testing.T) {
	f4 := ir.StaticType(tensor.Float32, []int{1, 8, 16, 16})
	f2 := ir.StaticType(tensor.Float32, []int{4, 8})
	ints := func(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }
	one := func(name string, v int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
	w := tensor.From(make([]float32, 32*8*3*3), 32, 8, 3, 3)
	big := tensor.From(make([]float32, 2*131080), 2, 131080)
	for _, c := range []struct {
		name   string
		op     string
		attrs  []*ir.Attr
		inputs []string
		scales map[string]float32
		kernel string // the int8 kernel, or "" (then note is in the reason)
		note   string
	}{
		{"conv", "Conv", []*ir.Attr{ints("pads", 1, 1, 1, 1)}, []string{"x", "w", "b"}, map[string]float32{"x": 0.1}, "fast.int8.conv(64x64 x=3dcccccd)", ""},
		{"conv unscaled", "Conv", nil, []string{"x", "w"}, map[string]float32{"v": 0.1}, "", `no int8 scale for its input "x"`},
		{"conv zero scale", "Conv", nil, []string{"x", "w"}, map[string]float32{"x": 0}, "", "int8 activation scale 0"},
		{"conv NaN scale", "Conv", nil, []string{"x", "w"}, map[string]float32{"x": float32(math.NaN())}, "", "int8 activation scale NaN"},
		{"conv grouped", "Conv", []*ir.Attr{one("group", 2)}, []string{"x", "wg"}, map[string]float32{"x": 0.1}, "", "Conv in 2 groups"},
		{"gemm", "Gemm", []*ir.Attr{one("transB", 1)}, []string{"v", "bt", "c"}, map[string]float32{"v": 0.1}, "fast.int8.gemm(64x32 x=3dcccccd)", ""},
		{"gemm too long", "Gemm", []*ir.Attr{one("transB", 1)}, []string{"v", "big"}, map[string]float32{"v": 0.1}, "", "reduction of 131080"},
		{"matmul", "MatMul", nil, []string{"v", "bm"}, map[string]float32{"v": 0.1}, "", "int8 has no MatMul kernel"},
	} {
		n := &ir.Node{Name: c.name, OpType: c.op, Version: 13, Attrs: map[string]*ir.Attr{}, Inputs: c.inputs, Outputs: []string{"y"}}
		for _, a := range c.attrs {
			n.Attrs[a.Name] = a
		}
		g := &ir.Graph{Nodes: []*ir.Node{n}, Initializers: map[string]*tensor.Tensor{"w": w, "wg": tensor.From(make([]float32, 32*4*3*3), 32, 4, 3, 3),
			"b": tensor.From(make([]float32, 32), 32), "bt": tensor.From(make([]float32, 16*8), 16, 8), "bm": tensor.From(make([]float32, 8*16), 8, 16),
			"c": tensor.From(make([]float32, 16), 16), "big": big}}
		types := map[string]ir.Type{"x": f4, "v": f2, "y": ir.StaticType(tensor.Float32, []int{1, 32, 16, 16})}
		if c.name == "gemm too long" {
			types["v"] = ir.StaticType(tensor.Float32, []int{4, 131080})
		}
		for k, v := range g.Initializers {
			types[k] = ir.TensorType(v)
		}
		got, notes := PlaceFast(g, types, FastOptions{Precision: plan.Int8, Scales: c.scales})
		switch {
		case c.kernel != "" && (got[0].Kernel != c.kernel || len(notes) != 0):
			t.Errorf("%s: %+v %v, want %q", c.name, got[0], notes, c.kernel)
		case c.kernel == "" && (len(notes) != 1 || !strings.Contains(notes[0].Reason, c.note) || strings.HasPrefix(got[0].Kernel, "fast.")):
			t.Errorf("%s: %+v notes %v, want a note with %q", c.name, got[0], notes, c.note)
		}
	}
}
