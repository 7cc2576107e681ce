package compile_test

import (
	"slices"
	"testing"

	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/server"
)

// TestPrecisionFromLayers: a build asked for fp16 whose precision pass is
// disabled has fp32 layers, and its header, layers, report and required
// features say fp32 — not the precision that was asked for (issue 20 A4).
// A real fp16 build is labelled fp16 and requires f16c where the host has
// it.
func TestPrecisionFromLayers(t *testing.T) {
	o := compile.DefaultOptions()
	o.Precision = "fp16"
	o.DisabledPasses = []string{"precision"}
	res, _ := build(t, "breast_cancer_mlp", o)
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if p.Header.Precision != plan.FP32 || p.Precision() != plan.FP32 || res.Report.PlanPrecision != "fp32" {
		t.Errorf("fp16 build without the precision pass labelled header %q, layers %q, report %q; want fp32", p.Header.Precision, p.Precision(), res.Report.PlanPrecision)
	}
	for _, l := range p.Header.Graph.Layers {
		if l.Precision != "fp32" {
			t.Errorf("layer %s (%s) labelled %q, want fp32", l.Name, l.Kind, l.Precision)
		}
	}
	for _, l := range res.Report.Layers {
		if l.Precision != "fp32" {
			t.Errorf("report layer %s labelled %q, want fp32", l.Name, l.Precision)
		}
	}
	// The server stamps the plan's label on every record.
	r, err := server.NewPlanRunner(p, "sha256:"+res.Digest, "m", server.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Info().Precision; got != "fp32" {
		t.Errorf("the server would record precision %q, want fp32", got)
	}
	if slices.Contains(p.Header.RequiredFeatures, "f16c") {
		t.Errorf("fp32 layers require %v: f16c is the fp16 kernels'", p.Header.RequiredFeatures)
	}

	res16, _ := build(t, "breast_cancer_mlp", reducedOptions(t, "breast_cancer_mlp", "fp16"))
	p16, err := plan.Decode(res16.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if p16.Header.Precision != plan.FP16 || res16.Report.PlanPrecision != "fp16" {
		t.Errorf("fp16 build labelled %q (report %q), want fp16", p16.Header.Precision, res16.Report.PlanPrecision)
	}
	n16 := 0
	for _, l := range p16.Header.Graph.Layers {
		if l.Precision == "fp16" {
			n16++
			if l.Kind != "F16" {
				t.Errorf("layer %s of kind %s labelled fp16", l.Name, l.Kind)
			}
		}
	}
	if n16 == 0 {
		t.Error("fp16 build has no fp16 layer")
	}
}

// TestRequiredFeaturesFromTarget: the required features are those the
// layers' kernels use among the target's, so a build for a named target
// is the same on any host (part of the plan being a pure function of
// model, options, version and target features).
func TestRequiredFeaturesFromTarget(t *testing.T) {
	o := compile.DefaultOptions()
	o.TargetFeatures = []string{"avx", "avx2", "fma", "sse4.2", "avx512vnni"}
	res, _ := build(t, "breast_cancer_mlp", o)
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Header.RequiredFeatures, []string{"avx", "avx2", "fma"}; !slices.Equal(got, want) {
		t.Errorf("fp32 plan for target %v requires %v, want %v (the vector kernels' among the target's)", o.TargetFeatures, got, want)
	}
	o8 := reducedOptions(t, "breast_cancer_mlp", "int8")
	o8.TargetFeatures = o.TargetFeatures
	res8, _ := build(t, "breast_cancer_mlp", o8)
	p8, err := plan.Decode(res8.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p8.Header.RequiredFeatures, []string{"avx", "avx2", "avx512vnni", "fma"}; !slices.Equal(got, want) {
		t.Errorf("int8 plan for target %v requires %v, want %v", o.TargetFeatures, got, want)
	}
}

// TestFLOPsEveryLayerKind: ConvChain layers and int8/fp16 layers count
// their dot products (issue 20 A7: they were 0). resnet18 is 1.82 GMACs
// at 224x224, so 3.6 GFLOPs.
func TestFLOPsEveryLayerKind(t *testing.T) {
	res, _ := build(t, "resnet18", compile.DefaultOptions())
	chains := 0
	for _, l := range res.Report.Layers {
		if l.Kind == "ConvChain" {
			chains++
			if l.FLOPs <= 0 {
				t.Errorf("ConvChain layer %s has %d FLOPs", l.Name, l.FLOPs)
			}
		}
	}
	if chains == 0 {
		t.Error("resnet18 built no ConvChain layer (the test needs one)")
	}
	if f := float64(res.Report.TotalFLOPs); f < 3.5e9 || f > 3.8e9 {
		t.Errorf("resnet18 total FLOPs %.4g, want about 3.6e9", f)
	}
	fp32, _ := build(t, "breast_cancer_mlp", compile.DefaultOptions())
	for _, prec := range []string{"int8", "fp16"} {
		r, _ := build(t, "breast_cancer_mlp", reducedOptions(t, "breast_cancer_mlp", prec))
		if r.Report.TotalFLOPs != fp32.Report.TotalFLOPs || r.Report.TotalFLOPs == 0 {
			t.Errorf("%s plan: %d FLOPs, the fp32 plan %d", prec, r.Report.TotalFLOPs, fp32.Report.TotalFLOPs)
		}
	}
}
