package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/tensor"
)

// auditServer starts a server over a real transparency log, with an
// inference token and an audit token.
func auditServer(t *testing.T, o Options) (*httptest.Server, *audit.Log, string) {
	t.Helper()
	dir := t.TempDir()
	skey, err := audit.LoadOrCreateKey(dir, "test.example/audit")
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(context.Background(), dir, audit.Options{SignerKey: skey, CheckpointInterval: 100 * time.Millisecond, BatchMaxAge: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	creds, err := ParseCredentials(strings.NewReader("alice infer " + HashToken("infer-token") + "\nbob audit " + HashToken("audit-token") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	o.Appender, o.Audit, o.Credentials = l, l, creds
	s := New(o)
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	pub, _ := os.ReadFile(dir + "/log.pub")
	return hs, l, strings.TrimSpace(string(pub))
}

func httpCall(t *testing.T, method, url, token string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const inferBody = `{"id":"r1","inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,-2.5]}]}`

func TestAuditAPI(t *testing.T) {
	hs, l, pub := auditServer(t, Options{})
	ctx := context.Background()
	resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "infer-token", strings.NewReader(inferBody))
	if resp.StatusCode != 200 || resp.Header.Get(HeaderLeafHash) == "" {
		t.Fatalf("infer: %s %v", resp.Status, resp.Header)
	}
	trace, idx := resp.Header.Get(HeaderTraceID), resp.Header.Get(HeaderLogIndex)

	// The infer role may not read the log; the refusal is itself recorded.
	if resp, _ := httpCall(t, "GET", hs.URL+"/v1/audit/records/"+trace, "infer-token", nil); resp.StatusCode != 403 {
		t.Fatalf("show with the infer role: %s", resp.Status)
	}
	resp, b := httpCall(t, "GET", hs.URL+"/v1/audit/records/"+trace, "audit-token", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("show: %s %s", resp.Status, b)
	}
	var inc audit.Inclusion
	if err := json.Unmarshal(b, &inc); err != nil {
		t.Fatal(err)
	}
	rec, cp, err := inc.Verify(pub)
	if err != nil {
		t.Fatal(err)
	}
	if rec.TraceID != trace || strconv.FormatUint(inc.Index, 10) != idx || rec.InputDigest == "" || cp.Size <= inc.Index {
		t.Fatalf("evidence: %+v (index %d, header %s)", rec, inc.Index, idx)
	}
	if resp, _ := httpCall(t, "GET", hs.URL+"/v1/audit/records/"+strings.Repeat("0", 32), "audit-token", nil); resp.StatusCode != 404 {
		t.Fatalf("show of an unknown trace: %s", resp.Status)
	}

	// Query: JSON lines of records.
	resp, b = httpCall(t, "GET", hs.URL+"/v1/audit/records?model=slow&status=ok", "audit-token", nil)
	if resp.StatusCode != 200 || bytes.Count(b, []byte("\n")) != 1 || !bytes.Contains(b, []byte(trace)) {
		t.Fatalf("query: %s %s", resp.Status, b)
	}
	// Export: verifies offline.
	resp, b = httpCall(t, "GET", hs.URL+"/v1/audit/export?kind=inference", "audit-token", nil)
	if _, n, err := audit.VerifyExport(bytes.NewReader(b), nil, pub); resp.StatusCode != 200 || err != nil || n != 1 {
		t.Fatalf("export: %s %d records, %v\n%s", resp.Status, n, err, b)
	}
	// A read done elsewhere, recorded through the server.
	resp, b = httpCall(t, "POST", hs.URL+"/v1/audit/access", "audit-token", strings.NewReader(`{"action":"replay","target":"`+trace+`"}`))
	var ar AccessResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &ar) != nil || ar.LeafHash == "" {
		t.Fatalf("access: %s %s", resp.Status, b)
	}

	// Every read left an access record: who, what.
	var acc []*audit.Record
	l.Query(ctx, index.Filter{Kind: audit.KindAccess}, func(r index.Row) error {
		e, err := l.Entry(r.Index)
		if err != nil {
			return err
		}
		rec, err := audit.Parse(e)
		acc = append(acc, rec)
		return err
	})
	want := []string{"show 403 alice", "show 0 bob", "show 0 bob", "query 0 bob", "export 0 bob", "replay 0 bob"}
	var got []string
	for _, r := range acc {
		got = append(got, r.Access.Action+" "+strconv.Itoa(r.Code)+" "+r.Principal)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("access records %v, want %v", got, want)
	}
	if acc[3].Access.Target != "model=slow&status=ok" || acc[1].Access.Target != trace {
		t.Fatalf("access targets: %+v %+v", acc[1].Access, acc[3].Access)
	}

	// The log is public, read-only, at tlog-tiles paths; it verifies over HTTP.
	if resp, b := httpCall(t, "GET", hs.URL+"/log/checkpoint", "", nil); resp.StatusCode != 200 || !bytes.HasPrefix(b, []byte("test.example/audit\n")) {
		t.Fatalf("/log/checkpoint: %s %s", resp.Status, b)
	}
	for _, p := range []string{"/log/wal/", "/log/index.db", "/log/log.key", "/log/.state/treeState"} {
		if resp, _ := httpCall(t, "GET", hs.URL+p, "", nil); resp.StatusCode != 404 {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
	}
	l.Sync(ctx)
	// Entry bundles (the records) need the audit role; the rest is public.
	fsys, err := audit.HTTPFS(ctx, hs.URL+"/log/", &http.Client{Transport: bearer("audit-token")})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(ctx, fsys, audit.VerifyOptions{VerifierKeys: []string{pub}, CheckRecords: true})
	if err != nil || rep.Checkpoint.Size < 7 {
		t.Fatalf("verify over HTTP: %v %v", rep, err)
	}
}

// failing is an Appender whose log has failed (disk full).
type failing struct{ err error }

func (f *failing) Append(ctx context.Context, r *audit.Record) (uint64, [32]byte, error) {
	if f.err != nil {
		return 0, [32]byte{}, f.err
	}
	return 7, [32]byte{7}, nil
}

func metricValue(t *testing.T, url, name string) string {
	_, b := httpCall(t, "GET", url+"/metrics", "", nil)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+" ") {
			return strings.TrimPrefix(sc.Text(), name+" ")
		}
	}
	return ""
}

func TestAuditFailure(t *testing.T) {
	for _, open := range []bool{false, true} {
		app := &failing{err: errors.New("no space left on device")}
		var alarms bytes.Buffer
		s := New(Options{Appender: app, AuditFailOpen: open, Logger: slogJSON(&alarms)})
		if err := s.AddModel(&slowRunner{}); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "", strings.NewReader(inferBody))
		want, outcome := 503, "refused"
		if open {
			want, outcome = 200, "served"
		}
		if resp.StatusCode != want || resp.Header.Get(HeaderLeafHash) != "" {
			t.Errorf("open=%v: %s, leaf %q", open, resp.Status, resp.Header.Get(HeaderLeafHash))
		}
		if v := metricValue(t, hs.URL, `vouch_audit_failures_total{outcome="`+outcome+`"}`); v != "1" {
			t.Errorf("open=%v: vouch_audit_failures_total{outcome=%q} = %q", open, outcome, v)
		}
		if v := metricValue(t, hs.URL, "vouch_audit_alarm"); v != "1" {
			t.Errorf("open=%v: alarm %q", open, v)
		}
		if !strings.Contains(alarms.String(), "audit_unavailable") {
			t.Errorf("open=%v: no alarm logged: %s", open, alarms.String())
		}
		app.err = nil // the disk has room again
		if resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "", strings.NewReader(inferBody)); resp.StatusCode != 200 {
			t.Errorf("open=%v after recovery: %s", open, resp.Status)
		}
		if v := metricValue(t, hs.URL, "vouch_audit_alarm"); v != "0" {
			t.Errorf("open=%v: alarm after recovery %q", open, v)
		}
		hs.Close()
	}
}

func TestCaptureInputs(t *testing.T) {
	store, err := capture.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hs, l, _ := auditServer(t, Options{Capture: store})
	resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "infer-token", strings.NewReader(inferBody))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	inc, err := l.Show(context.Background(), resp.Header.Get(HeaderTraceID))
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := audit.Parse(inc.Record)
	in, err := store.Get(rec.InputDigest)
	if err != nil {
		t.Fatal(err)
	}
	if x := in["x"]; x == nil || x.DType != tensor.Float32 || x.Data.([]float32)[1] != -2.5 {
		t.Fatalf("captured %v", in)
	}
}

func slogJSON(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
