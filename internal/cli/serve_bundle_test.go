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

// startServe runs m.serve in the background and returns its HTTP URL and
// a stop function that waits for the drain.
func startServe(t *testing.T, o ServeOptions) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	var logs bytes.Buffer
	o.ready = func(h, g string) { addr <- h }
	go func() { done <- NewMain(&logs, &logs).serve(ctx, o) }()
	select {
	case a := <-addr:
		return "http://" + a, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve stopped with %v", err)
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v: %s", err, logs.String())
	}
	return "", nil
}

// TestServeBundle: the server verifies a signed bundle before serving it,
// records the bundle digest in every audit record, and refuses a bundle
// signed by an untrusted key.
func TestServeBundle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := func(s string) string { return filepath.Join(dir, s) }
	for _, name := range []string{"ci", "stranger"} {
		if code, _, errs := run(t, "keygen", "--name", name, "--out", dir); code != 0 {
			t.Fatal(errs)
		}
	}
	if code, _, errs := run(t, "build", bcModel+"/model.onnx", "-o", p("bc.plan"), "--bundle", p("bc.vouch"), "--key", p("ci.key"), "--name", "bc", "--model-version", "3.0.1"); code != 0 {
		t.Fatal(errs)
	}
	audit := p("audit.jsonl")
	base := ServeOptions{Listen: "127.0.0.1:0", GRPC: "", AuditLog: audit, AuditFsync: true, Workers: 1, Queue: 4, MaxBody: 1 << 20, ShutdownTimeout: 5 * time.Second}
	o := base
	o.Bundles, o.Keys = []string{p("bc.vouch")}, p("ci.pub")
	url, stop := startServe(t, o)
	code, out, errs := run(t, "infer", "bc", "--url", url, "--input", "features="+bcModel+"/test_data_set_0/input_0.pb")
	stop()
	if code != 0 || !strings.Contains(out, "probabilities") {
		t.Fatalf("infer: %d %s %s", code, out, errs)
	}
	rec, _ := os.ReadFile(audit)
	if !bytes.Contains(rec, []byte(`"bundle_digest":"sha256:`)) || !bytes.Contains(rec, []byte(`"model_version":"3.0.1"`)) {
		t.Fatalf("audit record lacks the bundle digest or version: %s", rec)
	}
	// --registry alone serves every model of the registry (its prod alias).
	if code, _, errs := run(t, "registry", "push", p("bc.vouch"), "--key", p("ci.pub"), "--data", p("data")); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := run(t, "registry", "tag", "bc@3.0.1", "prod", "--key", p("ci.pub"), "--data", p("data")); code != 0 {
		t.Fatal(errs)
	}
	ro := base
	ro.Registry, ro.Keys, ro.DataDir = filepath.Join(p("data"), "registry"), p("ci.pub"), p("data")
	url, stop = startServe(t, ro)
	code, out, errs = run(t, "infer", "bc", "--url", url, "--input", "features="+bcModel+"/test_data_set_0/input_0.pb")
	stop()
	if code != 0 || !strings.Contains(out, "probabilities") {
		t.Fatalf("serving from --registry: %d %s %s", code, out, errs)
	}
	o.Keys = p("stranger.pub")
	err := NewMain(&bytes.Buffer{}, &bytes.Buffer{}).serve(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("a bundle signed by an untrusted key was served: %v", err)
	}
}
