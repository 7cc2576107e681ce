package stream

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestResume: an exporter stopped without warning (its process killed: no
// Close, nothing flushed) leaves a cursor file; the next one resumes there,
// and the receiver sees every index, the ones before the cursor once.
func TestResume(t *testing.T) {
	rc := &ceReceiver{t: t, events: map[string]ceEvent{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	l := testLog(t)
	cursor := filepath.Join(t.TempDir(), "cursor")
	sink := &CloudEventsSink{URL: srv.URL, Source: testOrigin, Client: srv.Client()}
	e, cancel, done := runExporter(t, l, sink, cursor)
	appendN(t, l, 0, 150)
	waitCursor(t, e, 150, 20*time.Second)
	cancel()
	<-done
	if c, err := ReadCursor(cursor, "test"); err != nil || c != 150 {
		t.Fatalf("cursor file says %d, %v; want 150", c, err)
	}
	appendN(t, l, 150, 50)
	e2, cancel2, done2 := runExporter(t, l, sink, cursor)
	if e2.Cursor() != 150 {
		t.Fatalf("resumed at %d, want 150", e2.Cursor())
	}
	waitCursor(t, e2, 200, 20*time.Second)
	cancel2()
	<-done2
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.events) != 400 || rc.repeats != 0 {
		t.Errorf("%d events, %d repeats; want 400 and 0", len(rc.events), rc.repeats)
	}
}

func TestCursorFileRefused(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"magic":   "vouch-export-cursor v2\ntest\n5\n",
		"owner":   "vouch-export-cursor v1\nother\n5\n",
		"index":   "vouch-export-cursor v1\ntest\n-5\n",
		"lines":   "vouch-export-cursor v1\ntest\n",
		"garbage": "\x00\x01\x02",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := New(nil, nil, Options{Name: "test", CursorPath: p}); !errors.Is(err, ErrCursor) {
			t.Errorf("%s: New = %v, want ErrCursor", name, err)
		}
	}
	if _, err := New(nil, nil, Options{Name: "a\nb", CursorPath: filepath.Join(dir, "x")}); err == nil {
		t.Error("a two-line name was accepted")
	}
}

func FuzzReadCursor(f *testing.F) {
	f.Add([]byte("vouch-export-cursor v1\ntest\n5\n"))
	f.Add([]byte("vouch-export-cursor v1\ntest\n18446744073709551616\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "c")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		n, err := ReadCursor(p, "test")
		if err != nil {
			return
		}
		// What parses writes back the same.
		if err := writeCursor(p, "test", n); err != nil {
			t.Fatal(err)
		}
		if m, err := ReadCursor(p, "test"); err != nil || m != n {
			t.Fatalf("round trip %d -> %d, %v", n, m, err)
		}
	})
}
