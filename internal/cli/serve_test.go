package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const bcModel = "../../../shared/models/breast_cancer_mlp"

// build → serve → infer → loadtest from the command line, with labels, the
// audit file and a graceful stop.
func TestServeInferLoadtest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	planFile := filepath.Join(dir, "bc.plan")
	if code, _, errs := run(t, "build", bcModel+"/model.onnx", "-o", planFile); code != 0 {
		t.Fatalf("build: %s", errs)
	}
	labels := filepath.Join(dir, "labels.txt")
	os.WriteFile(labels, []byte("malignant\nbenign\n"), 0o644)
	audit := filepath.Join(dir, "audit.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	var serveErr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		m := NewMain(&serveErr, &serveErr)
		done <- m.serve(ctx, ServeOptions{
			Plans: []string{planFile + ",bc"}, Labels: []string{"bc=" + labels},
			Listen: "127.0.0.1:0", GRPC: "127.0.0.1:0", AuditLog: audit, AuditFsync: true,
			Workers: 2, Queue: 16, MaxBatch: 8, MaxDelay: time.Millisecond, MaxBody: 1 << 20,
			ShutdownTimeout: 5 * time.Second,
			ready:           func(h, g string) { addr <- h },
		})
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-done:
		t.Fatalf("serve: %v: %s", err, serveErr.String())
	}
	code, out, errs := run(t, "infer", "bc", "--url", url, "--id", "cli-1", "--input", "features="+bcModel+"/test_data_set_0/input_0.pb")
	if code != 0 || !strings.Contains(out, "probabilities  float32[8 2]") || !strings.Contains(out, "label     benign") ||
		!strings.Contains(out, "trace id  ") || !strings.Contains(out, "audit     log index 0") || !strings.Contains(out, "id        cli-1") {
		t.Fatalf("infer: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ = run(t, "infer", "bc", "--json", "--url", url, "--input", "features="+bcModel+"/test_data_set_0/input_0.pb"); code != 0 || !strings.Contains(out, "argmax") {
		t.Fatalf("infer --json: %s", out)
	}
	if code, _, errs = run(t, "infer", "nope", "--url", url, "--input", "features="+bcModel+"/test_data_set_0/input_0.pb"); code != 1 || !strings.Contains(errs, "unknown model") {
		t.Fatalf("infer unknown model: exit %d %s", code, errs)
	}
	code, out, errs = run(t, "loadtest", "bc", "--url", url, "--input", "features="+bcModel+"/test_data_set_0/input_0.pb",
		"--concurrency", "1,4", "--duration", "300ms", "--warmup", "50ms")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("loadtest: exit %d\n%s%s", code, out, errs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve stopped with %v", err)
	}
	b, _ := os.ReadFile(audit)
	if n := bytes.Count(b, []byte("\n")); n < 4 || !bytes.Contains(b, []byte(`"output_label":"benign"`)) || !bytes.Contains(b, []byte(`"code":404`)) {
		t.Fatalf("audit file: %d records", n)
	}
}
