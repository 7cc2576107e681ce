package cli

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayAgainstCLI: after the demo's traffic, a rebuilt fp16 engine is
// checked against every recorded request; a tolerance that fits passes, a
// strict one fails with the count.
func TestReplayAgainstCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	dir := t.TempDir()
	if err := NewMain(io.Discard, io.Discard).demo(context.Background(), DemoOptions{Dir: dir, Requests: 40, Clients: 2}); err != nil {
		t.Fatal(err)
	}
	p := func(s ...string) string { return filepath.Join(append([]string{dir}, s...)...) }
	if code, _, errs := run(t, "build", p("credit-risk.onnx"), "-o", p("fp16.plan"), "--precision", "fp16", "--bundle", p("fp16.vouch"),
		"--key", p("keys", "demo-signer.key"), "--name", "credit-risk", "--model-version", "1.1.0"); code != 0 {
		t.Fatal(errs)
	}
	base := []string{"replay", "--against", p("fp16.vouch"), "--since", "1h", "--data", p("data"), "--key", p("keys", "demo-signer.pub")}
	code, out, errs := run(t, append(base, "--check", "max", "--atol", "1e-2")...)
	if code != 0 || !strings.Contains(out, "40 records, 40 pass, 0 fail") || !strings.Contains(out, "top-1 agreement 100.00%") {
		t.Fatalf("loose check: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, append(base, "--check", "elemwise", "--atol", "0", "--rtol", "0")...)
	if code != 1 || !strings.Contains(out, "fail") {
		t.Fatalf("exact check against an fp16 engine must fail: exit %d\n%s", code, out)
	}
	// One trace, proven: the demo's records replay to VERIFIED from the CLI.
	code, out, errs = run(t, "audit", "query", "--data", p("data"), "--limit", "1", "--format", "jsonl")
	if code != 0 {
		t.Fatal(errs)
	}
	_, rest, ok := strings.Cut(out, `"trace_id":"`)
	if !ok {
		t.Fatalf("no trace in %s", out)
	}
	trace, _, _ := strings.Cut(rest, `"`)
	code, out, errs = run(t, "replay", trace, "--data", p("data"), "--key", p("keys", "demo-signer.pub"), "--report", p("rep"))
	if code != 0 || !strings.HasPrefix(out, "VERIFIED") {
		t.Fatalf("replay %s: exit %d\n%s%s", trace, code, out, errs)
	}
}
