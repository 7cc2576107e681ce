package sqlindex

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
)

// TestSameAnswersAsSQLite: the same rows in the embedded SQLite index and
// in the shared MariaDB index give the same rows, in the same order, for
// every filter the server and the console use (equality on each column,
// time ranges, After paging, newest first with a page cursor, limits),
// including strings that differ only in case or trailing spaces, which a
// default MariaDB collation would have taken as equal.
func TestSameAnswersAsSQLite(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	shared, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	local, err := index.Open(filepath.Join(t.TempDir(), "index.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()

	rng := rand.New(rand.NewPCG(17, 1))
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	var rows []index.Row
	for i := range 600 {
		rows = append(rows, index.Row{Index: uint64(i), TraceID: fmt.Sprintf("%032x", rng.IntN(400)),
			Time: t0.Add(time.Duration(rng.IntN(300)) * time.Second), Kind: pick("inference", "inference", "access"),
			Model: pick("credit", "Credit", "credit ", "fraud"), Version: pick("1", "2"), Principal: pick("alice", "ALICE", "bob"),
			Status: pick("ok", "ok", "error"), Label: pick("approve", "deny", "")})
	}
	if err := local.Add(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// Added out of order and twice over: the shared index keeps one row each.
	shuffled := append([]index.Row(nil), rows...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if err := shared.Add(ctx, shuffled[:400]); err != nil {
		t.Fatal(err)
	}
	if err := shared.Add(ctx, shuffled); err != nil {
		t.Fatal(err)
	}
	if c, err := shared.Count(ctx, 600); err != nil || c != 600 {
		t.Fatalf("%d rows after adding 600 rows, 400 of them twice (%v)", c, err)
	}

	mid := index.CursorOf(rows[300])
	filters := []index.Filter{
		{}, {Model: "credit"}, {Model: "Credit"}, {Model: "credit "}, {Principal: "alice"}, {Principal: "ALICE"},
		{Version: "2", Status: "error"}, {Label: "approve", Kind: "inference"}, {Label: ""}, {Kind: "access"},
		{TraceID: rows[7].TraceID}, {TraceID: "nope"},
		{Since: t0.Add(100 * time.Second), Until: t0.Add(200 * time.Second)},
		{Model: "fraud", Since: t0.Add(50 * time.Second)},
		{After: 250, Limit: 40}, {Limit: 10},
		{Newest: true, Limit: 25}, {Newest: true, Model: "credit", Limit: 7},
		{Newest: true, Before: mid, Limit: 30}, {Newest: true, Before: mid, Principal: "bob"},
		{Newest: true, Before: index.Cursor{Time: rows[300].Time, Index: 0}},
	}
	collect := func(q func(index.Filter, func(index.Row) error) error, f index.Filter) []index.Row {
		var out []index.Row
		if err := q(f, func(r index.Row) error { out = append(out, r); return nil }); err != nil {
			t.Fatalf("filter %+v: %v", f, err)
		}
		return out
	}
	for _, f := range filters {
		want := collect(func(f index.Filter, fn func(index.Row) error) error { return local.Query(ctx, f, fn) }, f)
		got := collect(func(f index.Filter, fn func(index.Row) error) error { return shared.Query(ctx, f, 600, fn) }, f)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("filter %+v: the shared index gave %d rows, SQLite %d (or in another order)", f, len(got), len(want))
		}
	}
	// Rows at or past the size the caller checked are not seen.
	if got := collect(func(f index.Filter, fn func(index.Row) error) error { return shared.Query(ctx, f, 100, fn) }, index.Filter{}); len(got) != 100 {
		t.Errorf("a query below 100 gave %d rows", len(got))
	}
}

// TestMissingAndWatermark: gaps are found wherever they are, and the
// watermark only rises.
func TestMissingAndWatermark(t *testing.T) {
	dsn := sqltest.Start(t)
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	x, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var rows []index.Row
	for i := range 10000 {
		if i == 0 || i == 4095 || i == 4096 || i == 9999 || (i >= 5000 && i < 5010) {
			continue
		}
		rows = append(rows, index.Row{Index: uint64(i), TraceID: "t", Time: time.Unix(0, int64(i)), Kind: "inference", Status: "ok"})
	}
	if err := x.Add(ctx, rows); err != nil {
		t.Fatal(err)
	}
	m, err := x.Missing(ctx, 0, 10000, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{0, 4095, 4096, 5000, 5001, 5002, 5003, 5004, 5005, 5006, 5007, 5008, 5009, 9999}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("missing %v, want %v", m, want)
	}
	if m, _ := x.Missing(ctx, 4096, 5003, 0); !reflect.DeepEqual(m, []uint64{4096, 5000, 5001, 5002}) {
		t.Fatalf("missing in [4096, 5003): %v", m)
	}
	if m, _ := x.Missing(ctx, 0, 10000, 3); len(m) != 3 {
		t.Fatalf("max 3: %v", m)
	}
	for _, n := range []uint64{50, 20, 70} {
		if err := x.SetComplete(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if w, err := x.Complete(ctx); err != nil || w != 70 {
		t.Fatalf("watermark %d (%v), want 70", w, err)
	}
	// A second Open (another replica) keeps what is there.
	if _, err := Open(ctx, db); err != nil {
		t.Fatal(err)
	}
	if w, _ := x.Complete(ctx); w != 70 {
		t.Fatalf("watermark %d after a second open, want 70", w)
	}
	if err := x.Add(ctx, []index.Row{{Index: 1, Model: string(make([]byte, MaxField+1))}}); err == nil {
		t.Fatal("a row with a field over MaxField was added")
	}
}
