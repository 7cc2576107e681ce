package audit

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/vouchml/vouch/audit/index"
)

// Regression (issue 20 D): deleting index rows hid records from query,
// export and replay --since while verify passed.
func TestIndexTamperingCaught(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	appendN(t, l, 0, 300, 4)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM entries WHERE idx = 17"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, ro := range []bool{false, true} {
		opts := Options{}
		if ro {
			_, vkey := keys(t)
			opts.VerifierKeys = []string{vkey}
		} else {
			opts.SignerKey, _ = keys(t)
			opts.CheckpointInterval = 100e6
		}
		l, err := Open(ctx, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		err = l.Query(ctx, index.Filter{Model: "resnet"}, func(index.Row) error { return nil })
		if !errors.Is(err, ErrIndex) {
			t.Fatalf("read-only %v: query over an index with a row deleted: %v", ro, err)
		}
		if _, err := l.Export(ctx, new(discard), index.Filter{}); !errors.Is(err, ErrIndex) {
			t.Fatalf("read-only %v: export: %v", ro, err)
		}
		// The log itself still has it.
		found := false
		if err := l.Scan(ctx, index.Filter{}, func(r index.Row) error {
			found = found || r.Index == 17
			return nil
		}); err != nil || !found {
			t.Fatalf("scan: %v, found %v", err, found)
		}
		l.Close(ctx)
	}

	// A row changed rather than deleted is caught when it is returned.
	l = openTest(t, dir, Options{})
	if err := l.RebuildIndex(ctx); err != nil {
		t.Fatal(err)
	}
	// Appends run concurrently, so which principal entry 18 has varies:
	// count alice's rows, and whether 18 is one of them, before the change.
	alice, was := 0, false
	if err := l.Query(ctx, index.Filter{Principal: "alice"}, func(r index.Row) error {
		alice++
		was = was || r.Index == 18
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if was {
		alice--
	}
	l.Close(ctx)
	db, _ = sql.Open("sqlite", "file:"+filepath.Join(dir, "index.db"))
	if _, err := db.Exec("UPDATE entries SET principal = 'carol' WHERE idx = 18"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	l = openTest(t, dir, Options{})
	defer l.Close(ctx)
	if err := l.Query(ctx, index.Filter{Principal: "carol"}, func(index.Row) error { return nil }); !errors.Is(err, ErrIndex) {
		t.Fatalf("query over a changed row: %v", err)
	}
	n := 0
	if err := l.Query(ctx, index.Filter{Principal: "alice"}, func(index.Row) error { n++; return nil }); err != nil || n != alice {
		t.Fatalf("query of untouched rows: %d, want %d, %v", n, alice, err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
