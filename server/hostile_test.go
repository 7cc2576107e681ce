package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vouchml/vouch/audit"
)

// TestHostileMetadataIsRecorded sends requests whose metadata no record
// could hold as sent (issue 20 A2): each must be answered 4xx and leave a
// record in the transparency log, its fields bounded, with the digest of
// what was cut.
func TestHostileMetadataIsRecorded(t *testing.T) {
	hs, l, pub := auditServer(t, Options{})
	big := strings.Repeat("x", 70<<10)
	bad := "id-\xff\xfe-" + strings.Repeat("é", 10)
	var many strings.Builder
	many.WriteString(`{"inputs":[`)
	for i := range 2000 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `{"name":"in%04d-%s","datatype":"FP32","shape":[1],"data":[1]}`, i, strings.Repeat("n", 40))
	}
	many.WriteString(`]}`)
	cases := []struct {
		name   string
		path   string
		header map[string]string
		body   string
		code   int
		want   string // a substring the bounded record must keep
	}{
		{"70 KB X-Request-Id", "/v2/models/slow/infer", map[string]string{HeaderRequestID: big}, inferBody, 400, "…[cut 71680 bytes sha256:"},
		{"invalid UTF-8 X-Request-Id", "/v2/models/slow/infer", map[string]string{HeaderRequestID: bad}, inferBody, 400, "…[cut 26 bytes sha256:"},
		{"70 KB request id", "/v2/models/slow/infer", nil, `{"id":"` + big + `","inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}]}`, 400, "…[cut 71680 bytes"},
		{"70 KB traceparent tail", "/v2/models/slow/infer", map[string]string{HeaderTraceparent: "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-" + big}, inferBody, 200, ""},
		{"70 KB model name", "/v2/models/" + big + "/infer", nil, inferBody, 404, "…[cut"},
		{"70 KB datatype", "/v2/models/slow/infer", nil, `{"inputs":[{"name":"x","datatype":"` + big + `","shape":[1,2],"data":[1,2]}]}`, 400, "…[cut"},
		{"2,000 unknown inputs", "/v2/models/slow/infer", nil, many.String(), 400, ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("POST", hs.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer infer-token")
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: %s, want %d", c.name, resp.Status, c.code)
		}
		if resp.Header.Get(HeaderLeafHash) == "" {
			t.Errorf("%s: no audit record (no %s)", c.name, HeaderLeafHash)
			continue
		}
		if len(resp.Header.Get(HeaderRequestID)) > maxIDBytes {
			t.Errorf("%s: X-Request-Id of %d bytes echoed", c.name, len(resp.Header.Get(HeaderRequestID)))
		}
		inc, err := l.Show(context.Background(), resp.Header.Get(HeaderTraceID))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		rec, _, err := inc.Verify(pub)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(inc.Record) > 16<<10 {
			t.Errorf("%s: record of %d bytes", c.name, len(inc.Record))
		}
		all := rec.RequestID + rec.Model + rec.Error + rec.TraceParent
		if !utf8.ValidString(all) || !strings.Contains(all, c.want) {
			t.Errorf("%s: record %+v lacks %q", c.name, rec, c.want)
		}
		if rec.Code != c.code {
			t.Errorf("%s: record code %d", c.name, rec.Code)
		}
	}
}

// TestHostileRecordFallsBackToMinimal: should the log refuse even a bounded
// record, the request still gets its minimal record, not a 503.
func TestHostileRecordFallsBackToMinimal(t *testing.T) {
	app := &refusingBig{}
	s := New(Options{Appender: app})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := newTestServer(t, s)
	resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "", strings.NewReader(inferBody))
	if resp.StatusCode != 200 || resp.Header.Get(HeaderLeafHash) == "" || app.n != 2 {
		t.Fatalf("%s, %d appends", resp.Status, app.n)
	}
}

// refusingBig refuses every record that carries per-tensor digests, as a
// log with a small entry limit would.
type refusingBig struct{ n int }

func (a *refusingBig) Append(ctx context.Context, r *audit.Record) (uint64, [32]byte, error) {
	a.n++
	if len(r.Inputs) > 0 {
		return 0, [32]byte{}, fmt.Errorf("%w: trace %s", audit.ErrTooLarge, r.TraceID)
	}
	return 1, [32]byte{1}, nil
}

func TestBound(t *testing.T) {
	for _, s := range []string{"", "plain", strings.Repeat("é", 200), "a\xffb", strings.Repeat("\xff", 300)} {
		b := bound(s, 16)
		if !utf8.ValidString(b) || (clean(s, 16) != (b == s)) || len(b) > 16+len("…[cut 300 bytes sha256:]")+64 {
			t.Errorf("bound(%q) = %q", s, b)
		}
	}
	if bound("a\xffb", 16) == bound("a\xfeb", 16) {
		t.Error("two invalid strings bounded alike")
	}
}

func newTestServer(t *testing.T, s *Server) *httptest.Server {
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs
}

// TestAuditAlarmWithoutLogs: with --audit-failure open and no access log, a
// request served unaudited still raises the alarm (issue 20 A2), and the
// failure counters exist, at 0, before the first failure (A8).
func TestAuditAlarmWithoutLogs(t *testing.T) {
	var logged bytes.Buffer
	def := slog.Default()
	slog.SetDefault(slogJSON(&logged))
	t.Cleanup(func() { slog.SetDefault(def) })
	app := &failing{}
	s := New(Options{Appender: app, AuditFailOpen: true})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := newTestServer(t, s)
	for _, o := range []string{"served", "refused"} {
		if v := metricValue(t, hs.URL, `vouch_audit_failures_total{outcome="`+o+`"}`); v != "0" {
			t.Errorf("before any failure: vouch_audit_failures_total{outcome=%q} = %q", o, v)
		}
	}
	app.err = errors.New("no space left on device")
	if resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "", strings.NewReader(inferBody)); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if v := metricValue(t, hs.URL, "vouch_audit_alarm"); v != "1" {
		t.Errorf("alarm %q", v)
	}
	if !strings.Contains(logged.String(), "audit_unavailable") {
		t.Errorf("no alarm logged: %q", logged.String())
	}
}
