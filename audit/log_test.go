package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/vouchml/vouch/audit/index"
)

const testOrigin = "vouch.test/audit"

var testKeys = sync.OnceValues(func() ([2]string, error) {
	s, v, err := GenerateKey(testOrigin)
	return [2]string{s, v}, err
})

func keys(t testing.TB) (skey, vkey string) {
	k, err := testKeys()
	if err != nil {
		t.Fatal(err)
	}
	return k[0], k[1]
}

func testRecord(i int) *Record {
	c := 0.75
	return &Record{
		TraceID:       fmt.Sprintf("%032x", i+1),
		RequestID:     fmt.Sprint("req-", i),
		Time:          time.Date(2025, 3, 1, 12, 0, 0, i*1000, time.UTC),
		Principal:     []string{"alice", "bob"}[i%2],
		SourceAddr:    "127.0.0.1:5000",
		Model:         []string{"credit", "resnet"}[i%2],
		ModelVersion:  "1",
		BundleDigest:  "sha256:" + fmt.Sprintf("%064x", 7),
		PlanDigest:    "sha256:" + fmt.Sprintf("%064x", 8),
		Precision:     "fp32",
		InputDigest:   "sha256:" + fmt.Sprintf("%064x", i),
		Inputs:        []TensorDigest{{Name: "x", DType: "float32", Shape: []int64{1, 30}, Digest: "sha256:" + fmt.Sprintf("%064x", i)}},
		OutputDigest:  "sha256:" + fmt.Sprintf("%064x", i+1),
		OutputLabel:   []string{"approve", "deny", "deny"}[i%3],
		Confidence:    &c,
		LatencyMicros: int64(100 + i),
		Code:          200,
	}
}

func openTest(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	if opts.SignerKey == "" {
		opts.SignerKey, _ = keys(t)
	}
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = 100 * time.Millisecond
	}
	l, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// appendN appends n test records from conc goroutines and returns their
// indexes by record number.
func appendN(t testing.TB, l *Log, from, n, conc int) []uint64 {
	t.Helper()
	idx := make([]uint64, n)
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += conc {
				rec := testRecord(from + i)
				k, leaf, err := l.Append(context.Background(), rec)
				if err != nil {
					errs <- err
					return
				}
				data, _ := rec.MarshalCanonical()
				if leaf != tlog.RecordHash(data) {
					errs <- fmt.Errorf("leaf hash of %d", i)
					return
				}
				idx[i] = k
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return idx
}

func TestLogAppendShowReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, vkey := keys(t)
	l := openTest(t, dir, Options{})
	idx := appendN(t, l, 0, 600, 8)
	seen := map[uint64]bool{}
	for _, k := range idx {
		if seen[k] || k >= 600 {
			t.Fatalf("index %d repeated or out of range", k)
		}
		seen[k] = true
	}
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	inc, err := l.Show(ctx, testRecord(17).TraceID)
	if err != nil {
		t.Fatal(err)
	}
	rec, cp, err := inc.Verify(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if rec.TraceID != testRecord(17).TraceID || inc.Index != idx[17] || cp.Size < 600 {
		t.Fatalf("show: got trace %s index %d size %d", rec.TraceID, inc.Index, cp.Size)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Reopen for writing: indexes continue.
	l = openTest(t, dir, Options{})
	idx2 := appendN(t, l, 600, 10, 1)
	if idx2[0] != 600 || idx2[9] != 609 {
		t.Fatalf("after reopen: indexes %v", idx2)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Read-only, as the CLI opens it while a server runs.
	ro, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(ctx)
	if _, _, err := ro.Append(ctx, testRecord(1)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only append: %v", err)
	}
	n := 0
	if err := ro.Query(ctx, index.Filter{Model: "credit", Label: "deny"}, func(r index.Row) error {
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// i even (credit) and i%3 != 0 (deny), for i < 610.
	want := 0
	for i := range 610 {
		if i%2 == 0 && i%3 != 0 {
			want++
		}
	}
	if n != want {
		t.Fatalf("query: %d rows, want %d", n, want)
	}
	if _, err := ro.Show(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("show unknown: %v", err)
	}
	rep, err := Verify(ctx, os.DirFS(dir), VerifyOptions{VerifierKeys: []string{vkey}})
	if err != nil {
		t.Fatalf("verify: %v\n%v", err, rep)
	}
}

func TestAsyncBackpressure(t *testing.T) {
	ctx := context.Background()
	l := openTest(t, t.TempDir(), Options{Durability: Async, MaxPending: 4})
	appendN(t, l, 0, 300, 4)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append(ctx, testRecord(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestWALRecovery(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, vkey := keys(t)
	l := openTest(t, dir, Options{NoIndex: true})
	appendN(t, l, 0, 50, 1)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Forge what a crash leaves: entries durable in the WAL, not in the tree,
	// then a torn frame.
	wl, _, err := openWAL(filepath.Join(dir, "wal"), 1<<20, 50, false)
	if err != nil {
		t.Fatal(err)
	}
	var datas [][]byte
	for i := 50; i < 60; i++ {
		d, _ := testRecord(i).MarshalCanonical()
		datas = append(datas, d)
	}
	if err := wl.write(50, datas); err != nil {
		t.Fatal(err)
	}
	wl.f.WriteAt([]byte{9, 0, 0, 0, 1, 2}, wl.size)
	wl.close()

	l = openTest(t, dir, Options{})
	if got, err := l.Entry(59); err != nil || string(got) != string(datas[9]) {
		t.Fatalf("entry 59 after recovery: %q, %v", got, err)
	}
	if _, err := l.Show(ctx, testRecord(55).TraceID); err != nil {
		t.Fatalf("show recovered: %v", err)
	}
	k, _, err := l.Append(ctx, testRecord(60))
	if err != nil || k != 60 {
		t.Fatalf("append after recovery: %d, %v", k, err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, os.DirFS(dir), VerifyOptions{VerifierKeys: []string{vkey}}); err != nil {
		t.Fatal(err)
	}
}

func TestSecondWriterRefused(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{NoIndex: true})
	defer l.Close(context.Background())
	skey, _ := keys(t)
	if _, err := Open(context.Background(), dir, Options{SignerKey: skey, NoIndex: true}); err == nil {
		t.Fatal("second writer opened the log")
	}
}
