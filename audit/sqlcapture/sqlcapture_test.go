package sqlcapture

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/capture"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
	"github.com/vouchml/vouch/tensor"
)

func inputs(v float32) map[string]*tensor.Tensor {
	return map[string]*tensor.Tensor{
		"x":   tensor.From([]float32{v, -2.5, 3}, 1, 3),
		"ids": tensor.From([]int64{1, 2}, 2),
		"s":   tensor.From([]string{"a", "héllo"}, 2),
	}
}

func digest(t *testing.T, ts map[string]*tensor.Tensor) string {
	d, _, err := audit.InputDigest(ts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSharedCapture: two replicas' stores on one database. An input
// captured by A is read back by B, bit for bit; the two agree on one key
// per model even when both make it at once; a shred through B erases it
// for A too, and a later capture makes a new key; expired blobs are
// purged; a blob moved to another model's row does not decrypt.
func TestSharedCapture(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	open := func() *Store {
		s, err := Open(ctx, db, Options{Retain: 48 * time.Hour, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()

	// Both replicas capture their first input of "credit" at once.
	var wg sync.WaitGroup
	ins := []map[string]*tensor.Tensor{inputs(1), inputs(2), inputs(3), inputs(4)}
	for k, in := range ins {
		s := []*Store{a, b}[k%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put("credit", digest(t, in), in); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	keys, err := b.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].Name != "credit" {
		t.Fatalf("keys after concurrent first captures: %+v, want one for credit", keys)
	}
	for k, in := range ins {
		got, err := []*Store{b, a}[k%2].Get(digest(t, in))
		if err != nil {
			t.Fatalf("input %d, captured by one replica, read by the other: %v", k, err)
		}
		if d := digest(t, got); d != digest(t, in) {
			t.Fatalf("input %d read back with digest %s, want %s", k, d, digest(t, in))
		}
	}
	// Storing the same input again does nothing.
	if err := a.Put("credit", digest(t, ins[0]), ins[0]); err != nil {
		t.Fatal(err)
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM vouch_capture_blob").Scan(&n)
	if n != 4 {
		t.Fatalf("%d blobs for 4 inputs", n)
	}
	if err := a.Put("credit", digest(t, ins[1]), ins[0]); err == nil {
		t.Fatal("Put accepted inputs under another input's digest")
	}

	// A blob moved to another name fails authentication.
	other := inputs(9)
	if err := a.Put("fraud", digest(t, other), other); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE vouch_capture_blob SET name = 'credit' WHERE name = 'fraud'"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(digest(t, other)); !errors.Is(err, capture.ErrCorrupt) {
		t.Fatalf("a blob whose row was changed: %v, want ErrCorrupt", err)
	}

	// Shred through B: A can read none of credit's inputs any more.
	if k, err := b.Shred("credit"); err != nil || k != 1 {
		t.Fatalf("shred: %d keys, %v", k, err)
	}
	if _, err := a.Get(digest(t, ins[0])); !errors.Is(err, capture.ErrNotFound) {
		t.Fatalf("after shred, A reads credit's input: %v, want ErrNotFound", err)
	}
	if _, err := a.Shred("credit"); !errors.Is(err, capture.ErrNotFound) {
		t.Fatalf("second shred: %v, want ErrNotFound", err)
	}
	// A later capture makes a new key, which both read.
	if err := a.Put("credit", digest(t, ins[2]), ins[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(digest(t, ins[2])); err != nil {
		t.Fatalf("capture after shred: %v", err)
	}
	keys, _ = a.Keys()
	live := 0
	for _, k := range keys {
		if k.Name == "credit" && k.Shredded.IsZero() {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("credit has %d live keys after shred and capture: %+v", live, keys)
	}

	// Retention: two days on, the blobs expire.
	now = now.Add(49 * time.Hour)
	purged, err := a.Purge()
	if err != nil || purged != 2 {
		t.Fatalf("purge: %d, %v; want the 2 remaining blobs", purged, err)
	}
	if _, err := b.Get(digest(t, ins[2])); !errors.Is(err, capture.ErrNotFound) {
		t.Fatalf("after purge: %v, want ErrNotFound", err)
	}
}
