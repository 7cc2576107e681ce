package engine_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// A ResNet's convolutions (its stem, every body convolution of its
// ConvChain) and its classifier become fast kernels; pools and views keep
// their exact kernels; nothing gets a note.
func TestPlaceFastResNet(t *testing.T) {
	res := build(t, "resnet18")
	g := res.Graph
	exact := Place(g, g.Types)
	got, notes := PlaceFast(g, g.Types, FastOptions{Precision: plan.FP16})
	if len(notes) != 0 {
		t.Errorf("notes: %v", notes)
	}
	want := map[string]string{
		"/conv1/Conv":                "fast.fp16.conv(64x64)",
		"/maxpool/MaxPool":           "vx_maxpool2d",
		"/avgpool/GlobalAveragePool": "vx_global_avg",
		"/Flatten":                   "view",
		"/fc/Gemm":                   "fast.fp16.gemm(64x32)",
		// layer1 (64 channels, 56x56), layer2 (128, 28x28: wide), layer3
		// and layer4 (14x14 and 7x7: 64 columns), each with its
		// downsampling convolution.
		"/layer1/layer1.0/conv1/Conv": "fast.fp16.conv(chain " + strings.Repeat("64x64,", 4) +
			strings.TrimSuffix(strings.Repeat("128x64,", 15), ",") + ")",
	}
	for i, l := range got {
		if l.Layer != exact[i].Layer || l.Backend != exact[i].Backend {
			t.Errorf("layer %d: %+v, exact %+v", i, l, exact[i])
		}
		if w, ok := want[l.Layer]; !ok || l.Kernel != w {
			t.Errorf("%s: kernel %q, want %q", l.Layer, l.Kernel, w)
		}
	}
	// bf16 names its kernels so; a layer set to fp32 keeps its exact
	// kernel; a pool asked for fp16 says why it stays exact.
	got, notes = PlaceFast(g, g.Types, FastOptions{Precision: fastBF16, Layers: map[string]plan.Precision{"/fc/Gemm": plan.FP32, "/maxpool/MaxPool": plan.FP16}})
	for i, l := range got {
		switch {
		case l.Layer == "/fc/Gemm" || l.Layer == "/maxpool/MaxPool":
			if l.Kernel != exact[i].Kernel {
				t.Errorf("%s: %q, want the exact %q", l.Layer, l.Kernel, exact[i].Kernel)
			}
		case strings.HasPrefix(want[l.Layer], "fast."):
			if l.Kernel != strings.Replace(want[l.Layer], "fast.fp16.", "fast.bf16.", 1) {
				t.Errorf("%s: %q in bf16", l.Layer, l.Kernel)
			}
		}
	}
	if len(notes) != 1 || notes[0].Layer != "/maxpool/MaxPool" || !strings.Contains(notes[0].Reason, "MaxPool has no fast kernel") {
		t.Errorf("notes %v, want one for /maxpool/MaxPool", notes)
	}
	// int8 has no kernel yet: the exact placement, a note per matrix
	// layer (the stem, the chain, the classifier).
	got, notes = PlaceFast(g, g.Types, FastOptions{Precision: plan.Int8})
	if !slices.Equal(got, exact) {
		t.Errorf("int8 placement differs from the exact one")
	}
	if len(notes) != 3 {
		t.Errorf("int8 notes %v, want 3", notes)
	}
	// No precision: the exact placement, no notes.
	if got, notes = PlaceFast(g, g.Types, FastOptions{}); !slices.Equal(got, exact) || len(notes) != 0 {
		t.Errorf("no precision: %v %v", got, notes)
	}
}

const fastBF16 = plan.Precision("bf16")

// The placement depends on the layers, not on the batch the value types
// carry: batch 1, 7, 256 and a symbolic batch give the same kernels.
func TestPlaceFastBatchFree(t *testing.T) {
	for _, name := range []string{"resnet18", "breast_cancer_mlp", "digits_cnn"} {
		res := build(t, name)
		g := res.Graph
		var first []plan.Placement
		for _, b := range []ir.Dim{{Value: 1}, {Value: 7}, {Value: 256}, {Value: -1, Param: "batch"}} {
			types := maps.Clone(g.Types)
			for k, ty := range types {
				if ty.RankKnown && len(ty.Shape) > 1 && ty.DType == tensor.Float32 && g.Initializers[k] == nil {
					ty.Shape = append([]ir.Dim{b}, ty.Shape[1:]...)
					types[k] = ty
				}
			}
			got, _ := PlaceFast(g, types, FastOptions{Precision: plan.FP16})
			if first == nil {
				first = got
				fast := 0
				for _, l := range got {
					if strings.HasPrefix(l.Kernel, "fast.") {
						fast++
					}
				}
				if fast == 0 {
					t.Errorf("%s: no fast layer", name)
				}
				continue
			}
			if !slices.Equal(got, first) {
				t.Errorf("%s: batch %v changes the placement:\n%v\n%v", name, b, got, first)
			}
		}
	}
}

// The MLP's three Gemms (two fused with Relu) are fast; its Softmax is not.
func TestPlaceFastMLP(t *testing.T) {
	res := build(t, "breast_cancer_mlp")
	got, notes := PlaceFast(res.Graph, res.Graph.Types, FastOptions{Precision: plan.FP16})
	var kinds []string
	for _, l := range got {
		kinds = append(kinds, l.Kernel)
	}
	want := []string{"fast.fp16.gemm(64x32)", "fast.fp16.gemm(64x32)", "fast.fp16.gemm(64x32)", "vx_softmax"}
	if !slices.Equal(kinds, want) || len(notes) != 0 {
		t.Errorf("kernels %q notes %v, want %q", kinds, notes, want)
	}
	// The placement is one plan.AddGPU takes: each fast layer states its
	// kernel's precision, the exact one none.
	for _, l := range got {
		if want := plan.Precision(""); l.Fast() && l.Precision != plan.FP16 || !l.Fast() && l.Precision != want {
			t.Errorf("layer %s (%s): precision %q", l.Layer, l.Kernel, l.Precision)
		}
	}
	sec := plan.GPU{Device: "cuda", Mode: plan.ModeFast, Arch: "sm_90", Layers: got,
		Kernels: plan.GPUKernels{Source: "fast.cu", SourceSHA256: strings.Repeat("ab", 32), PTXSHA256: strings.Repeat("ab", 32), CubinSHA256: strings.Repeat("ab", 32)}}
	b, err := plan.AddGPU(res.Plan, sec, []byte("image"))
	if err != nil {
		t.Fatalf("AddGPU of PlaceFast's placement: %v", err)
	}
	if p, err := plan.Decode(b); err != nil || p.Precision() != plan.FP16 {
		t.Fatalf("the fast plan: %v, label %v", err, p.Precision())
	}
}

// Layer by layer: what a fast kernel takes, and why the rest stays exact.
func TestPlaceFastOps(t *testing.T) {
	f4 := ir.StaticType(tensor.Float32, []int{1, 8, 16, 16})
	f2 := ir.StaticType(tensor.Float32, []int{4, 8})
	ints := func(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }
	one := func(name string, v int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v} }
	w := tensor.From(make([]float32, 32*8*3*3), 32, 8, 3, 3)
	wg := tensor.From(make([]float32, 32*4*3*3), 32, 4, 3, 3)
	for _, c := range []struct {
		name   string
		op     string
		attrs  []*ir.Attr
		inputs []string
		kernel string // the fast kernel, or "" (then note is the reason's start)
		note   string
	}{
		{"conv", "Conv", []*ir.Attr{ints("pads", 1, 1, 1, 1)}, []string{"x", "w", "b"}, "fast.fp16.conv(64x64)", ""},
		{"conv strided", "Conv", []*ir.Attr{ints("strides", 2, 2)}, []string{"x", "w"}, "fast.fp16.conv(64x64)", ""},
		{"conv grouped", "Conv", []*ir.Attr{one("group", 2)}, []string{"x", "wg"}, "", "Conv in 2 groups"},
		{"conv weights computed", "Conv", nil, []string{"x", "x"}, "", "Conv whose weights are not a constant"},
		{"gemm", "Gemm", []*ir.Attr{one("transB", 1)}, []string{"v", "bt", "c"}, "fast.fp16.gemm(64x32)", ""},
		{"gemm full C", "Gemm", []*ir.Attr{one("transB", 1)}, []string{"v", "bt", "cfull"}, "", "Gemm whose C is not a constant row"},
		{"matmul", "MatMul", nil, []string{"v", "bm"}, "fast.fp16.matmul(64x64)", ""},
		{"matmul of activations", "MatMul", nil, []string{"x", "x"}, "", "MatMul whose B is not a constant"},
	} {
		n := &ir.Node{Name: c.name, OpType: c.op, Version: 13, Attrs: map[string]*ir.Attr{}, Inputs: c.inputs, Outputs: []string{"y"}}
		for _, a := range c.attrs {
			n.Attrs[a.Name] = a
		}
		g := &ir.Graph{Nodes: []*ir.Node{n}, Initializers: map[string]*tensor.Tensor{"w": w, "wg": wg, "b": tensor.From(make([]float32, 32), 32),
			"bt": tensor.From(make([]float32, 16*8), 16, 8), "bm": tensor.From(make([]float32, 8*16), 8, 16),
			"c": tensor.From(make([]float32, 16), 16), "cfull": tensor.From(make([]float32, 4*16), 4, 16)}}
		types := map[string]ir.Type{"x": f4, "v": f2, "y": ir.StaticType(tensor.Float32, []int{1, 32, 16, 16})}
		for k, v := range g.Initializers {
			types[k] = ir.TensorType(v)
		}
		got, notes := PlaceFast(g, types, FastOptions{Precision: plan.FP16})
		switch {
		case c.kernel != "" && (got[0].Kernel != c.kernel || len(notes) != 0):
			t.Errorf("%s: %+v %v, want %q", c.name, got[0], notes, c.kernel)
		case c.kernel == "" && (len(notes) != 1 || !strings.HasPrefix(notes[0].Reason, c.note) || strings.HasPrefix(got[0].Kernel, "fast.")):
			t.Errorf("%s: %+v notes %v, want a note %q", c.name, got[0], notes, c.note)
		}
	}
}

// FastSection's mode follows the placement: "fast" with a fast layer,
// "exact" without; the kernels are the image's.
func TestFastSection(t *testing.T) {
	res := build(t, "breast_cancer_mlp")
	img := fakeImage("sm_90")
	env := Env{Device: h200, Release: "580.159.04"}
	sec, notes := FastSection(res.Graph, res.Graph.Types, img, env, FastOptions{Precision: plan.FP16})
	if sec.Mode != "fast" || len(notes) != 0 || sec.GPULayers() != 4 || sec.Kernels.SourceSHA256 != img.SourceDigest {
		t.Errorf("fp16: mode %q, %d notes, %d GPU layers, kernels %+v", sec.Mode, len(notes), sec.GPULayers(), sec.Kernels)
	}
	sec, _ = FastSection(res.Graph, res.Graph.Types, img, env, FastOptions{Precision: plan.FP32})
	if sec.Mode != "exact" {
		t.Errorf("fp32: mode %q", sec.Mode)
	}
	if _, _, _, err := BuildFast(res.Plan, res.Graph, res.Graph.Types, nil, "sm_90", env, FastOptions{Precision: "fp8"}); err == nil || !strings.Contains(err.Error(), `"fp8"`) {
		t.Errorf("BuildFast of fp8: %v", err)
	}
}
