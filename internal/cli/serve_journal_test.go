package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
)

// Regression (issue 20 A3): a request whose run took the process down left
// no record. A journal entry left by a dead process (the accepted record,
// with no outcome) is recorded as interrupted when serve starts again, and
// `vouch audit show` finds it by its trace id, verified in the log.
// (server's TestJournalSurvivesDeath leaves such an entry by SIGKILL and
// by a fatal runtime error.)
func TestServeRecordsInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := func(s string) string { return filepath.Join(dir, s) }
	data := p("data")
	if code, _, errs := run(t, "build", bcModel+"/model.onnx", "-o", p("bc.plan")); code != 0 {
		t.Fatal(errs)
	}
	trace := strings.Repeat("5e", 16)
	acc := &audit.Record{Kind: audit.KindInference, TraceID: trace, Time: time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC),
		Principal: "app", Model: "bc", ModelVersion: "1", RequestID: "the-one-that-crashed"}
	b, err := acc.MarshalCanonical()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(data, "inflight.journal")
	if err := os.WriteFile(journal, append(append([]byte("A 1 "), b...), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stop := startServe(t, ServeOptions{Listen: "127.0.0.1:0", GRPC: "", DataDir: data, Audit: "on",
		Workers: 1, Queue: 4, MaxBody: 1 << 20, ShutdownTimeout: 5 * time.Second, Plans: []string{p("bc.plan") + ",bc"}})
	stop()
	if b, err := os.ReadFile(journal); err != nil || len(b) != 0 {
		t.Errorf("journal after recovery: %q, %v; want it empty", b, err)
	}
	code, out, errs := run(t, "audit", "show", trace, "--data", data)
	if code != 0 || !strings.Contains(out, "interrupted") || !strings.Contains(out, "verified") {
		t.Fatalf("audit show %s: %d\n%s%s", trace, code, out, errs)
	}
	// A replay says what happened rather than that the request failed.
	code, _, errs = run(t, "replay", trace, "--data", data, "--plan", p("bc.plan"))
	if code == 0 || !strings.Contains(errs, "accepted but never answered (interrupted:") {
		t.Fatalf("replay of an interrupted request: %d %s", code, errs)
	}
}
