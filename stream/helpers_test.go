package stream

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
)

const testOrigin = "vouch.test/stream"

// testLog is a real audit log in a temporary directory.
func testLog(t testing.TB) *audit.Log {
	return testLogOpts(t, audit.Options{CheckpointInterval: 100 * time.Millisecond, BatchMaxAge: 10 * time.Millisecond})
}

// testLogOpts opens a log with o (its key and NoIndex set here).
func testLogOpts(t testing.TB, o audit.Options) *audit.Log {
	t.Helper()
	skey, _, err := audit.GenerateKey(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	o.SignerKey, o.NoIndex = skey, true
	l, err := audit.Open(context.Background(), filepath.Join(t.TempDir(), "log"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func record(i int) *audit.Record {
	return &audit.Record{
		TraceID:      fmt.Sprintf("%032x", i+1),
		Time:         time.Date(2026, 12, 1, 12, 0, 0, i*1000, time.UTC),
		Model:        "credit",
		ModelVersion: "3",
		Code:         200,
	}
}

// appendN appends records [from, from+n) and returns when all are
// acknowledged.
func appendN(t testing.TB, l *audit.Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, _, err := l.Append(context.Background(), record(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// seenSet collects delivered log indexes, counting repeats.
type seenSet struct {
	mu   sync.Mutex
	idx  map[uint64]int
	cond chan struct{}
}

func newSeen() *seenSet { return &seenSet{idx: map[uint64]int{}, cond: make(chan struct{}, 1)} }

func (s *seenSet) add(i uint64) {
	s.mu.Lock()
	s.idx[i]++
	s.mu.Unlock()
	select {
	case s.cond <- struct{}{}:
	default:
	}
}

// wait returns when indexes 0..n-1 were all seen, or fails after d.
func (s *seenSet) wait(t testing.TB, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		s.mu.Lock()
		got := 0
		for i := range uint64(n) {
			if s.idx[i] > 0 {
				got++
			}
		}
		s.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-s.cond:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v: %d of %d log indexes delivered", d, got, n)
		}
	}
}

func (s *seenSet) dups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := 0
	for _, c := range s.idx {
		d += c - 1
	}
	return d
}

func (s *seenSet) extra(n int) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for i := range s.idx {
		if i >= uint64(n) {
			out = append(out, i)
		}
	}
	return out
}

func runExporter(t testing.TB, l *audit.Log, sink Sink, cursor string) (*Exporter, context.CancelFunc, <-chan error) {
	t.Helper()
	e, err := New(l, sink, Options{Name: "test", CursorPath: cursor, Poll: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return e, cancel, done
}
