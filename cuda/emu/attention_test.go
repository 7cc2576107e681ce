package emu_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// tiny_bert's fast fp16 plan as cuda/engine.PlaceFast places it (its
// Attention layers on the fused kernel, its MatMuls by weights on the GEMM
// kernels) runs under the emulation within fp16's error of the exact plan,
// not with its bits, and with the same bits on 1 and 4 threads.
func TestEmulatedFastAttention(t *testing.T) {
	name := "tiny_bert"
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
	layers, notes := engine.PlaceFast(res.Graph, res.Graph.Types, engine.FastOptions{Precision: plan.FP16})
	nattn := 0
	for _, l := range layers {
		if strings.HasPrefix(l.Kernel, "fast.fp16.attention(") {
			nattn++
		}
	}
	for _, n := range notes {
		if strings.Contains(n.Reason, "ttention") {
			t.Errorf("note %v", n)
		}
	}
	if nattn == 0 {
		t.Fatalf("no Attention layer of tiny_bert on the fused kernel: %v", notes)
	}
	sum := strings.Repeat("ab", 32)
	sec := plan.GPU{Device: "cuda", Mode: plan.ModeFast, Arch: "sm_90", Layers: layers,
		Build:   plan.GPUEnv{GPU: "NVIDIA H200", ComputeCapability: "9.0", CUDA: "13.0", NVRTC: "13.0"},
		Kernels: plan.GPUKernels{Source: "fast.cu", SourceSHA256: sum, PTXSHA256: sum, CubinSHA256: sum}}
	b, err := plan.AddGPU(res.Plan, sec, []byte("stand-in image"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.Precision() != plan.FP16 && p.Precision() != "mixed" {
		t.Errorf("label %q", p.Precision())
	}
	in := map[string]*tensor.Tensor{}
	for i, v := range p.Graph.Inputs {
		x, _, err := onnx.DecodeTensorFile(filepath.Join(models, name, "test_data_set_0", "input_"+string(rune('0'+i))+".pb"))
		if err != nil {
			t.Fatal(err)
		}
		in[v.Name] = x
	}
	runOpts := func(o exec.Options) []float32 {
		t.Helper()
		e, err := exec.NewPlanEngine(p, builtin.Registry(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		out, err := e.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return out[p.Graph.Outputs[0].Name].Data.([]float32)
	}
	got := runOpts(exec.Options{Device: exec.DeviceEmu})
	want := runOpts(exec.Options{})
	differ := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			differ++
		}
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > 0.02 {
			t.Errorf("output %d: emulated fp16 %g, exact %g", i, got[i], want[i])
		}
	}
	if differ == 0 {
		t.Errorf("the emulated fp16 run gave the exact bits on all %d outputs", len(got))
	}
	for _, th := range []int{1, 4} {
		again := runOpts(exec.Options{Device: exec.DeviceEmu, CPU: exec.CPU{Threads: th}})
		for i := range again {
			if math.Float32bits(again[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%d threads: output %d is %g, the first emulated run's %g", th, i, again[i], got[i])
			}
		}
	}
	t.Logf("tiny_bert: %d Attention layers fused; %d of %d outputs differ from the exact plan's", nattn, differ, len(got))
}
