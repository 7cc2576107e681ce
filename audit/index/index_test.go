package index

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	db, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows []Row
	for i := range 100 {
		rows = append(rows, Row{Index: uint64(i), TraceID: string(rune('a' + i%26)), Time: t0.Add(time.Duration(i) * time.Second),
			Kind: "inference", Model: []string{"m1", "m2"}[i%2], Version: "1", Principal: "p", Status: "ok", Label: "x"})
	}
	if err := db.Add(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// Adding again from 90 (after a crash) replaces, not duplicates.
	if err := db.Add(ctx, rows[90:]); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Next(ctx); err != nil || n != 100 {
		t.Fatalf("Next = %d, %v", n, err)
	}
	count := func(f Filter) int {
		n := 0
		if err := db.Query(ctx, f, func(Row) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		f    Filter
		want int
	}{
		{Filter{}, 100}, {Filter{Model: "m1"}, 50}, {Filter{TraceID: "c"}, 4},
		{Filter{Since: t0.Add(10 * time.Second), Until: t0.Add(20 * time.Second)}, 10},
		{Filter{Model: "m2", Limit: 3}, 3}, {Filter{Status: "error"}, 0},
		{Filter{After: 89}, 10}, {Filter{Model: "m1", After: 89, Limit: 3}, 3}, {Filter{After: 99}, 0},
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%+v: %d rows, want %d", c.f, got, c.want)
		}
	}
	// Newest first, paged by cursor: every row once, in descending time.
	var seen []uint64
	f := Filter{Model: "m1", Newest: true, Limit: 7}
	for {
		var page []Row
		if err := db.Query(ctx, f, func(r Row) error { page = append(page, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			seen = append(seen, r.Index)
		}
		f.Before = CursorOf(page[len(page)-1])
	}
	if len(seen) != 50 || seen[0] != 98 || seen[49] != 0 {
		t.Fatalf("newest-first pages: %v", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			t.Fatalf("newest-first pages out of order: %v", seen)
		}
	}
	stop := errors.New("stop")
	if err := db.Query(ctx, Filter{}, func(Row) error { return stop }); err != stop {
		t.Fatalf("fn error not returned: %v", err)
	}
	db.Close()

	ro, err := Open(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var got []Row
	ro.Query(ctx, Filter{TraceID: "b"}, func(r Row) error { got = append(got, r); return nil })
	if len(got) != 4 || got[0].Index != 1 || !got[0].Time.Equal(t0.Add(time.Second)) || got[0].Model != "m2" {
		t.Fatalf("read-only query: %+v", got)
	}
	if err := ro.Add(ctx, rows[:1]); err == nil {
		t.Fatal("read-only index accepted a write")
	}
	if err := ro.Reset(ctx); err == nil {
		t.Fatal("read-only index accepted a reset")
	}
}
