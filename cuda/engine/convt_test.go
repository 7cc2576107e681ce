package engine_test

import (
	"flag"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

func ctNode(inputs []string, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{Name: "ct", OpType: "ConvTranspose", Version: 11, Attrs: map[string]*ir.Attr{}, Inputs: inputs, Outputs: []string{"y"}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func intsAttr(name string, v ...int64) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v}
}

// ConvTranspose is placed on the GPU where vx_convt runs it (float32,
// 1-D or 2-D) and kept on the CPU with a reason that names what is
// missing otherwise.
func TestPlaceConvT(t *testing.T) {
	types := map[string]ir.Type{
		"x": ir.StaticType(tensor.Float32, []int{1, 8, 5, 5}), "w": ir.StaticType(tensor.Float32, []int{8, 4, 2, 2}),
		"b": ir.StaticType(tensor.Float32, []int{4}), "x1": ir.StaticType(tensor.Float32, []int{1, 8, 9}),
		"w1": ir.StaticType(tensor.Float32, []int{8, 4, 3}), "x3": ir.StaticType(tensor.Float32, []int{1, 8, 3, 3, 3}),
		"w3": ir.StaticType(tensor.Float32, []int{8, 4, 2, 2, 2}),
		"x4": ir.StaticType(tensor.Float32, []int{1, 8, 2, 3, 3, 3}), "w4": ir.StaticType(tensor.Float32, []int{8, 4, 1, 2, 2, 2}), "xd": ir.StaticType(tensor.Float64, []int{1, 8, 5, 5}),
		"bi": ir.StaticType(tensor.Int64, []int{4}), "xu": {DType: tensor.Float32},
		"xs": {DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Value: -1, Param: "batch"}, ir.Fixed(8), ir.Fixed(5), ir.Fixed(5)}},
	}
	for _, c := range []struct {
		name   string
		n      *ir.Node
		reason string // "": on the GPU
	}{
		{"2-D with bias", ctNode([]string{"x", "w", "b"}, intsAttr("strides", 2, 2)), ""},
		{"2-D without bias", ctNode([]string{"x", "w"}, intsAttr("pads", 1, 0, 0, 1), intsAttr("output_padding", 1, 0)), ""},
		{"2-D, an empty bias name", ctNode([]string{"x", "w", ""}), ""},
		{"symbolic batch", ctNode([]string{"xs", "w", "b"}, &ir.Attr{Name: "auto_pad", Kind: ir.AttrString, S: "SAME_UPPER"}), ""},
		{"1-D", ctNode([]string{"x1", "w1", "b"}, intsAttr("strides", 2), intsAttr("output_shape", 19)), ""},
		{"3-D", ctNode([]string{"x3", "w3"}, intsAttr("strides", 1, 2, 3)), ""},
		{"4-D", ctNode([]string{"x4", "w4"}), "a 4-D ConvTranspose (the GPU runs 1-D to 3-D)"},
		{"float64", ctNode([]string{"xd", "w"}), "ConvTranspose of float64 (the GPU runs float32)"},
		{"integer bias", ctNode([]string{"x", "w", "bi"}), "ConvTranspose of int64 (the GPU runs float32)"},
		{"rank unknown", ctNode([]string{"xu", "w"}), "ConvTranspose input 0 (xu) of a type unknown at build time"},
		{"type missing", ctNode([]string{"x", "v"}), "ConvTranspose input 1 (v) of a type unknown at build time"},
		{"ranks differ", ctNode([]string{"x", "w1"}), "ConvTranspose of rank 4 by weights of rank 3"},
		{"one input", ctNode([]string{"x"}), "ConvTranspose with 1 inputs"},
		{"bad auto_pad", ctNode([]string{"x", "w"}, &ir.Attr{Name: "auto_pad", Kind: ir.AttrString, S: "SAME"}), `ConvTranspose auto_pad "SAME"`},
	} {
		g := &ir.Graph{Nodes: []*ir.Node{c.n}}
		l := Place(g, types)[0]
		switch {
		case c.reason == "" && (l.Backend != plan.BackendCUDA || l.Kernel != kernels.ConvT):
			t.Errorf("%s: placed on %s %q (%s), want cuda %s", c.name, l.Backend, l.Kernel, l.Reason, kernels.ConvT)
		case c.reason != "" && (l.Backend != plan.BackendCPU || l.Reason != c.reason):
			t.Errorf("%s: placed on %s %q, reason %q; want the CPU, reason %q", c.name, l.Backend, l.Kernel, l.Reason, c.reason)
		}
	}
	// The family decides for ConvTranspose only: a Conv is still the main
	// switch's (vx_conv2d).
	conv := &ir.Node{Name: "c", OpType: "Conv", Version: 11, Attrs: map[string]*ir.Attr{}, Inputs: []string{"x", "w"}, Outputs: []string{"y"}}
	if l := Place(&ir.Graph{Nodes: []*ir.Node{conv}}, types)[0]; l.Kernel != kernels.Conv2D {
		t.Errorf("Conv placed as %+v", l)
	}
}

// ConvTGeometry gives kernel/nn's output shapes (checked against the CPU
// kernel on random attributes), its pads, and the tiled geometry exactly
// where kernel/nn's convTransposeTiled applies.
func TestConvTGeometry(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	checked := 0
	for i := 0; i < 400; i++ {
		rank := 1 + r.Intn(3)
		x, w := []int{1 + r.Intn(2), 2 * (1 + r.Intn(3))}, []int{0, 1 + r.Intn(3)}
		w[0] = x[1]
		var st, dil, pads, opad, osh []int64
		for range rank {
			x, w = append(x, 1+r.Intn(7)), append(w, 1+r.Intn(4))
			st, dil = append(st, int64(1+r.Intn(3))), append(dil, int64(1+r.Intn(2)))
			opad = append(opad, int64(r.Intn(2)))
			osh = append(osh, int64(r.Intn(20)))
		}
		for range 2 * rank {
			pads = append(pads, int64(r.Intn(3)))
		}
		attrs := []*ir.Attr{intsAttr("strides", st...), intsAttr("dilations", dil...), {Name: "group", Kind: ir.AttrInt, I: int64(1 + r.Intn(2))}}
		switch r.Intn(5) {
		case 0:
			attrs = append(attrs, intsAttr("output_shape", osh...))
		case 1:
			attrs = append(attrs, &ir.Attr{Name: "auto_pad", Kind: ir.AttrString, S: []string{"SAME_UPPER", "SAME_LOWER", "VALID"}[r.Intn(3)]})
		default:
			attrs = append(attrs, intsAttr("pads", pads...), intsAttr("output_padding", opad...))
		}
		n := ctNode([]string{"x", "w"}, attrs...)
		xt := tensor.From(make([]float32, tensor.NumElems(x)), x...)
		wt := tensor.From(make([]float32, tensor.NumElems(w)), w...)
		out, cpuErr := cpuRun(n, []*tensor.Tensor{xt, wt})
		g, err := ConvTGeometry(n, x, w)
		if (err != nil) != (cpuErr != nil) {
			t.Fatalf("%v by %v %v: GPU geometry error %v, CPU error %v", x, w, attrs, err, cpuErr)
		}
		if err != nil {
			continue
		}
		if got := ConvTShape(g); !slices.Equal(got, out[0].Shape) {
			t.Fatalf("%v by %v %v: GPU geometry %v, the CPU's output %v", x, w, attrs, got, out[0].Shape)
		}
		checked++
	}
	if checked < 200 {
		t.Fatalf("only %d valid geometries", checked)
	}
	for _, c := range []struct {
		name  string
		x, w  []int
		attrs []*ir.Attr
		tiled bool
		ph    int
	}{
		{"2x2/2", []int{1, 8, 5, 5}, []int{8, 4, 2, 2}, []*ir.Attr{intsAttr("strides", 2, 2)}, true, 0},
		{"3x2/(3,2)", []int{2, 3, 4, 5}, []int{3, 1, 3, 2}, []*ir.Attr{intsAttr("strides", 3, 2)}, true, 0},
		{"1x1", []int{1, 3, 4, 5}, []int{3, 2, 1, 1}, nil, true, 0},
		{"1-D 2/2", []int{1, 3, 5}, []int{3, 2, 2}, []*ir.Attr{intsAttr("strides", 2)}, false, 0},
		{"groups", []int{1, 4, 5, 5}, []int{4, 2, 2, 2}, []*ir.Attr{intsAttr("strides", 2, 2), {Name: "group", Kind: ir.AttrInt, I: 2}}, false, 0},
		{"stride 1", []int{1, 3, 4, 5}, []int{3, 2, 2, 2}, nil, false, 0},
		{"pad", []int{1, 3, 4, 5}, []int{3, 2, 2, 2}, []*ir.Attr{intsAttr("strides", 2, 2), intsAttr("pads", 1, 0, 1, 0)}, false, 1},
		{"output_padding", []int{1, 3, 4, 5}, []int{3, 2, 2, 2}, []*ir.Attr{intsAttr("strides", 2, 2), intsAttr("output_padding", 1, 0)}, false, 0},
		{"output_shape past the full result", []int{1, 3, 4, 5}, []int{3, 2, 3, 3}, []*ir.Attr{intsAttr("strides", 2, 2), intsAttr("output_shape", 12, 11)}, false, -1},
		{"SAME_LOWER", []int{1, 3, 4, 5}, []int{3, 2, 3, 3}, []*ir.Attr{intsAttr("strides", 2, 2), {Name: "auto_pad", Kind: ir.AttrString, S: "SAME_LOWER"}}, false, 1},
		{"SAME_UPPER, stride = kernel", []int{1, 3, 4, 5}, []int{3, 2, 2, 2}, []*ir.Attr{intsAttr("strides", 2, 2), {Name: "auto_pad", Kind: ir.AttrString, S: "SAME_UPPER"}}, true, 0},
	} {
		g, err := ConvTGeometry(ctNode([]string{"x", "w"}, c.attrs...), c.x, c.w)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if g.Tiled() != c.tiled || g.PH != c.ph {
			t.Errorf("%s: %+v: tiled %v, PH %d; want %v, %d", c.name, g, g.Tiled(), g.PH, c.tiled, c.ph)
		}
	}
}

// Shapes and attributes that do not make a ConvTranspose are errors
// naming what is wrong, before anything reaches a device.
func TestConvTGeometryErrors(t *testing.T) {
	x, w := []int{1, 4, 5, 5}, []int{4, 2, 3, 3}
	for _, c := range []struct {
		name  string
		x, w  []int
		attrs []*ir.Attr
		want  string
	}{
		{"rank 6", []int{1, 4, 2, 2, 2, 2}, []int{4, 2, 1, 1, 1, 1}, nil, "the GPU runs 1-D to 3-D"},
		{"ranks differ", x, []int{4, 2, 3}, nil, "the GPU runs 1-D to 3-D"},
		{"channels", x, []int{3, 2, 3, 3}, nil, "input channels"},
		{"group", x, w, []*ir.Attr{{Name: "group", Kind: ir.AttrInt, I: 3}}, "divisible by group 3"},
		{"strides length", x, w, []*ir.Attr{intsAttr("strides", 2)}, "strides has 1 values, want 2"},
		{"pads length", x, w, []*ir.Attr{intsAttr("pads", 1, 1)}, "pads has 2 values, want 4"},
		{"zero stride", x, w, []*ir.Attr{intsAttr("strides", 0, 1)}, "must be positive"},
		{"huge dilation", x, w, []*ir.Attr{intsAttr("dilations", 1<<40, 1)}, "out of range"},
		{"output_shape length", x, w, []*ir.Attr{intsAttr("output_shape", 3)}, "output_shape [3], want 2 spatial values"},
		{"negative output", x, w, []*ir.Attr{intsAttr("pads", 4, 4, 4, 4)}, "negative output size in spatial dimension 0"},
	} {
		_, err := ConvTGeometry(ctNode([]string{"x", "w"}, c.attrs...), c.x, c.w)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
	if sh := ConvTShape(mustGeom(t, []int{2, 3, 7}, []int{3, 5, 2}, intsAttr("strides", 2))); fmt.Sprint(sh) != "[2 5 14]" {
		t.Errorf("1-D output shape %v", sh)
	}
	g := mustGeom(t, []int{1, 3, 2, 4, 5}, []int{3, 2, 3, 1, 2}, intsAttr("strides", 3, 1, 2), intsAttr("pads", 1, 0, 0, 0, 0, 1))
	if sh := ConvTShape(g); fmt.Sprint(sh) != "[1 2 5 4 9]" || g.PD != 1 || g.PEW != 1 || g.KD != 3 || g.SW != 2 {
		t.Errorf("3-D output shape %v, geometry %+v", sh, g)
	}
}

func mustGeom(t *testing.T, x, w []int, attrs ...*ir.Attr) exact.ConvTGeom {
	t.Helper()
	g, err := ConvTGeometry(ctNode([]string{"x", "w"}, attrs...), x, w)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The ONNX node tests' ConvTranspose models (1-D to 3-D, pads, dilations,
// output_shape, auto_pad, kernel_shape) are one ConvTranspose layer each,
// placed on the GPU.
func TestPlaceConvTNodeTests(t *testing.T) {
	dir := "/usr/share/libonnx-testdata/data/node"
	for _, name := range []string{"test_convtranspose", "test_convtranspose_1d", "test_convtranspose_3d", "test_convtranspose_autopad_same",
		"test_convtranspose_dilations", "test_convtranspose_kernel_shape", "test_convtranspose_output_shape", "test_convtranspose_pad",
		"test_convtranspose_pads", "test_convtranspose_with_kernel"} {
		res := compileModel(t, filepath.Join(dir, name, "model.onnx"))
		p := Place(res.Graph, res.Graph.Types)
		if len(p) != 1 || p[0].Backend != plan.BackendCUDA || p[0].Kernel != kernels.ConvT {
			t.Errorf("%s: placed %+v, want one layer on cuda (%s)", name, p, kernels.ConvT)
		}
	}
}

var flagZoo = flag.String("zoo", "", "the model zoo's directory (scripts/make-zoo.py): TestPlaceZooConvT checks unet_small's placement")

// unet_small (the zoo's U-Net: ConvTranspose up-convolutions, Concat
// skips) is all on the GPU, its three ConvTranspose layers on vx_convt.
func TestPlaceZooConvT(t *testing.T) {
	if *flagZoo == "" {
		t.Skip("no -zoo directory")
	}
	res := compileModel(t, filepath.Join(*flagZoo, "unet_small", "model.onnx"))
	ct := 0
	for i, l := range Place(res.Graph, res.Graph.Types) {
		if l.Backend != plan.BackendCUDA {
			t.Errorf("layer %s (%s) on the CPU: %s", l.Layer, res.Graph.Nodes[i].OpType, l.Reason)
		}
		if res.Graph.Nodes[i].OpType == "ConvTranspose" && l.Kernel == kernels.ConvT {
			ct++
		}
	}
	if ct != 3 {
		t.Errorf("%d ConvTranspose layers on %s, want 3", ct, kernels.ConvT)
	}
}
