package sqllog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
)

// rec is a test record: trace tr, model m, principal p.
func rec(tr, m, p string) *audit.Record {
	return &audit.Record{TraceID: tr, Time: time.Now().UTC(), Model: m, ModelVersion: "1", Principal: p, Code: 200,
		OutputLabel: "approve"}
}

// traces returns how many rows each trace id has in the shared index,
// read through handle r.
func traces(t *testing.T, r *Records, f index.Filter) map[string]int {
	t.Helper()
	got := map[string]int{}
	if err := r.Query(context.Background(), f, func(row index.Row) error {
		got[row.TraceID]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSharedIndex: records appended through replica A are found, shown
// with a proof and exported through replica B; entries appended by a
// replica that died before it indexed them are found too (caught up from
// the log), exactly once; rows removed from the index are put back from
// the log, and a row changed behind the index's back is caught.
func TestSharedIndex(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	s := signer(t)
	open := func(o Options) *Log {
		o.DSN, o.Signer = dsn, s
		l, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(ctx) })
		return l
	}
	a, b := open(Options{}), open(Options{})
	// Concurrent appends through both, plus a "dead" replica whose
	// appends commit but whose index rows are never written: a process
	// SIGKILLed between the two, as far as the index can tell.
	dead := open(Options{NoIndex: true})
	var wg sync.WaitGroup
	for k, l := range []*Log{a, b, dead} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 120 {
				p := []string{"alice", "bob"}[i%2]
				if _, _, err := l.Append(ctx, rec(fmt.Sprintf("%02d%030x", k, i), "credit", p)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ra, rb := a.Records(), b.Records()
	if dead.Records() != nil {
		t.Fatal("a NoIndex handle has a per-record view")
	}
	got := traces(t, rb, index.Filter{})
	if len(got) != 360 {
		t.Fatalf("the index holds %d traces, want 360 (120 appended by each of three replicas)", len(got))
	}
	for tr, n := range got {
		if n != 1 {
			t.Errorf("trace %s has %d rows", tr, n)
		}
	}
	if n := len(traces(t, ra, index.Filter{Principal: "alice"})); n != 180 {
		t.Errorf("principal alice: %d rows, want 180", n)
	}
	// Byte-wise comparison, as in SQLite: "ALICE" is someone else.
	if n := len(traces(t, ra, index.Filter{Principal: "ALICE"})); n != 0 {
		t.Errorf("principal ALICE: %d rows, want 0", n)
	}
	// Newest first, paged.
	var page []index.Row
	if err := rb.Query(ctx, index.Filter{Newest: true, Limit: 7}, func(r index.Row) error { page = append(page, r); return nil }); err != nil {
		t.Fatal(err)
	}
	var next []index.Row
	if err := rb.Query(ctx, index.Filter{Newest: true, Limit: 7, Before: index.CursorOf(page[6])}, func(r index.Row) error { next = append(next, r); return nil }); err != nil {
		t.Fatal(err)
	}
	all := append(page, next...)
	for i := 1; i < len(all); i++ {
		if c, p := index.CursorOf(all[i]), index.CursorOf(all[i-1]); !c.Time.Before(p.Time) && !(c.Time.Equal(p.Time) && c.Index < p.Index) {
			t.Fatalf("newest-first pages out of order at %d: %+v after %+v", i, c, p)
		}
	}

	// Show on B a record that A appended, and one the dead replica did.
	for _, tr := range []string{fmt.Sprintf("%02d%030x", 0, 5), fmt.Sprintf("%02d%030x", 2, 7)} {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		inc, err := rb.Show(sctx, tr)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		r, cp, err := inc.Verify(a.VerifierKeys()...)
		if err != nil {
			t.Fatalf("show %s: %v", tr, err)
		}
		if r.TraceID != tr || inc.Index >= cp.Size {
			t.Fatalf("show %s: got %s at %d of %d", tr, r.TraceID, inc.Index, cp.Size)
		}
	}
	if _, err := rb.Show(ctx, "ffffffffffffffffffffffffffffffff"); !errors.Is(err, audit.ErrNotFound) {
		t.Errorf("show of an unknown trace: %v, want ErrNotFound", err)
	}

	// Export through A; every record verifies offline.
	var buf bytes.Buffer
	if _, err := b.Records().waitCheckpoint(ctx, 360); err != nil {
		t.Fatal(err)
	}
	n, err := ra.Export(ctx, &buf, index.Filter{Principal: "bob"})
	if err != nil || n != 180 {
		t.Fatalf("export: %d records, %v", n, err)
	}
	_, m, err := audit.VerifyExport(&buf, func(_ *audit.Inclusion, r *audit.Record) error {
		if r.Principal != "bob" {
			return fmt.Errorf("export holds %s's record", r.Principal)
		}
		return nil
	}, a.VerifierKeys()...)
	if err != nil || m != 180 {
		t.Fatalf("the export does not verify: %d records, %v", m, err)
	}

	// Rows removed behind the index's back come back from the log.
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM vouch_index WHERE idx IN (3, 200, 201)"); err != nil {
		t.Fatal(err)
	}
	if got := traces(t, rb, index.Filter{}); len(got) != 360 {
		t.Fatalf("after deleting 3 rows: %d traces, want 360", len(got))
	}
	// A changed row is caught when it is returned.
	if _, err := db.Exec("UPDATE vouch_index SET principal = 'mallory' WHERE idx = 10"); err != nil {
		t.Fatal(err)
	}
	err = rb.Query(ctx, index.Filter{Principal: "mallory"}, func(index.Row) error { return nil })
	if !errors.Is(err, audit.ErrIndex) {
		t.Fatalf("a changed row: %v, want ErrIndex", err)
	}
}

// TestIndexCatchUpAtStart: a replica that appended without indexing (its
// process died before the rows were written) leaves a gap that the next
// replica to start fills from the log, raising the watermark, with no
// query needed.
func TestIndexCatchUpAtStart(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	s := signer(t)
	dead, err := Open(ctx, Options{DSN: dsn, Signer: s, NoIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if _, _, err := dead.Append(ctx, rec(fmt.Sprintf("%032x", i+1), "m", "p")); err != nil {
			t.Fatal(err)
		}
	}
	dead.Close(ctx)
	l, err := Open(ctx, Options{DSN: dsn, Signer: s})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	w, err := l.idx.db.Complete(ctx)
	if err != nil || w != 300 {
		t.Fatalf("watermark %d after start (%v), want 300", w, err)
	}
	if c, err := l.idx.db.Count(ctx, 300); err != nil || c != 300 {
		t.Fatalf("%d rows after start (%v), want 300", c, err)
	}
}

// TestAppendRefusesUnindexable: a record whose model name is longer than
// the index can hold is refused before it reaches the log.
func TestAppendRefusesUnindexable(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	l, err := Open(ctx, Options{DSN: dsn, Signer: signer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if _, _, err := l.Append(ctx, rec("ab", string(bytes.Repeat([]byte("m"), 2000)), "p")); !errors.Is(err, audit.ErrRecord) {
		t.Fatalf("a 2000-byte model name: %v, want ErrRecord", err)
	}
	if n, err := l.st.IntegratedSize(ctx); err != nil || n != 0 {
		t.Fatalf("the log has %d entries (%v), want 0", n, err)
	}
}

// TestReplicasStartTogether: replicas that start at the same moment on an
// empty database all open (tessera's own initialisation of the tree state
// deadlocked one of three when they did, and it exited).
func TestReplicasStartTogether(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	s := signer(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := Open(ctx, Options{DSN: dsn, Signer: s})
			if err == nil {
				_, _, err = l.Append(ctx, rec(fmt.Sprintf("%032x", i+1), "m", "p"))
				l.Close(ctx)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}
