package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/server"
)

// buildBC builds the breast-cancer MLP's plan once per test.
func buildBC(t *testing.T, dir string) string {
	t.Helper()
	planFile := filepath.Join(dir, "bc.plan")
	if code, _, errs := run(t, "build", bcModel+"/model.onnx", "-o", planFile); code != 0 {
		t.Fatalf("build: %s", errs)
	}
	return planFile
}

var traceRE = regexp.MustCompile(`trace id  ([0-9a-f]{32})`)

// The transparency log end to end from the command line: serve writes it
// (key made on first use, inputs captured), the audit commands read it
// through the server while it runs and directly when it does not, every
// read leaves an access record, verify catches tampering, shred erases
// inputs and the log still verifies.
func TestAuditCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	planFile := buildBC(t, dir)
	creds := filepath.Join(dir, "creds")
	os.WriteFile(creds, []byte("app infer "+server.HashToken("tok-infer")+"\nauditor audit "+server.HashToken("tok-audit")+"\n"), 0o600)
	tokInfer, tokAudit := filepath.Join(dir, "ti"), filepath.Join(dir, "ta")
	os.WriteFile(tokInfer, []byte("tok-infer\n"), 0o600)
	os.WriteFile(tokAudit, []byte("tok-audit\n"), 0o600)
	o := ServeOptions{Plans: []string{planFile + ",bc"}, DataDir: data, Audit: "on", AuditOrigin: "test.vouch/audit",
		AuditDurability: "durable", AuditFailure: "closed", CaptureInputs: true, Retain: "7y", Credentials: creds,
		Listen: "127.0.0.1:0", Workers: 1, Queue: 8, MaxBody: 1 << 20, ShutdownTimeout: 5 * time.Second}
	url, stop := startServe(t, o)
	st, err := os.Stat(defaultLogKey(data))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the log's signing key: %v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(data, "audit", audit.KeyFile)); err == nil {
		t.Fatal("the signing key was made inside the log directory")
	}
	pub := filepath.Join(data, "audit", "log.pub")
	var traces []string
	for range 3 {
		code, out, errs := run(t, "infer", "bc", "--url", url, "--token-file", tokInfer, "--input", "features="+bcModel+"/test_data_set_0/input_0.pb")
		m := traceRE.FindStringSubmatch(out)
		if code != 0 || m == nil || !strings.Contains(out, "audit     log index") {
			t.Fatalf("infer: %d %s %s", code, out, errs)
		}
		traces = append(traces, m[1])
	}

	// While the server holds the log: a local read must go through it.
	if code, _, errs := run(t, "audit", "show", traces[0], "--data", data); code != 1 || !strings.Contains(errs, "held by a running server") {
		t.Fatalf("show without --url while serving: %d %s", code, errs)
	}
	code, out, errs := run(t, "audit", "show", traces[0], "--data", data, "--url", url, "--token-file", tokAudit)
	if code != 0 || !strings.Contains(out, traces[0]) || !strings.Contains(out, "verified") || !strings.Contains(errs, "access recorded by") {
		t.Fatalf("show via server: %d\n%s%s", code, out, errs)
	}
	// Remote only: no local log.
	code, out, errs = run(t, "audit", "query", "--data", filepath.Join(dir, "nothing"), "--url", url, "--token-file", tokAudit, "--model", "bc", "--format", "jsonl")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("remote query: %d\n%s%s", code, out, errs)
	}
	// The public log verifies over HTTP; the checkpoint is saved.
	saved := filepath.Join(dir, "saved.checkpoint")
	code, out, errs = run(t, "audit", "verify", "--log", url+"/log/", "--key", pub, "--checkpoint", saved, "--token-file", tokAudit)
	if code != 0 || !strings.HasPrefix(out, "OK") {
		t.Fatalf("verify URL: %d\n%s%s", code, out, errs)
	}
	stop()

	// No server: the command appends its own access records.
	code, out, errs = run(t, "audit", "show", traces[1], "--data", data)
	if code != 0 || !strings.Contains(out, "output") || !strings.Contains(errs, "access recorded: log index") {
		t.Fatalf("local show: %d\n%s%s", code, out, errs)
	}
	export := filepath.Join(dir, "export.jsonl")
	if code, out, errs = run(t, "audit", "export", "--data", data, "--out", export, "--kind", "inference"); code != 0 || !strings.Contains(out, "3 records") {
		t.Fatalf("export: %d\n%s%s", code, out, errs)
	}
	if code, out, errs = run(t, "audit", "verify", "--export", export, "--key", pub); code != 0 || !strings.Contains(out, "3 records proven") {
		t.Fatalf("verify export: %d\n%s%s", code, out, errs)
	}
	if code, out, errs = run(t, "audit", "index", "--rebuild", "--data", data); code != 0 {
		t.Fatalf("index: %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, "audit", "query", "--data", data, "--kind", "access")
	// show (via server), query (remote), the entry bundle read by verify
	// over HTTP, show (local), export, + this query
	for _, want := range []string{"show " + traces[0], "auditor", "entries tile/entries/", "query kind=access", "export kind=inference", "local:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("access trail lacks %q: %d\n%s%s", want, code, out, errs)
		}
	}
	if n := strings.Count(out, "\n"); n != 1+6+1 {
		t.Fatalf("access trail has %d lines:\n%s", n, out)
	}

	// Inputs were captured; shredding the model's key erases them and the
	// log still verifies against the saved checkpoint.
	inc := showJSON(t, data, traces[2])
	rec, _ := audit.Parse(inc.Record)
	store, _ := capture.Open(filepath.Join(data, "capture"))
	if _, err := store.Get(rec.InputDigest); err != nil {
		t.Fatalf("captured input: %v", err)
	}
	if code, out, errs = run(t, "audit", "shred", "bc", "--data", data); code != 0 || !strings.Contains(out, "shredded 1") {
		t.Fatalf("shred: %d\n%s%s", code, out, errs)
	}
	if _, err := store.Get(rec.InputDigest); err == nil {
		t.Fatal("input readable after shred")
	}
	if code, out, errs = run(t, "audit", "verify", "--log", filepath.Join(data, "audit"), "--key", pub, "--checkpoint", saved); code != 0 || !strings.Contains(out, "extends the saved checkpoint") {
		t.Fatalf("verify after shred: %d\n%s%s", code, out, errs)
	}
	if code, out, _ = run(t, "audit", "purge", "--data", data); code != 0 || !strings.Contains(out, "purged") {
		t.Fatalf("purge: %s", out)
	}

	// Tampering is caught, with evidence.
	bundle := filepath.Join(data, "audit", "tile", "entries", "000.p")
	ents, _ := os.ReadDir(bundle)
	if len(ents) == 0 {
		t.Fatal("no partial entry bundle")
	}
	largest := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > largest {
			largest = n
		}
	}
	p := filepath.Join(bundle, strconv.Itoa(largest))
	b, _ := os.ReadFile(p)
	b[40] ^= 1
	os.WriteFile(p, b, 0o644)
	code, out, errs = run(t, "audit", "verify", "--log", filepath.Join(data, "audit"), "--key", pub)
	if code != 1 || !strings.Contains(out, "TAMPERED") || !strings.Contains(out, "expected") {
		t.Fatalf("verify of a tampered log: %d\n%s%s", code, out, errs)
	}
}

func showJSON(t *testing.T, data, trace string) *audit.Inclusion {
	t.Helper()
	code, out, errs := run(t, "audit", "show", trace, "--data", data, "--json")
	if code != 0 {
		t.Fatalf("show --json: %d %s", code, errs)
	}
	var inc audit.Inclusion
	if err := json.Unmarshal([]byte(out), &inc); err != nil {
		t.Fatal(err)
	}
	return &inc
}

func TestAuditUsage(t *testing.T) {
	for _, args := range [][]string{
		{"audit"},
		{"audit", "nope"},
		{"audit", "show"},
		{"audit", "export"},
		{"audit", "index"},
		{"audit", "query", "--format", "xml"},
		{"serve", "--plan", "x", "--audit-failure", "maybe", "--data", "d"},
	} {
		if code, _, errs := run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
	}
}
