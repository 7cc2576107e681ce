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
	if code != 0 || !strings.Contains(out, "Fused(Conv+Relu)") || !strings.Contains(out, "/c1/Conv + /Relu") {
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

// TestBundlePath runs build -> bundle -> verify -> registry -> load from the
// command line, and checks that tampering and untrusted keys are refused.
func TestBundlePath(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	mustRun := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	mustRun("keygen", "--name", "ci", "--out", dir)
	mustRun("keygen", "--name", "other", "--out", dir)
	if fi, err := os.Stat(p("ci.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", fi, err)
	}
	mustRun("build", digits+"/model.onnx", "-o", p("d.plan"), "--bundle", p("d.vouch"), "--key", p("ci.key"), "--name", "digits", "--model-version", "1.2.0", "--source-revision", "abc123")
	out := mustRun("verify", p("d.vouch"), "--key", p("ci.pub"))
	for _, want := range []string{"VERIFIED", "digits@1.2.0", "abc123", "signed by    ci+"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errs := run(t, "verify", p("d.vouch"), "--key", p("other.pub")); code == 0 || !strings.Contains(errs, "which is not trusted") {
		t.Errorf("untrusted key accepted: %s", errs)
	}
	reg := []string{"--key", p("ci.pub"), "--data", p("data"), "--principal", "alice"}
	mustRun(append([]string{"registry", "push", p("d.vouch")}, reg...)...)
	mustRun(append([]string{"registry", "tag", "digits@1.2.0", "prod"}, reg...)...)
	mustRun(append([]string{"registry", "pull", "digits@prod", p("pulled.vouch")}, reg...)...)
	if code, _, errs := run(t, append([]string{"registry", "push", p("d.vouch")}, reg...)...); code == 0 || !strings.Contains(errs, "version exists") {
		t.Errorf("duplicate version push: %s", errs)
	}
	if out := mustRun(append([]string{"registry", "access", "digits"}, reg...)...); !strings.Contains(out, "alice") || !strings.Contains(out, "pull") {
		t.Errorf("access trail: %s", out)
	}
	out = mustRun("run", p("pulled.vouch"), "--key", p("ci.pub"), "--input", digits+"/test_data_set_0/input_0.pb")
	if !strings.Contains(out, "logits  float32[4 10]") {
		t.Fatalf("run bundle: %s", out)
	}
	// Flip one byte of the plan inside the bundle: the load is refused
	// with both digests.
	b, err := os.ReadFile(p("pulled.vouch"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("VOUCHPLAN 1\n"))
	b[i+200] ^= 1
	if err := os.WriteFile(p("tampered.vouch"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, "run", p("tampered.vouch"), "--key", p("ci.pub"), "--input", digits+"/test_data_set_0/input_0.pb")
	if code == 0 || !strings.Contains(errs, "plan.vouchplan has digest sha256:") {
		t.Fatalf("tampered bundle ran: %d %s", code, errs)
	}
}

// TestInspectFitsWidth: vouch inspect's table fits 120 columns on
// resnet18 (issue 20 A7: it was 2,254 characters wide), its --json keeps
// the names and origin lists whole, and ConvChain layers show FLOPs.
func TestInspectFitsWidth(t *testing.T) {
	dir := t.TempDir()
	pl := filepath.Join(dir, "r.plan")
	if code, _, errs := run(t, "build", "../../../shared/models/resnet18/model.onnx", "-o", pl); code != 0 {
		t.Fatalf("build: exit %d: %s", code, errs)
	}
	code, out, errs := run(t, "inspect", pl)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > 120 && !strings.HasPrefix(line, "plan ") && !strings.HasPrefix(line, "profile ") {
			t.Errorf("line of %d characters:\n%s", n, line)
		}
	}
	if !strings.Contains(out, "label    fp32") {
		t.Errorf("no precision label in:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "ConvChain") && strings.HasSuffix(strings.TrimSpace(line), " -") {
			t.Errorf("ConvChain layer without FLOPs: %s", line)
		}
	}
	code, js, _ := run(t, "inspect", "--json", pl)
	if code != 0 {
		t.Fatal("inspect --json failed")
	}
	var h struct {
		Graph struct {
			Layers []struct {
				Name   string   `json:"name"`
				Origin []string `json:"origin"`
			} `json:"layers"`
		} `json:"graph"`
	}
	if err := json.Unmarshal([]byte(js), &h); err != nil {
		t.Fatal(err)
	}
	long := 0
	for _, l := range h.Graph.Layers {
		if len(l.Origin) > 4 {
			long++
		}
	}
	if long == 0 {
		t.Error("--json lost the origin lists")
	}
}

// TestRunISA: `vouch run --isa portable --threads 1` gives the bytes the
// fastest kernels give on all threads, and says which instruction set ran;
// an unknown one is a usage error.
func TestRunISA(t *testing.T) {
	dir := t.TempDir()
	in := "image=" + digits + "/test_data_set_0/input_0.pb"
	outs := map[string]string{}
	for _, isa := range []string{"best", "avx2", "portable"} {
		d := filepath.Join(dir, isa)
		code, out, errs := run(t, "run", digits+"/model.onnx", "--input", in, "--out", d, "--isa", isa, "--threads", "1")
		if code != 0 {
			t.Fatalf("--isa %s: exit %d: %s", isa, code, errs)
		}
		if isa == "portable" && !strings.Contains(out, "(CPU kernels at instruction set portable)") {
			t.Errorf("--isa portable: the output does not say what ran:\n%s", out)
		}
		b, err := os.ReadFile(filepath.Join(d, "logits.pb"))
		if err != nil {
			t.Fatal(err)
		}
		outs[isa] = string(b)
	}
	if outs["portable"] != outs["best"] || outs["avx2"] != outs["best"] {
		t.Fatal("the instruction sets give different bytes")
	}
	if code, _, errs := run(t, "run", digits+"/model.onnx", "--input", in, "--isa", "mmx"); code != 2 || !strings.Contains(errs, "--isa") {
		t.Fatalf("--isa mmx: exit %d: %s", code, errs)
	}
}
