package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/tensor"
)

// doomedRunner is a fake model, f32[n,2] -> f32[n,2], whose run on an
// input starting with 42 never returns: it hangs (mode "hang", to be
// killed) or overflows its stack (mode "fatal": a fatal runtime error,
// which no recover catches). Any other input, the warm-up's zeros
// included, is doubled.
type doomedRunner struct{ mode string }

func (r doomedRunner) Info() ModelInfo { return (&slowRunner{}).Info() }

func (r doomedRunner) Check(in map[string]*tensor.Tensor) (string, error) {
	return (&slowRunner{}).Check(in)
}

func (r doomedRunner) Run(ctx context.Context, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if x := in["x"].Data.([]float32); len(x) > 0 && x[0] == 42 {
		switch r.mode {
		case "fatal":
			debug.SetMaxStack(1 << 20)
			return nil, fmt.Errorf("depth %d", recurse(0))
		default:
			select {}
		}
	}
	return (&slowRunner{}).Run(ctx, in)
}

func recurse(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	return recurse(n+1) + int(pad[0])
}

// journalChild is the server process of TestJournalSurvivesDeath: a
// FileAppender log and a journal in dir, the doomed model, HTTP on a
// loopback port written to dir/addr.
func journalChild(dir, mode string) {
	app, err := OpenFileAppender(filepath.Join(dir, "records.jsonl"), false)
	if err != nil {
		panic(err)
	}
	j, err := OpenJournal(filepath.Join(dir, "inflight"), false)
	if err != nil {
		panic(err)
	}
	if _, err := j.Recover(context.Background(), app, time.Now()); err != nil {
		panic(err)
	}
	s := New(Options{Appender: app, Journal: j})
	if err := s.AddModel(doomedRunner{mode: mode}); err != nil {
		panic(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(l.Addr().String()), 0o600); err != nil {
		panic(err)
	}
	os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr"))
	http.Serve(l, s.Handler())
}

// A request whose run takes the process down — SIGKILL during the run, or
// a fatal runtime error (a stack overflow) — still gets its record: the
// accepted record was in the in-flight journal before the run began, and
// the next start appends it as an interrupted request, with the request's
// trace id and input digest.
func TestJournalSurvivesDeath(t *testing.T) {
	if dir := os.Getenv("VOUCH_JOURNAL_CHILD"); dir != "" {
		journalChild(dir, os.Getenv("VOUCH_JOURNAL_MODE"))
		return
	}
	for _, mode := range []string{"hang", "fatal"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestJournalSurvivesDeath$")
			cmd.Env = append(os.Environ(), "VOUCH_JOURNAL_CHILD="+dir, "VOUCH_JOURNAL_MODE="+mode)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				cmd.Process.Kill()
				<-exited
			}()
			addr := waitFile(t, filepath.Join(dir, "addr"), exited, &stderr)

			const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
			body := `{"id":"doomed-1","inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[42,7]}]}`
			req, _ := http.NewRequest("POST", "http://"+string(addr)+"/v2/models/slow/infer", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
			answered := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					err = fmt.Errorf("answered %s", resp.Status)
				}
				answered <- err
			}()
			if mode == "hang" {
				// Kill only once the run has begun: its entry is in the journal.
				for !bytes.Contains(readOr(filepath.Join(dir, "inflight")), []byte(trace)) {
					select {
					case err := <-exited:
						t.Fatalf("server exited before the run: %v\n%s", err, stderr.Bytes())
					case <-time.After(10 * time.Millisecond):
					}
				}
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			err := <-exited
			exited <- err // for the deferred wait
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("server: %v, want it to die", err)
			}
			if mode == "fatal" && !strings.Contains(stderr.String(), "fatal error: stack overflow") {
				t.Fatalf("the server died of something else than the stack overflow: %v\n%.2000s", err, stderr.Bytes())
			}
			if err := <-answered; err == nil || strings.Contains(err.Error(), "answered") {
				t.Fatalf("the request was answered: %v", err)
			}
			if recs := records(t, filepath.Join(dir, "records.jsonl")); len(recs) != 0 {
				t.Fatalf("the log already holds %d records before recovery", len(recs))
			}

			// The next start.
			app, err := OpenFileAppender(filepath.Join(dir, "records.jsonl"), false)
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close()
			j, err := OpenJournal(filepath.Join(dir, "inflight"), false)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			got, err := j.Recover(context.Background(), app, time.Now())
			if err != nil || len(got) != 1 {
				t.Fatalf("recovered %d records, %v; want 1", len(got), err)
			}
			recs := records(t, filepath.Join(dir, "records.jsonl"))
			if len(recs) != 1 {
				t.Fatalf("%d records after recovery, want 1", len(recs))
			}
			r := recs[0]
			want, _, _ := audit.InputDigest(map[string]*tensor.Tensor{"x": tensor.From([]float32{42, 7}, 1, 2)})
			if r.TraceID != trace || r.RequestID != "doomed-1" || r.Model != "slow" || r.InputDigest != want ||
				r.Status != audit.StatusError || r.Code != 500 || !strings.HasPrefix(r.Error, Interrupted) {
				t.Errorf("recovered record %+v", r)
			}
			t.Logf("%s: %s", mode, r.Error)
			if again, err := j.Recover(context.Background(), app, time.Now()); err != nil || len(again) != 0 {
				t.Errorf("a second recovery appended %d records (%v)", len(again), err)
			}
		})
	}
}

// Requests that finish leave nothing to recover, and the journal is
// emptied once it is large and nothing is in flight.
func TestJournalDone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inflight")
	j, err := OpenJournal(path, true)
	if err != nil {
		t.Fatal(err)
	}
	app := &memAppender{}
	s := New(Options{Appender: app, Journal: j})
	r := &slowRunner{}
	if err := s.AddModel(r); err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	for i := range 3 {
		body := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[%d,1]}]}`, i)
		req, _ := http.NewRequest("POST", "/v2/models/slow/infer", strings.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body.String())
		}
	}
	if app.len() != 3 {
		t.Fatalf("%d records, want 3", app.len())
	}
	pending, err := j.Pending()
	if err != nil || len(pending) != 0 {
		t.Fatalf("%d pending after finished requests (%v)", len(pending), err)
	}
	if b := readOr(path); bytes.Count(b, []byte("\nD ")) != 3 || !bytes.HasPrefix(b, []byte("A 1 ")) {
		t.Errorf("journal:\n%s", b)
	}
	// An entry left without its D (the process died) is pending; one
	// that is torn (it died inside the write) is not.
	if _, err := j.Accept(app.last()); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`A 99 {"kind":"infer`)
	f.Close()
	if pending, _ := j.Pending(); len(pending) != 1 || pending[0].TraceID != app.last().TraceID {
		t.Errorf("pending %v, want the one accepted entry", pending)
	}
	j.Close()
	// A reopened journal numbers on from the largest entry.
	j2, err := OpenJournal(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if j2.seq != 99 {
		t.Errorf("reopened at sequence %d, want 99", j2.seq)
	}
}

func readOr(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// waitFile waits for the child to write path (or to die).
func waitFile(t *testing.T, path string, exited chan error, stderr *bytes.Buffer) []byte {
	t.Helper()
	for {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		select {
		case err := <-exited:
			t.Fatalf("server exited: %v\n%s", err, stderr.Bytes())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func records(t *testing.T, path string) []*audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r, err := audit.Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, r)
	}
	return out
}

// BenchmarkJournal is the journal's cost per request: one accepted line
// and one done line.
func BenchmarkJournal(b *testing.B) {
	j, err := OpenJournal(filepath.Join(b.TempDir(), "inflight"), false)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	rec := &audit.Record{TraceID: strings.Repeat("ab", 16), Time: time.Now(), Model: "m", ModelVersion: "1",
		InputDigest: "sha256:" + strings.Repeat("0", 64), Inputs: []audit.TensorDigest{{Name: "x", DType: "float32", Shape: []int64{1, 8}, Digest: "sha256:" + strings.Repeat("1", 64)}}}
	b.ReportAllocs()
	for b.Loop() {
		done, err := j.Accept(rec)
		if err != nil {
			b.Fatal(err)
		}
		done()
	}
}
