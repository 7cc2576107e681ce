package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
)

// gpuPlan encodes a shared model's graph as a GPU plan (plan.AddGPU, as
// cuda/engine's builds do) whose first layer runs the fast kernel kernel
// (in precision prec; "" for an exact plan) and the others on the CPU.
// The GPU section is no real image: nothing here runs it on a GPU.
func gpuPlan(t *testing.T, name, kernel string, prec plan.Precision) *plan.Plan {
	t.Helper()
	m, err := onnx.DecodeFile(models + "/" + name + "/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := plan.Encode(plan.Header{Producer: "test", RequiredFeatures: []string{}, Source: plan.Source{SHA256: "00", Opsets: map[string]int64{"": 13}}}, m.Graph, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	d := func(s string) string { x := sha256.Sum256([]byte(s)); return hex.EncodeToString(x[:]) }
	g := plan.GPU{Device: "cuda", Mode: plan.ModeExact, Arch: "sm_90",
		Kernels: plan.GPUKernels{Source: "k.cu", SourceSHA256: d("s"), PTXSHA256: d("p"), CubinSHA256: d("c")}}
	for i, l := range p.Header.Graph.Layers {
		pl := plan.Placement{Layer: l.Name, Backend: plan.BackendCPU, Reason: "test"}
		if i == 0 && kernel != "" {
			pl = plan.Placement{Layer: l.Name, Backend: plan.BackendCUDA, Kernel: kernel, Precision: prec}
			if prec != "" {
				g.Mode = plan.ModeFast
			}
		}
		g.Layers = append(g.Layers, pl)
	}
	b, err := plan.AddGPU(cpu, g, []byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err = plan.Decode(b); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFastPlanOnCPU: a fast plan is not served on the CPU (its records
// would name the fast plan and its fp16 label over the exact plan's bits);
// an exact GPU plan is, labelled from its layers.
func TestFastPlanOnCPU(t *testing.T) {
	fast := gpuPlan(t, "breast_cancer_mlp", plan.FastKernel(plan.FP16, "gemm"), plan.FP16)
	if fast.Precision() != plan.FP16 {
		t.Fatalf("fast plan labelled %q", fast.Precision())
	}
	_, err := NewPlanRunner(fast, "sha256:"+strings.Repeat("ab", 32), "fast.plan", PlanOptions{})
	if !errors.Is(err, plan.ErrPinned) || !strings.Contains(err.Error(), "serve it with --device cuda:N on a sm_90 GPU or --device emu") {
		t.Fatalf("a fast plan served on the CPU: %v", err)
	}
	exact := gpuPlan(t, "breast_cancer_mlp", "vx_sgemm", "")
	r, err := NewPlanRunner(exact, "sha256:"+strings.Repeat("ab", 32), "exact.plan", PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info := r.Info(); info.Precision != "fp32" || info.Device != "cpu" {
		t.Fatalf("exact GPU plan on the CPU: %+v", info)
	}
}
