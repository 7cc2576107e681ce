package exec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

func TestParseDevice(t *testing.T) {
	for in, want := range map[string]string{"": "cpu", "cpu": "cpu", "cuda": "cuda:0", "cuda:0": "cuda:0", "cuda:7": "cuda:7", "emu": "emu"} {
		d, err := exec.ParseDevice(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDevice(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{"gpu", "cuda:", "cuda:-1", "cuda:01", "cuda:x", "cuda:1024", "CUDA:0", "cuda0", "cpu:0", "rocm:0"} {
		if _, err := exec.ParseDevice(in); !errors.Is(err, exec.ErrDevice) || !strings.Contains(err.Error(), "want cpu, cuda, cuda:N or emu") {
			t.Errorf("ParseDevice(%q): %v", in, err)
		}
	}
}

// gpuPlan adds a GPU section (kernels in place of NVRTC's, no GPU here) to
// a shared model's plan.
func gpuPlan(t *testing.T, name string) (cpu, gpu *plan.Plan) {
	cpu, _ = sharedPlan(t, name)
	img := &cuda.Image{Arch: "sm_90", NVRTC: "13.0", Source: "exact.cu", SourceDigest: plan.Digest([]byte("src")),
		PTX: []byte("ptx\x00"), Cubin: []byte("\x7fELF")}
	enc, err := plan.Encode(cpu.Header, cpu.Graph, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cpu, err = plan.Decode(enc); err != nil {
		t.Fatal(err)
	}
	b, err := plan.AddGPU(enc, engine.Section(cpu.Graph, nil, img, engine.Env{}), img.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if gpu, err = plan.Decode(b); err != nil {
		t.Fatal(err)
	}
	return cpu, gpu
}

// The device is the caller's choice: a GPU plan on the CPU runs its CPU
// kernels (the replay of a GPU-served trace), with the CPU plan's bits; a
// CPU plan is refused on a GPU; a GPU missing is an error, never a
// fall-back.
func TestPlanEngineSelection(t *testing.T) {
	cpuPlan, gpuPlan := gpuPlan(t, "digits_cnn")
	_, in := sharedPlan(t, "digits_cnn")
	ctx := context.Background()
	ref, err := exec.NewPlanEngine(cpuPlan, builtin.Registry(), exec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(ctx, feeds(cpuPlan.Graph, in))
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"", "cpu"} {
		e, err := exec.NewPlanEngine(gpuPlan, builtin.Registry(), exec.Options{Device: dev})
		if err != nil {
			t.Fatal(err)
		}
		if e.Backend() != "cpu" || e.DeviceName() != "cpu" || e.Options().Device != "cpu" {
			t.Fatalf("device %q: backend %q device %q", dev, e.Backend(), e.DeviceName())
		}
		got, err := e.Run(ctx, feeds(gpuPlan.Graph, in))
		if err != nil {
			t.Fatal(err)
		}
		for k, w := range want {
			if !sameBits(got[k], w) {
				t.Fatalf("the GPU plan on the CPU: output %s differs from the CPU plan's", k)
			}
		}
	}
	_, err = exec.NewPlanEngine(cpuPlan, builtin.Registry(), exec.Options{Device: "cuda:1"})
	if !errors.Is(err, exec.ErrDevice) || !strings.Contains(err.Error(), "the plan was built for the CPU, it has no GPU kernels: rebuild it with vouch build --device cuda:1") {
		t.Fatalf("a CPU plan on cuda:1: %v", err)
	}
	if _, err := exec.NewPlanEngine(gpuPlan, builtin.Registry(), exec.Options{Device: "tpu"}); !errors.Is(err, exec.ErrDevice) {
		t.Fatalf("an unknown device: %v", err)
	}
	if _, err := cuda.Open(""); err == nil {
		t.Log("a CUDA driver is here: the no-driver case is not checked")
		return
	}
	_, err = exec.NewPlanEngine(gpuPlan, builtin.Registry(), exec.Options{Device: "cuda"})
	if !errors.Is(err, exec.ErrDevice) || !errors.Is(err, cuda.ErrNoDriver) || !strings.Contains(err.Error(), "cuda:0") {
		t.Fatalf("no driver: %v", err)
	}
}

// The device warm-up runs each profile's opt shapes once per distinct
// set, an input the profile leaves out at its static shape; a profile
// that leaves a shape unknown is not warmed.
func TestWarmShapes(t *testing.T) {
	ids := &ir.Value{Name: "ids", Type: ir.Type{DType: tensor.Int64, RankKnown: true, Shape: []ir.Dim{{Value: -1, Param: "batch"}, {Value: 16}}}}
	mask := &ir.Value{Name: "mask", Type: ir.StaticType(tensor.Float32, []int{1, 16})}
	p := &plan.Plan{Graph: &ir.Graph{Inputs: []*ir.Value{ids, mask}}, Header: plan.Header{Profiles: []plan.Profile{
		{Inputs: map[string]plan.ShapeRange{"ids": {Min: []int{1, 16}, Opt: []int{8, 16}, Max: []int{32, 16}}}},
		{Inputs: map[string]plan.ShapeRange{"ids": {Min: []int{1, 16}, Opt: []int{8, 16}, Max: []int{64, 16}}}}, // the same opt
		{Inputs: map[string]plan.ShapeRange{"ids": {Min: []int{1, 16}, Opt: []int{2, 16}, Max: []int{4, 16}}, "mask": {Opt: []int{2, 16}}}},
		{Inputs: map[string]plan.ShapeRange{"mask": {Opt: []int{1, 16}}}},                          // ids unknown
		{Inputs: map[string]plan.ShapeRange{"ids": {Opt: []int{16}}, "mask": {Opt: []int{1, 16}}}}, // ids of another rank
	}}}
	got := fmt.Sprint(exec.WarmShapes(p))
	if want := "[[[8 16] [1 16]] [[2 16] [2 16]]]"; got != want {
		t.Fatalf("WarmShapes = %s, want %s", got, want)
	}
	if s := exec.WarmShapes(&plan.Plan{Graph: &ir.Graph{Inputs: []*ir.Value{mask}}}); len(s) != 0 {
		t.Fatalf("no profiles: %v", s)
	}
}
