package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

func hexOf(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// fastCredit is the credit model's plan as a fast-mode GPU plan: its
// first layer on a fast fp16 kernel, the others on the CPU. It is
// assembled with plan.AddGPU, as cuda/engine.BuildFast assembles one; the
// GPU section is not a real image (no GPU runs it here).
func fastCredit(t *testing.T, cpu []byte) *Engine { return fastCreditFor(t, cpu, "sm_90") }

func fastCreditFor(t *testing.T, cpu []byte, arch string) *Engine {
	p, err := plan.Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	g := plan.GPU{Device: "cuda", Mode: plan.ModeFast, Arch: arch,
		Build:   plan.GPUEnv{GPU: "NVIDIA H200", ComputeCapability: "9.0", CUDA: "13.0", NVRTC: "13.0"},
		Kernels: plan.GPUKernels{Source: "fast.cu", SourceSHA256: hexOf("src"), PTXSHA256: hexOf("ptx"), CubinSHA256: hexOf("cubin")}}
	for i, l := range p.Header.Graph.Layers {
		pl := plan.Placement{Layer: l.Name, Backend: plan.BackendCPU, Reason: "test"}
		if i == 0 {
			pl = plan.Placement{Layer: l.Name, Backend: plan.BackendCUDA, Kernel: plan.FastKernel(plan.FP16, "gemm"), Precision: plan.FP16}
		}
		g.Layers = append(g.Layers, pl)
	}
	b, err := plan.AddGPU(cpu, g, []byte("not a real image"))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{Plan: fp, PlanDigest: "sha256:" + plan.Digest(b), Source: "fast.plan"}
}

// logServed appends the record of a request that eng answered with outs.
func (f *fixture) logServed(t *testing.T, trace string, eng *Engine, in, outs map[string]*tensor.Tensor) {
	ind, ins, _ := audit.InputDigest(in)
	outd, outsd, _ := audit.InputDigest(outs)
	rec := &audit.Record{TraceID: trace, Time: time.Now(), Model: "credit-risk", ModelVersion: "1.0.0", PlanDigest: eng.PlanDigest,
		Precision: string(eng.Plan.Precision()), Backend: "cuda-fast", Device: "cuda:0 NVIDIA H200 (sm_90)",
		InputDigest: ind, Inputs: ins, OutputDigest: outd, Outputs: outsd, Status: audit.StatusOK, Code: 200}
	if _, _, err := f.log.Append(f.ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.log.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFastTrace: a trace served by a fast plan replays on the CPU through
// the emulation of its GPU's tensor cores (VERIFIED when the output is the
// fast kernel's, MISMATCH otherwise) and is refused, with what to do, for
// an architecture without a fitted model; Against with the exact plan compares the served
// output (given, its digest checked) with the exact plan's on the CPU,
// within the tolerance or not, and never claims equal bits.
func TestFastTrace(t *testing.T) {
	f := newFixture(t)
	cpu := buildCredit(t, false)
	fast := fastCredit(t, cpu)
	if fast.Plan.Precision() != plan.FP16 || fast.Plan.Pinned() != "sm_90" {
		t.Fatalf("fast plan labelled %q, pinned to %q", fast.Plan.Precision(), fast.Plan.Pinned())
	}
	exactPlan, err := plan.Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	exact := &Engine{Plan: exactPlan, PlanDigest: "sha256:" + plan.Digest(cpu), Source: "exact.plan"}
	in := applicant(42)
	ref, err := run(exactPlan, in)
	if err != nil {
		t.Fatal(err)
	}
	// The served output: the exact values off by fp16's half ulp, as a
	// fast kernel's would be.
	served := map[string]*tensor.Tensor{}
	for name, r := range ref {
		v := append([]float32(nil), r.Data.([]float32)...)
		for i := range v {
			v[i] *= 1 + 1.0/2048
		}
		served[name] = tensor.From(v, r.Shape...)
	}
	f.logServed(t, "trace-fast", fast, in, served)
	d, _, _ := audit.InputDigest(in)
	opts := Options{Records: f.log, LogKeys: f.logKeys, Plans: FixedPlan{Engine: fast}, Inputs: memInputs{d: in}}

	// On this CPU the replay runs the emulation of sm_90's tensor cores:
	// the served output above is not what the fast kernel gives, so it is
	// a MISMATCH, run on the emulation.
	r, err := Replay(f.ctx, "trace-fast", opts)
	if err != nil || r.Verdict != Mismatch || !strings.Contains(r.Engine.RanOn, "emulating sm_90 tensor cores") {
		t.Fatalf("Replay of a fabricated fast output on the CPU: %v %+v", err, r)
	}
	// The output the fast kernel gives (the emulation's, which the H200
	// matches bit for bit: cuda/mma) replays VERIFIED on the CPU.
	emuEng, err := exec.NewPlanEngine(fast.Plan, builtin.Registry(), exec.Options{Device: exec.DeviceEmu})
	if err != nil {
		t.Fatal(err)
	}
	fastOut, err := emuEng.Run(f.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	f.logServed(t, "trace-fast-emu", fast, in, fastOut)
	if r, err := Replay(f.ctx, "trace-fast-emu", opts); err != nil || r.Verdict != Verified {
		t.Fatalf("Replay of the fast kernel's output on the CPU: %v %+v", err, r)
	}
	// An architecture without a fitted model: refused, with what to do.
	old := fastCreditFor(t, cpu, "sm_80")
	f.logServed(t, "trace-fast-sm80", old, in, served)
	o80 := opts
	o80.Plans = FixedPlan{Engine: old}
	_, err = Replay(f.ctx, "trace-fast-sm80", o80)
	var pe *PinnedError
	want := "this trace was served by a fast-mode plan whose bits are pinned to sm_80 GPUs, and this CPU cannot emulate them (emu: plan: no fitted tensor-core model for sm_80"
	if !errors.As(err, &pe) || !errors.Is(err, plan.ErrPinned) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "vouch replay --against EXACT.vouch trace-fast-sm80") {
		t.Fatalf("Replay of an sm_80 fast trace on the CPU: %v", err)
	}

	if _, err := Against(f.ctx, "trace-fast", exact, DefaultCriteria(), opts); err == nil || !strings.Contains(err.Error(), "give the served outputs with --output NAME=FILE") {
		t.Fatalf("Against without the served output: %v", err)
	}
	o := opts
	o.Output = served
	c, err := Against(f.ctx, "trace-fast", exact, DefaultCriteria(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Outputs[0]
	if c.Verdict != WithinTolerance || !c.Pass || s.Exact || s.AbsMax == 0 || s.Top1 != 1 || c.Pinned != "sm_90" || c.Precision != "fp16" ||
		!strings.Contains(c.Reference, "exact.plan on cpu") || math.Abs(s.RelMax-1.0/2048) > 1e-6 {
		t.Fatalf("within tolerance: %+v", c)
	}
	bits := Criteria{Check: "elemwise"} // atol = rtol = 0
	if c, err = Against(f.ctx, "trace-fast", exact, bits, o); err != nil || c.Verdict != NotWithinTolerance || c.Pass {
		t.Fatalf("bit-for-bit criteria: %+v %v", c, err)
	}
	// An output that is not the one served is refused.
	o.Output = ref
	if _, err := Against(f.ctx, "trace-fast", exact, DefaultCriteria(), o); err == nil || !strings.Contains(err.Error(), "the record's output digest is") {
		t.Fatalf("another output: %v", err)
	}
	o.Output = served
	// Against another model's plan, or against a fast plan, is refused.
	other, err := plan.Decode(buildCredit(t, true))
	if err != nil {
		t.Fatal(err)
	}
	other.Header.Source.SHA256 = "another model"
	if _, err := Against(f.ctx, "trace-fast", &Engine{Plan: other, Source: "other.plan"}, DefaultCriteria(), o); err == nil || !strings.Contains(err.Error(), "built from another model") {
		t.Fatalf("another model: %v", err)
	}
	if _, err := Against(f.ctx, "trace-fast", fast, DefaultCriteria(), o); err == nil || !strings.Contains(err.Error(), "is a fast-mode plan too") {
		t.Fatalf("against a fast plan: %v", err)
	}
}
