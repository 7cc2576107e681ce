package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/plan"
)

func vouch(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := NewMain(&out, &errb).Run(context.Background(), args)
	return code, out.String(), errb.String()
}

// --device: a bad value is a usage error on every command; cuda on a
// machine without the NVIDIA driver (CI) fails with the driver's error and
// says what to do, and nothing panics; a CPU plan or an ONNX model is
// refused on a GPU with the command that builds a GPU plan.
func TestDeviceFlag(t *testing.T) {
	dir := t.TempDir()
	model := "../../../shared/models/digits_cnn/model.onnx"
	input := "../../../shared/models/digits_cnn/test_data_set_0/input_0.pb"
	pl := filepath.Join(dir, "digits.plan")
	if code, _, errs := vouch(t, "build", model, "-o", pl); code != 0 {
		t.Fatalf("build: %d %s", code, errs)
	}
	for _, cmd := range [][]string{
		{"run", pl, "--input", input, "--device", "gpu"},
		{"bench", pl, "--device", "cuda:x", "--runs", "1"},
		{"build", model, "-o", filepath.Join(dir, "x.plan"), "--device", "cuda:-1"},
	} {
		code, _, errs := vouch(t, cmd...)
		if code != 2 || !strings.Contains(errs, `unknown device`) || !strings.Contains(errs, "want cpu, cuda, cuda:N or emu") {
			t.Errorf("%v: exit %d, stderr %q", cmd, code, errs)
		}
	}
	code, out, errs := vouch(t, "run", pl, "--input", input, "--device", "cpu")
	if code != 0 || !strings.Contains(out, " on cpu (CPU kernels at instruction set ") {
		t.Fatalf("run on the CPU: exit %d, %s%s", code, out, errs)
	}
	code, _, errs = vouch(t, "run", model, "--input", input, "--device", "cuda:0")
	if code != 2 || !strings.Contains(errs, "--device cuda:0 runs engine plans: build one with vouch build MODEL.onnx --device cuda:0") {
		t.Errorf("an ONNX model on cuda: exit %d, stderr %q", code, errs)
	}
	code, _, errs = vouch(t, "run", pl, "--input", input, "--device", "cuda:0")
	if code != 1 || !strings.Contains(errs, "the plan was built for the CPU, it has no GPU kernels: rebuild it with vouch build --device cuda:0") {
		t.Errorf("a CPU plan on cuda: exit %d, stderr %q", code, errs)
	}
	if d, err := cuda.Open(""); err == nil {
		t.Logf("a CUDA driver is installed here (%s): the no-GPU cases are not checked", d.Path)
		return
	}
	code, _, errs = vouch(t, "build", model, "-o", filepath.Join(dir, "g.plan"), "--device", "cuda")
	if code != 1 || !strings.Contains(errs, "cuda: no NVIDIA driver found (libcuda.so.1)") || !strings.Contains(errs, "give --arch sm_XX to build without the GPU") {
		t.Errorf("a GPU build without a GPU: exit %d, stderr %q", code, errs)
	}
	code, _, errs = vouch(t, "build", model, "-o", filepath.Join(dir, "g.plan"), "--device", "cuda", "--arch", "sm90")
	if code != 2 || !strings.Contains(errs, `--arch "sm90": want sm_XX`) {
		t.Errorf("a bad --arch: exit %d, stderr %q", code, errs)
	}
	if _, err := cuda.OpenNVRTC(""); err != nil {
		code, _, errs = vouch(t, "build", model, "-o", filepath.Join(dir, "g.plan"), "--device", "cuda", "--arch", "sm_90")
		if code != 1 || !strings.Contains(errs, "nvrtc") && !strings.Contains(errs, "NVRTC") {
			t.Errorf("a GPU build without NVRTC: exit %d, stderr %q", code, errs)
		}
	}
}

// A GPU plan on a machine without a GPU: vouch run gives the CPU plan's
// bits (its CPU kernels), and --device cuda fails with the driver's error
// and what to do.
func TestGPUPlanOnCPU(t *testing.T) {
	dir := t.TempDir()
	model := "../../../shared/models/digits_cnn/model.onnx"
	input := "../../../shared/models/digits_cnn/test_data_set_0/input_0.pb"
	cpuPlan := filepath.Join(dir, "cpu.plan")
	if code, _, errs := vouch(t, "build", model, "-o", cpuPlan); code != 0 {
		t.Fatalf("build: %d %s", code, errs)
	}
	b, err := os.ReadFile(cpuPlan)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	img := &cuda.Image{Arch: "sm_90", NVRTC: "13.0", Source: "exact.cu", SourceDigest: plan.Digest([]byte("src")), PTX: []byte("ptx\x00"), Cubin: []byte("\x7fELF")}
	g, err := plan.AddGPU(b, engine.Section(p.Graph, nil, img, engine.Env{}), img.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if planFormat(g) != plan.FormatVersionGPU || planFormat(b) != plan.FormatVersion {
		t.Fatal("planFormat")
	}
	gpuPlan := filepath.Join(dir, "gpu.plan")
	if err := os.WriteFile(gpuPlan, g, 0o644); err != nil {
		t.Fatal(err)
	}
	outs := map[string]string{}
	for name, pl := range map[string]string{"cpu": cpuPlan, "gpu": gpuPlan} {
		out := filepath.Join(dir, name+".out")
		if code, _, errs := vouch(t, "run", pl, "--input", input, "--out", out); code != 0 {
			t.Fatalf("run %s: %d %s", name, code, errs)
		}
		data, err := os.ReadFile(filepath.Join(out, "logits.pb"))
		if err != nil {
			t.Fatal(err)
		}
		outs[name] = string(data)
	}
	if outs["cpu"] != outs["gpu"] {
		t.Fatal("the GPU plan's CPU run differs from the CPU plan's")
	}
	if _, err := cuda.Open(""); err == nil {
		return
	}
	code, _, errs := vouch(t, "run", gpuPlan, "--input", input, "--device", "cuda:0")
	if code != 1 || !strings.Contains(errs, "no NVIDIA driver found") || !strings.Contains(errs, "a GPU plan runs on any CPU with the same bits") {
		t.Fatalf("a GPU plan without a GPU: exit %d, stderr %q", code, errs)
	}
}

// --device emu runs fast plans only: an ONNX model, a CPU plan and a build
// are refused with what to do instead.
func TestDeviceEmuRefusals(t *testing.T) {
	dir := t.TempDir()
	model := "../../../shared/models/digits_cnn/model.onnx"
	input := "../../../shared/models/digits_cnn/test_data_set_0/input_0.pb"
	pl := filepath.Join(dir, "digits.plan")
	if code, _, errs := vouch(t, "build", model, "-o", pl); code != 0 {
		t.Fatalf("build: %d %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", model, "--input", input, "--device", "emu"}, "--device emu runs fast-mode GPU plans: build one with vouch build MODEL.onnx --device cuda --precision fp16"},
		{[]string{"run", pl, "--input", input, "--device", "emu"}, "not a fast-mode GPU plan"},
		{[]string{"build", model, "-o", filepath.Join(dir, "x.plan"), "--device", "emu"}, "--device emu runs fast-mode GPU plans on this CPU"},
	} {
		code, _, errs := vouch(t, c.args...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, code, errs, c.want)
		}
	}
}
