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
	"time"
	"unicode/utf8"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/tensor"
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

// TestClientErrorsAre4xx: requests that are wrong are answered 4xx, with
// a record, never 500 (issue 20 A8, B).
func TestClientErrorsAre4xx(t *testing.T) {
	app := &memAppender{}
	s := New(Options{Appender: app, Limits: Limits{TensorBytes: 1 << 20}})
	if err := s.AddModel(modelRunner(t, "tiny_bert", PlanOptions{})); err != nil {
		t.Fatal(err)
	}
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := newTestServer(t, s)
	bert := func(seq int, id int) string {
		ids := make([]string, seq)
		mask := make([]string, seq)
		for i := range ids {
			ids[i], mask[i] = "7", "1"
		}
		ids[seq-1] = fmt.Sprint(id)
		return fmt.Sprintf(`{"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,%d],"data":[%s]},{"name":"attention_mask","datatype":"INT64","shape":[1,%d],"data":[%s]}]}`,
			seq, strings.Join(ids, ","), seq, strings.Join(mask, ","))
	}
	for _, c := range []struct {
		name, path, body string
		code             int
	}{
		{"tiny_bert as served", "/v2/models/tiny_bert/infer", bert(8, 5), 200},
		{"tiny_bert sequence 65 (64 positions)", "/v2/models/tiny_bert/infer", bert(65, 5), 400},
		{"tiny_bert token id 1000 (vocabulary 1000)", "/v2/models/tiny_bert/infer", bert(8, 1000), 400},
		{"null in FP32 data", "/v2/models/slow/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,null]}]}`, 400},
		{"nested FP32 data", "/v2/models/slow/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[[1,"NaN"]]}]}`, 200},
		{"shape claims more than the data holds", "/v2/models/slow/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[65536,65536],"data":[1]}]}`, 400},
		{"over the tensor budget", "/v2/models/slow/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[262145,2],"data":[]}]}`, 413},
		{"binary over the tensor budget", "/v2/models/slow/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[262145,2],"parameters":{"binary_data_size":0}}]}`, 413},
	} {
		resp, b := httpCall(t, "POST", hs.URL+c.path, "", strings.NewReader(c.body))
		if strings.HasPrefix(c.name, "binary") {
			req, _ := http.NewRequest("POST", hs.URL+c.path, strings.NewReader(c.body))
			req.Header.Set(HeaderInferenceHeaderLength, fmt.Sprint(len(c.body)))
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			resp = r
		}
		if resp.StatusCode != c.code {
			t.Errorf("%s: %s %s, want %d", c.name, resp.Status, b, c.code)
		}
		if rec := app.last(); rec == nil || rec.Code != c.code {
			t.Errorf("%s: record %+v", c.name, rec)
		}
	}
}

// panicRunner is an engine whose kernel panics on every run.
type panicRunner struct{ slowRunner }

func (r *panicRunner) Info() ModelInfo {
	i := r.slowRunner.Info()
	i.Name = "panics"
	return i
}

func (r *panicRunner) Run(ctx context.Context, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if in["x"].Shape[0] == 1 && in["x"].Data.([]float32)[0] == 0 {
		return r.slowRunner.Run(ctx, in) // the warm-up's zeros
	}
	var table []float32
	return map[string]*tensor.Tensor{"y": tensor.From([]float32{table[len(in)]}, 1)}, nil
}

// TestEngineFaultsLeaveRecords: a request whose run panics, hangs or is
// abandoned by its client still gets its record, and the server goes on
// serving (issue 20 A3).
func TestEngineFaultsLeaveRecords(t *testing.T) {
	app := &memAppender{}
	hang := &slowRunner{started: make(chan struct{}, 1)}
	s := New(Options{Appender: app, RequestTimeout: 300 * time.Millisecond, Pool: PoolOptions{Workers: 2}})
	if err := s.AddModel(&panicRunner{}); err != nil {
		t.Fatal(err)
	}
	hs := newTestServer(t, s)
	// Panics: 500, a record, and the next request is served.
	for range 2 {
		resp, b := httpCall(t, "POST", hs.URL+"/v2/models/panics/infer", "", strings.NewReader(inferBody))
		if resp.StatusCode != 500 || strings.Contains(string(b), "goroutine") {
			t.Fatalf("panicking kernel: %s %s", resp.Status, b)
		}
		if rec := app.last(); rec == nil || rec.Code != 500 || rec.TraceID != resp.Header.Get(HeaderTraceID) {
			t.Fatalf("panicking kernel: record %+v", rec)
		}
	}
	if err := s.AddModel(hang); err != nil {
		t.Fatal(err)
	}
	hang.release = make(chan struct{}) // after its warm-up: every run now hangs
	t.Cleanup(func() { close(hang.release) })
	// Hangs: answered 504 at the request timeout, recorded.
	start := time.Now()
	resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "", strings.NewReader(inferBody))
	if resp.StatusCode != 504 || time.Since(start) > 5*time.Second {
		t.Fatalf("hung kernel: %s after %v", resp.Status, time.Since(start))
	}
	if rec := app.last(); rec == nil || rec.Code != 504 || rec.TraceID != resp.Header.Get(HeaderTraceID) {
		t.Fatalf("hung kernel: record %+v", rec)
	}
	// Abandoned mid-run: recorded as 499. The warm-up left its start
	// signal in the channel; drop it so the cancel waits for this run.
	select {
	case <-hang.started:
	default:
	}
	n := app.len()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v2/models/slow/infer", strings.NewReader(inferBody))
	go func() { <-hang.started; cancel() }()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("cancelled request answered")
	}
	deadline := time.Now().Add(5 * time.Second)
	for app.len() == n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if rec := app.last(); app.len() == n || rec.Code != 499 {
		t.Fatalf("cancelled mid-run: %d records, last %+v", app.len()-n, rec)
	}
}

// TestAnonymousIsInferOnly: without credentials an anonymous caller may
// infer but neither change the repository nor read the audit trail,
// unless AnonymousRoles grants it (issue 20 A8).
func TestAnonymousIsInferOnly(t *testing.T) {
	for _, roles := range [][]string{nil, {RoleAdmin}} {
		s := New(Options{AnonymousRoles: roles})
		if err := s.AddModel(&slowRunner{}); err != nil {
			t.Fatal(err)
		}
		hs := newTestServer(t, s)
		want := 403
		if roles != nil {
			want = 200
		}
		if resp, _ := httpCall(t, "POST", hs.URL+"/v2/models/slow/infer", "", strings.NewReader(inferBody)); resp.StatusCode != 200 {
			t.Errorf("roles %v: infer %s", roles, resp.Status)
		}
		if resp, _ := httpCall(t, "POST", hs.URL+"/v2/repository/models/slow/unload", "", nil); resp.StatusCode != want {
			t.Errorf("roles %v: unload %s, want %d", roles, resp.Status, want)
		}
	}
}

// TestRunStopsWithItsContext: an engine run whose request is gone stops
// between nodes instead of running to the end (issue 20 B).
func TestRunStopsWithItsContext(t *testing.T) {
	r := modelRunner(t, "breast_cancer_mlp", PlanOptions{})
	in := warmupInputs(r.Info())
	if _, err := r.Run(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errRequestTimeout)
	if _, err := r.Run(ctx, in); !errors.Is(err, errRequestTimeout) {
		t.Fatalf("run with an ended context: %v", err)
	}
	if _, err := r.Run(context.Background(), in); err != nil {
		t.Fatalf("the next run: %v", err)
	}
}

// TestManyRowsStillRecorded: a request of 20,000 rows, whose per-row
// decisions no log entry can hold, is served and recorded (its minimal
// record keeps the decisions digest) instead of refused (issue 20 A2).
func TestManyRowsStillRecorded(t *testing.T) {
	dir := t.TempDir()
	skey, err := audit.LoadOrCreateKey(dir, "test.example/audit")
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(context.Background(), dir, audit.Options{SignerKey: skey, BatchMaxAge: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	s := New(Options{Appender: l})
	if err := s.AddModel(modelRunner(t, "breast_cancer_mlp", PlanOptions{Labels: []string{"malignant", "benign"}})); err != nil {
		t.Fatal(err)
	}
	hs := newTestServer(t, s)
	const rows = 20000
	body := `{"inputs":[{"name":"features","datatype":"FP32","shape":[` + fmt.Sprint(rows) + `,30],"data":[` +
		strings.TrimSuffix(strings.Repeat("0.5,", rows*30), ",") + `]}]}`
	resp, b := httpCall(t, "POST", hs.URL+"/v2/models/breast_cancer_mlp/infer", "", strings.NewReader(body))
	if resp.StatusCode != 200 || resp.Header.Get(HeaderLeafHash) == "" {
		t.Fatalf("%d rows: %s %.200s", rows, resp.Status, b)
	}
}
