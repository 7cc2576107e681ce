package stream

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ceReceiver is an HTTP receiver of CloudEvents in binary content mode,
// written from the CloudEvents 1.0 spec and its HTTP protocol binding: it
// checks the required context attributes (specversion "1.0", non-empty id,
// a URI-reference source, a non-empty type), the attribute naming rule
// (lowercase a-z and 0-9, at most 20 characters), that time is RFC 3339,
// and that the data's media type is the Content-Type. It keeps one event per
// (source, type, id), as a receiver deduplicating on the event identity.
type ceReceiver struct {
	t       *testing.T
	down    atomic.Bool
	mu      sync.Mutex
	events  map[string]ceEvent
	repeats int
}

type ceEvent struct {
	attrs map[string]string
	data  []byte
}

var ceName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

func (rc *ceReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rc.down.Load() {
		http.Error(w, "broker unavailable", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	attrs := map[string]string{}
	for k, v := range r.Header {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, "ce-") {
			continue
		}
		name := lk[3:]
		if !ceName.MatchString(name) {
			rc.t.Errorf("attribute name %q breaks the naming rule", name)
		}
		// Header values are percent-encoded where they are not printable
		// ASCII (HTTP binding, section 3.1.3.2).
		val, err := url.PathUnescape(v[0])
		if err != nil {
			rc.t.Errorf("attribute %s: %v", name, err)
		}
		attrs[name] = val
	}
	bad := func(f string, a ...any) {
		rc.t.Errorf(f, a...)
		http.Error(w, fmt.Sprintf(f, a...), http.StatusBadRequest)
	}
	if attrs["specversion"] != "1.0" {
		bad("specversion %q", attrs["specversion"])
		return
	}
	for _, req := range []string{"id", "source", "type"} {
		if attrs[req] == "" {
			bad("required attribute %s missing", req)
			return
		}
	}
	if _, err := url.Parse(attrs["source"]); err != nil {
		bad("source %q is not a URI-reference", attrs["source"])
		return
	}
	if tm, ok := attrs["time"]; ok {
		if _, err := time.Parse(time.RFC3339Nano, tm); err != nil {
			bad("time %q is not RFC 3339", tm)
			return
		}
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		bad("content type %q", r.Header.Get("Content-Type"))
		return
	}
	data, _ := io.ReadAll(r.Body)
	if !json.Valid(data) {
		bad("data is not the JSON its content type says")
		return
	}
	key := attrs["source"] + "\x00" + attrs["type"] + "\x00" + attrs["id"]
	rc.mu.Lock()
	if _, dup := rc.events[key]; dup {
		rc.repeats++
	} else {
		rc.events[key] = ceEvent{attrs: attrs, data: data}
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// TestCloudEventsExporter delivers every record as an InferenceLogger
// request/response pair to a receiver that is unavailable for a while.
func TestCloudEventsExporter(t *testing.T) {
	rc := &ceReceiver{t: t, events: map[string]ceEvent{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	l := testLog(t)
	sink := &CloudEventsSink{URL: srv.URL + "/events", Source: testOrigin, Client: srv.Client()}
	e, cancel, done := runExporter(t, l, sink, filepath.Join(t.TempDir(), "cursor"))
	appendN(t, l, 0, 200)
	waitCursor(t, e, 200, 20*time.Second)
	rc.down.Store(true)
	appendN(t, l, 200, 100)
	time.Sleep(300 * time.Millisecond)
	if e.Cursor() != 200 || e.Err() == nil {
		t.Errorf("with the receiver down: cursor %d, error %v", e.Cursor(), e.Err())
	}
	if e.Lag() == 0 {
		t.Error("no lag reported while the receiver is down")
	}
	rc.down.Store(false)
	waitCursor(t, e, 300, 20*time.Second)
	cancel()
	<-done

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.events) != 600 {
		t.Fatalf("%d distinct events, want 600 (a request and a response per record)", len(rc.events))
	}
	for i := range 300 {
		id := strconv.Itoa(i)
		req, ok1 := rc.events[testOrigin+"\x00"+TypeRequest+"\x00"+id]
		resp, ok2 := rc.events[testOrigin+"\x00"+TypeResponse+"\x00"+id]
		if !ok1 || !ok2 {
			t.Fatalf("index %d: request %v, response %v", i, ok1, ok2)
		}
		lh := LeafHash(resp.data)
		if resp.attrs["vouchleafhash"] != hex.EncodeToString(lh[:]) {
			t.Errorf("index %d: the response data is not the logged entry", i)
		}
		want := record(i)
		if resp.attrs["traceid"] != want.TraceID || resp.attrs["inferenceservicename"] != "credit" || resp.attrs["modelversion"] != "3" {
			t.Errorf("index %d: attributes %v", i, resp.attrs)
		}
		var half map[string]any
		if err := json.Unmarshal(req.data, &half); err != nil || half["trace_id"] != want.TraceID {
			t.Errorf("index %d: request data %s", i, req.data)
		}
		if _, has := half["code"]; has {
			t.Errorf("index %d: the request half carries the response's code", i)
		}
	}
	t.Logf("300 records, 600 events, %d repeats dropped by the receiver", rc.repeats)
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"kafka://b1:9092,b2:9092/audit":       "kafka_b1_9092_b2_9092_audit",
		"https://user:secret@ce.example/in?x": "https_ce.example_in",
		"nats://127.0.0.1:4222/vouch.audit":   "nats_127.0.0.1_4222_vouch.audit",
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenRejects(t *testing.T) {
	for _, u := range []string{"kafka://host:9092", "kafka:///topic", "nats://host:4222", "ftp://x/y", "http://", "::"} {
		if _, err := Open(t.Context(), u, testOrigin); err == nil {
			t.Errorf("Open(%q) accepted", u)
		}
	}
}
