package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda"
	. "github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../../shared/models"

func build(t *testing.T, name string) *compile.Result {
	t.Helper()
	path := filepath.Join(models, name, "model.onnx")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("shared model %s: %v", name, err)
	}
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	res, err := compile.Build(m, src, name, "test", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fakeImage is an Image as cuda.Build makes one, with bytes in place of
// NVRTC's products (no GPU or NVRTC here).
func fakeImage(arch string) *cuda.Image {
	return &cuda.Image{Arch: arch, NVRTC: "13.0", Source: "exact.cu", SourceDigest: plan.Digest([]byte("src")),
		Options: []string{"--fmad=false"}, PTX: []byte("ptx\x00"), Cubin: []byte("\x7fELF cubin")}
}

var h200 = cuda.DeviceInfo{Ordinal: 0, Name: "NVIDIA H200", Major: 9, Minor: 0, DriverVersion: 13000}

func gpuPlan(t *testing.T, name string) (*plan.Plan, []byte) {
	res := build(t, name)
	img := fakeImage("sm_90")
	b, err := plan.AddGPU(res.Plan, Section(res.Graph, res.Graph.Types, img, Env{Device: h200, Release: "580.159.04"}), img.Encode())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

// The shared CNNs and the MLP run on the GPU but for what has no kernel.
func TestPlace(t *testing.T) {
	for name, wantCPU := range map[string]int{
		"breast_cancer_mlp": 0,
		"digits_cnn":        0,
		"resnet18":          0,
		"mobilenet_v2":      0, // its ExpandDepthwise layers run as their two parts
	} {
		p, _ := gpuPlan(t, name)
		g := p.Header.GPU
		var cpu []string
		for _, l := range g.Layers {
			if l.Backend == plan.BackendCPU {
				cpu = append(cpu, l.Layer+": "+l.Reason)
			}
		}
		if len(cpu) != wantCPU {
			t.Errorf("%s: on the CPU: %q, want %d layers", name, cpu, wantCPU)
		}
		edw := 0
		for i, l := range g.Layers {
			if p.Graph.Nodes[i].OpType != "ExpandDepthwise" {
				continue
			}
			// The expansion's kernels, then the depthwise's.
			if a, b, ok := strings.Cut(l.Kernel, ";"); !ok || !strings.HasPrefix(a, "vx_conv2d") || !strings.HasPrefix(b, "vx_conv2d") {
				t.Errorf("%s: ExpandDepthwise layer %s placed %s %q (%s)", name, l.Layer, l.Backend, l.Kernel, l.Reason)
			}
			edw++
		}
		if name == "mobilenet_v2" && edw != 3 {
			t.Errorf("mobilenet_v2: %d ExpandDepthwise layers, want 3", edw)
		}
		if g.Build.GPU != "NVIDIA H200" || g.Build.ComputeCapability != "9.0" || g.Build.CUDA != "13.0" || g.Build.Driver != "580.159.04" || g.Arch != "sm_90" {
			t.Errorf("%s: build environment %+v", name, g.Build)
		}
	}
	// tiny_bert: what runs where is said layer by layer, with reasons.
	p, _ := gpuPlan(t, "tiny_bert")
	onGPU := map[string]string{}
	gpu := 0
	for _, l := range p.Header.GPU.Layers {
		if l.Backend == plan.BackendCPU && l.Reason == "" {
			t.Errorf("tiny_bert: layer %s on the CPU without a reason", l.Layer)
		}
		if l.Backend == plan.BackendCUDA {
			onGPU[l.Layer] = l.Kernel
			gpu++
		}
	}
	for layer, kernel := range tinyBertGPU {
		if got, ok := onGPU[layer]; !ok || got != kernel {
			t.Errorf("tiny_bert: layer %s on the GPU as %q, want %q", layer, got, kernel)
		}
	}
	if gpu != tinyBertGPULayers {
		t.Errorf("tiny_bert: %d of %d layers on the GPU, want %d", gpu, len(p.Header.GPU.Layers), tinyBertGPULayers)
	}
}

// tinyBertGPULayers is how many of tiny_bert's 74 layers run on the GPU:
// all, the integer shape arithmetic as host(shape) layers of the GPU
// program and the attention mask's Unsqueezes as host(view).
const tinyBertGPULayers = 74

// tinyBertGPU names some of tiny_bert's GPU layers and their kernels.
var tinyBertGPU = map[string]string{
	"/ln0/ReduceMean": "vx_layernorm",
	// The fused MatMuls: the chain, the bias (x*1 + b), the residual, GELU.
	"/qkv.0/MatMul": "vx_sgemm+vx_channel_affine",
	"/ff1.0/MatMul": "vx_sgemm+vx_channel_affine+vx_unary(Gelu none)",
	"/ff2.0/MatMul": "vx_sgemm+vx_channel_affine+vx_add",
	"/cls/Gemm":     "vx_sgemm+vx_channel_affine",
	// Data movement: the qkv Split, the heads' Reshapes (views) and
	// Transposes, the [CLS] row's Gather by a constant index.
	"/Split":       "vx_copy",
	"/Reshape":     "view",
	"/Transpose":   "vx_copy",
	"/Transpose_3": "vx_copy",
	"/Gather_3":    "vx_copy",
	// The embeddings: Gathers by run-time token ids and positions, their
	// broadcasting Add; o.0's residual, whose shape is unknown at build time.
	"/emb/Gather": "vx_gather",
	"/pos/Gather": "vx_gather",
	"/Add":        "vx_add_bcast",
	"/o.0/MatMul": "vx_sgemm+vx_channel_affine+vx_add_bcast",
	"/Softmax_2":  "vx_softmax",
	// The attention mask: its Cast from int64 and (1 - mask) * -10000.
	"/Cast_1": "vx_cast(int64)",
	"/Sub":    "body(vx_arith_bcast(Sub),vx_arith_bcast(Mul))",
	// Shape arithmetic (the Reshape targets, the positions) and the
	// mask's views, on the host inside the GPU program.
	"/Shape":       "host(shape)",
	"/Gather":      "host(shape)",
	"/Range":       "host(shape)",
	"/Concat":      "host(shape)",
	"/Unsqueeze":   "host(shape)",
	"/Unsqueeze_1": "host(view)",
	"/Unsqueeze_2": "host(view)",
}

// Loading checks the architecture before anything else, and says what to
// rebuild.
func TestCheckDevice(t *testing.T) {
	p, _ := gpuPlan(t, "digits_cnn")
	img, err := CheckDevice(p.Header.GPU, h200)
	if err != nil || img.Arch != "sm_90" {
		t.Fatalf("the build device refused: %v", err)
	}
	a100 := cuda.DeviceInfo{Ordinal: 1, Name: "NVIDIA A100-SXM4-80GB", Major: 8, Minor: 0}
	_, err = CheckDevice(p.Header.GPU, a100)
	want := "the plan was built for sm_90 (NVIDIA H200, compute capability 9.0), device 1 (NVIDIA A100-SXM4-80GB) is sm_80: rebuild the plan for this GPU (vouch build --device cuda:1 --arch sm_80)"
	if !errors.Is(err, cuda.ErrArch) || !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), want) {
		t.Fatalf("another architecture: %v", err)
	}
	if _, err := CheckDevice(nil, h200); !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), "rebuild it with vouch build --device cuda:0") {
		t.Fatalf("a CPU plan: %v", err)
	}
	// An image that is not the header's.
	g := *p.Header.GPU
	other := fakeImage("sm_90")
	other.Cubin = []byte("\x7fELF another cubin")
	g.Image = other.Encode()
	if _, err := CheckDevice(&g, h200); !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), "not the one the header describes") {
		t.Fatalf("a swapped image: %v", err)
	}
	g.Image = []byte("garbage")
	if _, err := CheckDevice(&g, h200); !errors.Is(err, cuda.ErrImage) {
		t.Fatalf("an undecodable image: %v", err)
	}
}

func TestDeviceName(t *testing.T) {
	if got, want := DeviceName(h200, "580.159.04"), "cuda:0 NVIDIA H200 (sm_90, driver 580.159.04, CUDA 13.0)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if got, want := DeviceName(h200, ""), "cuda:0 NVIDIA H200 (sm_90, CUDA 13.0)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// Op by op: what Place puts on the GPU and what it keeps on the CPU.
func TestPlaceOps(t *testing.T) {
	f4 := ir.StaticType(tensor.Float32, []int{1, 3, 8, 8})
	i2 := ir.StaticType(tensor.Int64, []int{2})
	attr := func(name string, v ...int64) *ir.Attr {
		if len(v) == 1 && name != "pads" && name != "kernel_shape" && name != "dilations" && name != "perm" {
			return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v[0]}
		}
		return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v}
	}
	for _, c := range []struct {
		name   string
		op     string
		ver    int64
		attrs  []*ir.Attr
		inputs []string
		kernel string // "" : on the CPU
	}{
		{"avg", "AveragePool", 19, []*ir.Attr{attr("kernel_shape", 3, 3), attr("pads", 1, 1, 1, 1), attr("count_include_pad", 1)}, []string{"x"}, "vx_avgpool2d"},
		{"avg ceil", "AveragePool", 19, []*ir.Attr{attr("kernel_shape", 3, 3), attr("ceil_mode", 1)}, []string{"x"}, ""},
		{"avg dilated", "AveragePool", 19, []*ir.Attr{attr("kernel_shape", 3, 3), attr("dilations", 2, 2)}, []string{"x"}, ""},
		{"avg asymmetric", "AveragePool", 19, []*ir.Attr{attr("kernel_shape", 3, 3), attr("pads", 0, 0, 1, 1)}, []string{"x"}, ""},
		{"transpose", "Transpose", 13, []*ir.Attr{attr("perm", 0, 2, 3, 1)}, []string{"x"}, "vx_copy"},
		{"transpose ints", "Transpose", 13, nil, []string{"s"}, ""},
		{"slice", "Slice", 13, nil, []string{"x", "c", "c"}, "vx_copy"},
		{"slice computed", "Slice", 13, nil, []string{"x", "s", "c"}, ""},
		{"split", "Split", 13, nil, []string{"x", "c"}, "vx_copy"},
		{"concat", "Concat", 13, []*ir.Attr{attr("axis", 1)}, []string{"x", "x"}, "vx_copy"},
		{"concat ints", "Concat", 13, []*ir.Attr{attr("axis", 0)}, []string{"s", "s"}, ""},
		{"gather", "Gather", 13, nil, []string{"x", "c"}, "vx_copy"},
		{"reshape", "Reshape", 14, nil, []string{"x", "s"}, "view"},
		{"add", "Add", 14, nil, []string{"x", "x"}, "vx_add"},
		{"add broadcast", "Add", 14, nil, []string{"x", "b"}, "vx_add_bcast"},
		{"add ints", "Add", 14, nil, []string{"s", "s"}, ""},
		{"div", "Div", 14, nil, []string{"x", "b"}, "vx_div_bcast"},
		{"div ints", "Div", 14, nil, []string{"s", "s"}, ""},
		{"matmul batched", "MatMul", 13, nil, []string{"x", "x"}, "vx_sgemm"},
		{"resize nearest", "Resize", 19, nil, []string{"x", "", "sc"}, "vx_gather(map)"},
		{"resize linear", "Resize", 19, []*ir.Attr{{Name: "mode", Kind: ir.AttrString, S: "linear"}}, []string{"x", "", "sc"}, "vx_resize(linear)"},
		{"resize computed scales", "Resize", 19, nil, []string{"x", "", "b"}, ""},
		{"matmul by a vector", "MatMul", 13, nil, []string{"x", "c"}, ""},
		{"gather by ids", "Gather", 13, nil, []string{"x", "s"}, "vx_gather"},
		{"gather ints", "Gather", 13, nil, []string{"s", "s"}, ""},
		// Found by the ONNX node tests on the H200 (s3 run 2): integer
		// pools and clips, a Gemm whose C is a single element.
		{"maxpool ints", "MaxPool", 12, []*ir.Attr{attr("kernel_shape", 2, 2)}, []string{"s"}, ""},
		{"clip ints", "Clip", 13, nil, []string{"s"}, ""},
		{"relu", "Relu", 14, nil, []string{"x"}, "vx_unary"},
		{"gemm scalar C", "Gemm", 13, nil, []string{"x", "x", "one"}, ""},
	} {
		n := &ir.Node{Name: c.name, OpType: c.op, Version: c.ver, Attrs: map[string]*ir.Attr{}, Inputs: c.inputs, Outputs: []string{"y"}}
		for _, a := range c.attrs {
			n.Attrs[a.Name] = a
		}
		g := &ir.Graph{Nodes: []*ir.Node{n}, Initializers: map[string]*tensor.Tensor{"c": tensor.From([]int64{0, 1}, 2), "sc": tensor.From([]float32{1, 1, 2, 2}, 4), "one": tensor.From([]float32{1})}}
		p := Place(g, map[string]ir.Type{"x": f4, "s": i2, "c": i2, "b": ir.StaticType(tensor.Float32, []int{3, 1, 1})})
		l := p[0]
		switch {
		case c.kernel == "" && l.Backend != plan.BackendCPU:
			t.Errorf("%s: placed on %s (%s), want the CPU", c.name, l.Backend, l.Kernel)
		case c.kernel == "" && l.Reason == "":
			t.Errorf("%s: on the CPU without a reason", c.name)
		case c.kernel != "" && (l.Backend != plan.BackendCUDA || l.Kernel != c.kernel):
			t.Errorf("%s: placed on %s %q (%s), want cuda %q", c.name, l.Backend, l.Kernel, l.Reason, c.kernel)
		}
	}
}
