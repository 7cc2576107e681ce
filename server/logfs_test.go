package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
)

// TestLogEntriesNeedAuditRole: the log's checkpoint and hash tiles are
// public, its entry bundles (the records) are served to the audit role
// only, and every read of them, or refusal, leaves an access record
// (issue 20 A6); the checkpoint is text/plain (C2SP), and a path that is no
// log resource is 404, not 500 (A8).
func TestLogEntriesNeedAuditRole(t *testing.T) {
	hs, l, _ := auditServer(t, Options{})
	if resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "infer-token", strings.NewReader(inferBody)); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ := httpCall(t, "GET", hs.URL+"/log/tile/0/000.p/1", "", nil)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hash tile never served: %s", resp.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, b := httpCall(t, "GET", hs.URL+"/log/checkpoint", "", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.HasPrefix(string(b), "test.example/audit\n") {
		t.Fatalf("checkpoint: %s %q %q", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	accesses := func() int {
		n := 0
		l.Query(context.Background(), index.Filter{Kind: audit.KindAccess}, func(index.Row) error { n++; return nil })
		return n
	}
	for _, c := range []struct {
		token string
		code  int
	}{{"", 401}, {"infer-token", 403}, {"audit-token", 200}} {
		before := accesses()
		resp, b := httpCall(t, "GET", hs.URL+"/log/tile/entries/000.p/1", c.token, nil)
		if resp.StatusCode != c.code || (c.code != 200 && strings.Contains(string(b), "slow")) {
			t.Errorf("entries with token %q: %s %s, want %d", c.token, resp.Status, b, c.code)
		}
		if resp.Header.Get(HeaderLeafHash) == "" {
			t.Errorf("entries with token %q: no access record", c.token)
		}
		deadline := time.Now().Add(5 * time.Second)
		for accesses() == before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if accesses() == before {
			t.Errorf("entries with token %q: access record not indexed", c.token)
		}
	}
	for _, p := range []string{"/log/tile/%00", "/log/tile/0/..%2f..%2fwal", "/log/log.key", "/log/tile/"} {
		req, _ := http.NewRequest("GET", hs.URL+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
}

// bearer is a transport that sends token with every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
