// Package audittest is the conformance suite for audit.Appender
// implementations: the real log, and any stand-in a test of the server uses.
package audittest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/vouchml/vouch/audit"
)

// Record returns a valid test record numbered i.
func Record(i int) *audit.Record {
	return &audit.Record{
		TraceID:      fmt.Sprintf("%032x", 0xa0000+i),
		Time:         time.Date(2025, 6, 1, 0, 0, 0, i, time.UTC),
		Principal:    "conformance",
		Model:        "m",
		ModelVersion: "1",
		InputDigest:  fmt.Sprintf("sha256:%064x", i),
		Code:         200,
	}
}

// TestAppender checks the Appender contract on a. read, when not nil,
// returns the entry at an index once syncFn has returned; syncFn, when not nil,
// waits until every appended entry is readable.
func TestAppender(t *testing.T, a audit.Appender, read func(index uint64) ([]byte, error), syncFn func(context.Context) error) {
	ctx := context.Background()

	t.Run("LeafHash", func(t *testing.T) {
		rec := Record(0)
		_, leaf, err := a.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		data, err := rec.MarshalCanonical()
		if err != nil {
			t.Fatal(err)
		}
		if want := tlog.RecordHash(data); leaf != want {
			t.Fatalf("leaf hash %x, want SHA-256(0x00 | canonical record) = %x", leaf, want)
		}
	})

	t.Run("DenseConcurrent", func(t *testing.T) {
		const n, conc = 200, 8
		idx := make([]uint64, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for g := range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += conc {
					k, _, err := a.Append(ctx, Record(1+i))
					if err != nil {
						errs <- err
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
		lo, hi, seen := idx[0], idx[0], map[uint64]bool{}
		for _, k := range idx {
			if seen[k] {
				t.Fatalf("index %d assigned twice", k)
			}
			seen[k] = true
			lo, hi = min(lo, k), max(hi, k)
		}
		if hi-lo != n-1 {
			t.Fatalf("indexes %d…%d for %d appends: not dense", lo, hi, n)
		}
		if read == nil {
			return
		}
		if syncFn != nil {
			if err := syncFn(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for i, k := range idx {
			got, err := read(k)
			if err != nil {
				t.Fatalf("read %d: %v", k, err)
			}
			want, _ := Record(1 + i).MarshalCanonical()
			if string(got) != string(want) {
				t.Fatalf("entry %d is %s, want %s", k, got, want)
			}
		}
	})

	t.Run("InvalidRecord", func(t *testing.T) {
		if _, _, err := a.Append(ctx, &audit.Record{}); !errors.Is(err, audit.ErrRecord) {
			t.Fatalf("Append(empty record) = %v, want ErrRecord", err)
		}
	})
}
