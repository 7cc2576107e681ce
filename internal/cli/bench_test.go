package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchMLP(t *testing.T) {
	model := "../../../shared/models/breast_cancer_mlp/model.onnx"
	code, out, errs := run(t, "bench", model, "--runs", "3", "--warmup", "1", "--layers", "--batch", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"model   breast_cancer_mlp", "features float32[2 30]", "vouch", "per-layer profile", "Softmax"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = run(t, "bench", "--json", model, "--runs", "2", "--peer", "gomlx")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rep.Results) == 0 || rep.Results[0].Engine != "vouch" || rep.Results[0].Summary.N != 2 {
		t.Errorf("report %+v", rep)
	}
	if _, ran := rep.Ratios["gomlx"]; !ran && rep.Unavailable["gomlx"] == "" {
		t.Errorf("gomlx neither ran nor was reported unavailable: %+v", rep)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "m.onnx", "--peer", "tensorflow"},
		{"bench", "m.onnx", "--threads", "0"},
		{"bench", "--gemm", "12x3"},
	} {
		if code, _, _ := run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
}

func TestBenchGEMM(t *testing.T) {
	code, out, errs := run(t, "bench", "--gemm", "64", "--runs", "2", "--warmup", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "SGEMM 64x64x64") || !strings.Contains(out, "GFLOP/s") {
		t.Errorf("output: %s", out)
	}
}
