package cli

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ceSink is a CloudEvents receiver for the CLI tests: it keeps the trace
// id of every response event, one per (type, id).
type ceSink struct {
	mu      sync.Mutex
	traces  map[string]bool // trace ids of inference response events
	ids     map[string]bool // type + id
	repeats int
}

func (c *ceSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("ce-type") + " " + r.Header.Get("ce-id")
	if r.Header.Get("ce-specversion") != "1.0" || r.Header.Get("ce-id") == "" {
		http.Error(w, "not a CloudEvent", 400)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids[key] {
		c.repeats++
	}
	c.ids[key] = true
	if r.Header.Get("ce-type") == "org.kubeflow.serving.inference.response" {
		c.traces[r.Header.Get("ce-traceid")] = true
	}
	w.WriteHeader(http.StatusAccepted)
}

func (c *ceSink) missing(want map[string]bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for tr := range want {
		if !c.traces[tr] {
			n++
		}
	}
	return n
}

// TestExportSurvivesKill: `vouch serve --export http://…` streams every
// record to a CloudEvents receiver while the server is killed with SIGKILL
// three times under load; after the last restart every request that was
// answered 200 has been delivered. Then `vouch audit export --to` backfills
// the whole log into a second receiver.
func TestExportSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vouch and kills it")
	}
	dir := t.TempDir()
	bin := buildVouch(t, dir)
	planFile := buildBC(t, dir)
	data := filepath.Join(dir, "data")
	rc := &ceSink{traces: map[string]bool{}, ids: map[string]bool{}}
	recv := httptest.NewServer(rc)
	defer recv.Close()
	body := `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,30],"data":[` + strings.TrimSuffix(strings.Repeat("0.5,", 30), ",") + `]}]}`

	start := func() (*exec.Cmd, string) {
		return startServeProcess(t, bin, dir, "--plan", planFile+",bc", "--data", data, "--grpc", "",
			"--access-log", "", "--export", recv.URL+"/events")
	}
	answered := map[string]bool{}
	var mu sync.Mutex
	load := func(url string, stop <-chan struct{}, wg *sync.WaitGroup) {
		defer wg.Done()
		cl := &http.Client{Timeout: 5 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := cl.Post(url+"/v2/models/bc/infer", "application/json", strings.NewReader(body))
			if err != nil {
				return // killed
			}
			tr := resp.Header.Get("Vouch-Trace-Id")
			resp.Body.Close()
			if resp.StatusCode == 200 && tr != "" {
				mu.Lock()
				answered[tr] = true
				mu.Unlock()
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	for round := range 4 {
		cmd, url := start()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go load(url, stop, &wg)
		}
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		if round < 3 {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			close(stop)
			wg.Wait()
			continue
		}
		close(stop)
		wg.Wait()
		mu.Lock()
		n := len(answered)
		mu.Unlock()
		if n == 0 {
			t.Fatal("no request was answered")
		}
		deadline := time.Now().Add(20 * time.Second)
		for rc.missing(answered) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if m := rc.missing(answered); m > 0 {
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Fatalf("%d of %d answered requests never reached the receiver\n%s", m, n, b)
		}
		t.Logf("%d answered requests over 3 SIGKILLs, all delivered; %d repeats (at-least-once)", n, rc.repeats)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}

	// Backfill the whole log into a new receiver.
	rc2 := &ceSink{traces: map[string]bool{}, ids: map[string]bool{}}
	recv2 := httptest.NewServer(rc2)
	defer recv2.Close()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if code := m.Run(context.Background(), []string{"audit", "export", "--data", data, "--to", recv2.URL}); code != 0 {
		t.Fatalf("audit export --to: exit %d\n%s", code, errb.String())
	}
	if n := rc2.missing(answered); n > 0 {
		t.Fatalf("backfill: %d answered requests missing\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "delivered log indexes 0 to") {
		t.Errorf("backfill output: %s", out.String())
	}
	// A second backfill resumes at its cursor: it delivers one entry, the
	// access record that it left itself.
	out.Reset()
	if code := m.Run(context.Background(), []string{"audit", "export", "--data", data, "--to", recv2.URL}); code != 0 {
		t.Fatalf("second backfill: exit %d\n%s", code, errb.String())
	}
	var from, to, size int
	if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "delivered"):], "delivered log indexes %d to %d (checkpoint size %d)", &from, &to, &size); err != nil || from != to || to != size-1 {
		t.Errorf("second backfill: %q (%v)", out.String(), err)
	}
}
