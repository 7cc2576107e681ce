package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/onnx"
)

const digits = "../../../shared/models/digits_cnn"

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := NewMain(&out, &errb).Run(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestRunOutAndJSON(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := run(t, "run", digits+"/model.onnx", "--input", "image="+digits+"/test_data_set_0/input_0.pb", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "logits  float32[4 10]") {
		t.Fatalf("output: %s", out)
	}
	got, _, err := onnx.DecodeTensorFile(filepath.Join(dir, "logits.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "float32[4 10]" {
		t.Fatalf("written output %v", got)
	}
	code, out, errs = run(t, "run", "--json", digits+"/model.onnx", "--input", digits+"/test_data_set_0/input_0.pb")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Outputs []struct {
			Name   string    `json:"name"`
			Shape  []int     `json:"shape"`
			Values []float64 `json:"values"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 1 || len(res.Outputs[0].Values) != 40 {
		t.Fatalf("json: %+v", res)
	}
}

func TestBuildInspectRunPlan(t *testing.T) {
	dir := t.TempDir()
	pl := filepath.Join(dir, "digits.plan")
	if code, _, errs := run(t, "build", digits+"/model.onnx", "-o", pl); code != 0 {
		t.Fatalf("build: %s", errs)
	}
	for _, f := range []string{pl, pl + ".log.jsonl", pl + ".report.json"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := run(t, "inspect", pl)
	if code != 0 || !strings.Contains(out, "Fused(Conv)") || !strings.Contains(out, "/c1/Conv + /Relu") {
		t.Fatalf("inspect: %d %s %s", code, out, errs)
	}
	code, out, errs = run(t, "run", pl, "--input", digits+"/test_data_set_0/input_0.pb")
	if code != 0 || !strings.Contains(out, "(profile 0)") {
		t.Fatalf("run plan: %d %s %s", code, out, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{[]string{"run"}, ExitUsage, "want exactly one MODEL argument"},
		{[]string{"run", digits + "/model.onnx"}, ExitUsage, "--input image=FILE"},
		{[]string{"run", digits + "/model.onnx", "--input", "nope=x.pb"}, ExitError, "no such file"},
		{[]string{"run", "/nonexistent.onnx", "--input", "x"}, ExitError, "no such file"},
		{[]string{"build", digits + "/model.onnx", "--profile", "image:1"}, ExitUsage, "want three shapes"},
	}
	for _, c := range cases {
		code, _, errs := run(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d containing %q", c.args, code, errs, c.code, c.want)
		}
	}
}
