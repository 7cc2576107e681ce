package emu_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda/emu"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../../shared/models"

// fastPlan compiles a shared model and gives it a fast fp16 placement: its
// Conv, Gemm and MatMul-by-a-constant layers (a ConvChain's convolutions)
// on fast kernels, everything else on exact ones, as cuda/engine.PlaceFast
// names them. The kernel image is a stand-in: the CPU never loads it.
func fastPlan(t *testing.T, name, arch string) (*plan.Plan, *tensor.Tensor) {
	t.Helper()
	return fastPlanOf(t, name, arch, plan.FP16, nil)
}

// fastPlanOf is fastPlan in precision prec; for int8 a layer is fast when
// scales holds its data input's scale (a ConvChain's body convolution
// likewise), the kernel name carrying it as cuda/engine writes it.
func fastPlanOf(t *testing.T, name, arch string, prec plan.Precision, scales map[string]float32) (*plan.Plan, *tensor.Tensor) {
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
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	g := plan.GPU{Device: "cuda", Mode: plan.ModeFast, Arch: arch,
		Build:   plan.GPUEnv{GPU: "NVIDIA H200", ComputeCapability: "9.0", CUDA: "13.0", NVRTC: "13.0"},
		Kernels: plan.GPUKernels{Source: "fast.cu", SourceSHA256: sum, PTXSHA256: sum, CubinSHA256: sum}}
	fastLayers := 0
	// tile is a layer's tile in its kernel name ("" for an int8 layer
	// without a scale: it stays exact).
	tile := func(n *ir.Node) string {
		if prec != plan.Int8 {
			return "64x64"
		}
		s, ok := scales[n.Input(0)]
		if !ok {
			return ""
		}
		return fmt.Sprintf("64x64 x=%08x", math.Float32bits(s))
	}
	for _, n := range p.Graph.Nodes {
		pl := plan.Placement{Layer: n.Name, Backend: plan.BackendCUDA, Kernel: "vx_exact"}
		op := ""
		switch fused.BaseOf(n) {
		case "Conv":
			if n.Int("group", 1) == 1 && tile(n) != "" {
				op = "conv(" + tile(n) + ")"
			}
		case "Gemm":
			if tile(n) != "" {
				op = "gemm(" + tile(n) + ")"
			}
		case "MatMul":
			if w := p.Graph.Initializers[n.Input(1)]; w != nil && len(w.Shape) == 2 && prec != plan.Int8 {
				op = "matmul(64x64)"
			}
		}
		if n.OpType == fused.ConvChain {
			var tiles []string
			some := false
			for _, b := range n.Attrs["body"].G.Nodes {
				tl := tile(b)
				if fused.BaseOf(b) != "Conv" || tl == "" {
					tl = "exact"
				} else {
					some = true
				}
				tiles = append(tiles, tl)
			}
			if some {
				op = "conv(chain " + strings.Join(tiles, ",") + ")"
			}
		}
		if op != "" {
			pl.Kernel, pl.Precision = plan.FastKernel(prec, op), prec
			fastLayers++
		}
		g.Layers = append(g.Layers, pl)
	}
	if fastLayers == 0 {
		t.Fatalf("%s: no layer for a fast kernel", name)
	}
	b, err := plan.AddGPU(res.Plan, g, []byte("stand-in image"))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := onnx.DecodeTensorFile(filepath.Join(models, name, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	return fp, in
}

func run(t *testing.T, p *plan.Plan, o exec.Options, in *tensor.Tensor) (*tensor.Tensor, *exec.Engine) {
	t.Helper()
	e, err := exec.NewPlanEngine(p, builtin.Registry(), o)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(context.Background(), map[string]*tensor.Tensor{p.Graph.Inputs[0].Name: in})
	if err != nil {
		t.Fatal(err)
	}
	return out[p.Graph.Outputs[0].Name], e
}

// The emulated run of a fast plan is within fp16's rounding of the exact
// CPU run, differs from it in bits (it is not the exact arithmetic), and
// is bit-identical at 1 and 2 threads and on the portable kernels.
func TestEmulatedFastPlan(t *testing.T) {
	for _, name := range []string{"digits_cnn", "breast_cancer_mlp", "mobilenet_v2"} {
		t.Run(name, func(t *testing.T) {
			p, in := fastPlan(t, name, "sm_90")
			got, e := run(t, p, exec.Options{Device: exec.DeviceEmu}, in)
			if b := e.Backend(); b != "cpu-emulated-sm_90-fast" {
				t.Errorf("backend %q", b)
			}
			if d := e.DeviceName(); !strings.Contains(d, "emulating sm_90 tensor cores") {
				t.Errorf("device %q", d)
			}
			want, _ := run(t, p, exec.Options{}, in)
			gv, wv := got.Data.([]float32), want.Data.([]float32)
			differ := 0
			scale := 0.0
			for _, v := range wv {
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			for i := range gv {
				if math.Float32bits(gv[i]) != math.Float32bits(wv[i]) {
					differ++
				}
				if d := math.Abs(float64(gv[i]) - float64(wv[i])); d > 0.05*scale+1e-3 {
					t.Fatalf("output %d: emulated fp16 %g, exact %g", i, gv[i], wv[i])
				}
			}
			if differ == 0 {
				t.Errorf("the emulated fp16 run gave the exact run's bits on all %d outputs: the fast layers did not run", len(gv))
			}
			for _, o := range []exec.Options{
				{Device: exec.DeviceEmu, CPU: exec.CPU{Threads: 1}},
				{Device: exec.DeviceEmu, CPU: exec.CPU{Threads: 2, ISA: kernel.ISAPortable}},
			} {
				again, _ := run(t, p, o, in)
				for i, v := range again.Data.([]float32) {
					if math.Float32bits(v) != math.Float32bits(gv[i]) {
						t.Fatalf("%+v: output %d is %g, the first emulated run's %g", o.CPU, i, v, gv[i])
					}
				}
			}
			t.Logf("%s: %d of %d outputs differ from the exact plan's; the emulated run is thread- and ISA-invariant", name, differ, len(gv))
		})
	}
}

func TestEmulationRefusals(t *testing.T) {
	p, _ := fastPlan(t, "breast_cancer_mlp", "sm_80")
	if _, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{Device: exec.DeviceEmu}); err == nil || !strings.Contains(err.Error(), "no fitted tensor-core model for sm_80") {
		t.Errorf("sm_80 plan: %v", err)
	}
	p, _ = fastPlan(t, "breast_cancer_mlp", "sm_90")
	cpu := *p
	cpu.Header.GPU = nil
	if _, err := emu.Rewrite(&cpu); err == nil || !strings.Contains(err.Error(), "not a fast-mode GPU plan") {
		t.Errorf("CPU plan: %v", err)
	}
	// A fast kernel on a layer the emulation has no arithmetic for.
	bad := *p
	hdr := *p.Header.GPU
	hdr.Layers = append([]plan.Placement(nil), hdr.Layers...)
	for i, n := range p.Graph.Nodes {
		if fused.BaseOf(n) != "Gemm" && fused.BaseOf(n) != "MatMul" && n.OpType != "Conv" {
			hdr.Layers[i].Kernel = plan.FastKernel(plan.FP16, "attention(64x64)")
			bad.Header.GPU = &hdr
			if _, err := emu.Rewrite(&bad); err == nil || !strings.Contains(err.Error(), "emulates fast Conv, Gemm, MatMul and Attention") {
				t.Errorf("fast kernel on a %s: %v", n.OpType, err)
			}
			return
		}
	}
	_ = ir.Graph{}
}

// A Conv in groups on a fast kernel is refused when the plan is loaded.
func TestEmulationRefusesGroupedFast(t *testing.T) {
	p, _ := fastPlan(t, "mobilenet_v2", "sm_90")
	bad := *p
	hdr := *p.Header.GPU
	hdr.Layers = append([]plan.Placement(nil), hdr.Layers...)
	for i, n := range p.Graph.Nodes {
		if fused.BaseOf(n) == "Conv" && n.Int("group", 1) != 1 {
			hdr.Layers[i].Kernel, hdr.Layers[i].Precision = plan.FastKernel(plan.FP16, "conv(64x64)"), plan.FP16
			bad.Header.GPU = &hdr
			if _, err := emu.Rewrite(&bad); err == nil || !strings.Contains(err.Error(), "groups") {
				t.Errorf("grouped Conv: %v", err)
			}
			return
		}
	}
	t.Fatal("mobilenet_v2 has no grouped Conv")
}

// int8Plan is fastPlanOf's int8 plan of a shared model with its data
// inputs' scales calibrated (minmax) on the model's calibration data, as
// vouch build --device cuda --precision int8 calibrates them.
func int8Plan(t *testing.T, name string) (*plan.Plan, *tensor.Tensor, *compile.Int8Inputs) {
	t.Helper()
	p, _ := fastPlan(t, name, "sm_90")
	x, err := quant.LoadTensor(filepath.Join(models, name, "data", "calib_x.pb"))
	if err != nil {
		t.Skipf("%s calibration data: %v", name, err)
	}
	var layers []string
	for _, n := range p.Graph.Nodes {
		layers = append(layers, n.Name)
	}
	in8, _, err := compile.CalibrateInputs(p.Graph, layers, compile.Options{Quant: compile.QuantOptions{Calibrator: quant.MinMax, Calib: []*tensor.Tensor{x}}}, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	ip, in := fastPlanOf(t, name, "sm_90", plan.Int8, in8.Scales)
	return ip, in, in8
}

// The emulated run of an int8 fast plan: every int8 layer through the
// INT8 kernels' Go twin (fast.Int8Conv, the GPU's bits: TestInt8GPUTwin),
// which computes kernel/q8's integers and epilogue, so the emulated output
// is the CPU int8 plan's of the same calibration, bit for bit; within
// int8's error of the exact run, different from it in bits, and the same
// at 1 and 2 threads and on the portable kernels.
func TestEmulatedInt8Plan(t *testing.T) {
	for _, name := range []string{"digits_cnn", "breast_cancer_mlp"} {
		t.Run(name, func(t *testing.T) {
			p, in, in8 := int8Plan(t, name)
			nint8 := 0
			for _, l := range p.Header.GPU.Layers {
				if l.Precision == plan.Int8 {
					nint8++
				}
			}
			if nint8 == 0 {
				t.Fatalf("%s: no int8 layer (scales %v)", name, in8.Scales)
			}
			got, e := run(t, p, exec.Options{Device: exec.DeviceEmu}, in)
			if b := e.Backend(); b != "cpu-emulated-sm_90-fast" {
				t.Errorf("backend %q", b)
			}
			want, _ := run(t, p, exec.Options{}, in)
			gv, wv := got.Data.([]float32), want.Data.([]float32)
			differ, scale := 0, 0.0
			for _, v := range wv {
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			for i := range gv {
				if math.Float32bits(gv[i]) != math.Float32bits(wv[i]) {
					differ++
				}
				if d := math.Abs(float64(gv[i]) - float64(wv[i])); d > 0.1*scale+1e-3 {
					t.Errorf("output %d: emulated int8 %g, exact %g", i, gv[i], wv[i])
				}
			}
			if differ == 0 {
				t.Errorf("the emulated int8 run gave the exact run's bits on all %d outputs: the int8 layers did not run", len(gv))
			}
			// An independent reference: the CPU's int8 plan of the same
			// calibration (kernel/q8), whose int8 layers have the INT8
			// kernels' bits (cuda/fast TestInt8ConvEqualsQ8).
			ref := cpuInt8(t, name, in)
			for i, v := range ref.Data.([]float32) {
				if math.Float32bits(v) != math.Float32bits(gv[i]) {
					t.Errorf("output %d: emulated %g (%#08x), the CPU int8 plan's %g (%#08x)", i, gv[i], math.Float32bits(gv[i]), v, math.Float32bits(v))
				}
			}
			for _, o := range []exec.Options{
				{Device: exec.DeviceEmu, CPU: exec.CPU{Threads: 1}},
				{Device: exec.DeviceEmu, CPU: exec.CPU{Threads: 2, ISA: kernel.ISAPortable}},
			} {
				again, _ := run(t, p, o, in)
				for i, v := range again.Data.([]float32) {
					if math.Float32bits(v) != math.Float32bits(gv[i]) {
						t.Fatalf("%+v: output %d is %g, the first emulated run's %g", o.CPU, i, v, gv[i])
					}
				}
			}
			t.Logf("%s: %d int8 layers, %d of %d outputs differ from the exact plan's", name, nint8, differ, len(gv))
		})
	}
}

// cpuInt8 is the output on in of the CPU int8 build of a shared model
// (precision int8, minmax on its calibration data, as int8Plan's scales).
func cpuInt8(t *testing.T, name string, in *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	path := filepath.Join(models, name, "model.onnx")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := quant.LoadTensor(filepath.Join(models, name, "data", "calib_x.pb"))
	o := compile.DefaultOptions()
	o.Precision = "int8"
	o.Quant.Calibrator = quant.MinMax
	o.Quant.Calib = []*tensor.Tensor{x}
	res, err := compile.Build(m, src, name, "test", o, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := run(t, p, exec.Options{}, in)
	return out
}

// An int8 kernel name without its scale, or an int8 MatMul, is refused
// when the plan is loaded.
func TestEmulationRefusesInt8WithoutScale(t *testing.T) {
	p, _, _ := int8Plan(t, "breast_cancer_mlp")
	for _, c := range []struct{ kernel, want string }{
		{"gemm(64x64)", "want TILE x=SCALEBITS"},
		{"gemm(64x64 x=00000000)", "int8 activation scale 0"},
		{"matmul(64x64 x=3c23d70a)", "want fast.int8.conv"},
	} {
		bad := *p
		hdr := *p.Header.GPU
		hdr.Layers = append([]plan.Placement(nil), hdr.Layers...)
		for i, l := range hdr.Layers {
			if l.Precision == plan.Int8 {
				hdr.Layers[i].Kernel = plan.FastKernel(plan.Int8, c.kernel)
				break
			}
		}
		bad.Header.GPU = &hdr
		if _, err := emu.Rewrite(&bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.kernel, err, c.want)
		}
	}
}
