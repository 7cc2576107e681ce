package sqllog

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
)

func signer(t testing.TB) audit.Signer {
	skey, _, err := audit.GenerateKey("vouch.test/shared")
	if err != nil {
		t.Fatal(err)
	}
	s, err := audit.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReplicasShareOneLog: three handles (as three replicas would hold)
// append concurrently to one database; every append gets its own index,
// the entries read back are the records, and the log verifies with the
// audit package's own verifier.
func TestReplicasShareOneLog(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	s := signer(t)
	var logs []*Log
	for range 3 {
		l, err := Open(ctx, Options{DSN: dsn, Signer: s})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close(ctx)
		logs = append(logs, l)
	}
	const per = 200
	var mu sync.Mutex
	got := map[uint64]bool{} // indexes handed out
	var wg sync.WaitGroup
	for r, l := range logs {
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per / 4 {
					rec := &audit.Record{TraceID: fmt.Sprintf("%02d%02d%028x", r, c, i+1), Time: time.Now().UTC(), Model: "m", Code: 200}
					n, _, err := l.Append(ctx, rec)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if got[n] {
						t.Errorf("index %d handed out twice", n)
					}
					got[n] = true
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(got) != 3*per {
		t.Fatalf("%d distinct indexes for %d appends", len(got), 3*per)
	}
	// Wait for a checkpoint covering everything.
	var cp *audit.Checkpoint
	for deadline := time.Now().Add(20 * time.Second); ; {
		var err error
		cp, err = logs[0].Checkpoint(ctx)
		if err == nil && cp.Size >= 3*per {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of %d entries: %v %v", 3*per, cp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ents, err := logs[1].Entries(0, 3*per+10)
	if err != nil || len(ents) != 3*per {
		t.Fatalf("%d entries read back, %v", len(ents), err)
	}
	seen := map[string]bool{}
	for i, e := range ents {
		r, err := audit.Parse(e)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if seen[r.TraceID] {
			t.Errorf("trace %s twice", r.TraceID)
		}
		seen[r.TraceID] = true
	}
	rep, err := audit.Verify(ctx, logs[2].FS(ctx), audit.VerifyOptions{VerifierKeys: logs[0].VerifierKeys(), CheckRecords: true})
	if err != nil {
		t.Fatalf("the shared log does not verify: %v", err)
	}
	if rep.Checkpoint.Size < 3*per {
		t.Errorf("verified %d entries", rep.Checkpoint.Size)
	}
	// The public handler serves it too.
	srv := httptest.NewServer(logs[0].Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || len(b) == 0 {
		t.Errorf("checkpoint served as %q, %d bytes", resp.Header.Get("Content-Type"), len(b))
	}
	hfs, err := audit.HTTPFS(ctx, srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Verify(ctx, hfs, audit.VerifyOptions{VerifierKeys: logs[0].VerifierKeys()}); err != nil {
		t.Fatalf("served over HTTP, the log does not verify: %v", err)
	}
}
