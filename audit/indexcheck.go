package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vouchml/vouch/audit/index"
)

// The index is not authenticated: anyone who can write index.db can delete
// or change rows, and a query answered from it alone would hide records
// while the log itself still verifies. So Query checks, before answering,
//
//   - completeness: the index holds exactly the rows 0…N-1 for the N
//     entries in the tree (a deleted row, anywhere, is caught);
//   - every row it returns against the log: the entry at that index is
//     read and its fields must be the row's (a changed row is caught when
//     it is returned).
//
// What it cannot see is a row changed so that it no longer matches the
// filter: only reading the entries can. [Log.Scan] answers a filter from
// the log itself, without the index, for that assurance.

// ErrIndex is returned (wrapped) when the index disagrees with the log;
// vouch audit index --rebuild remakes it from the log.
var ErrIndex = errors.New("audit: the index does not match the log")

// checkIndex checks that the index holds one row for each entry.
func (l *Log) checkIndex(ctx context.Context) error {
	want := uint64(0)
	if l.w != nil {
		want = l.w.indexed.Load()
	} else if cp, err := l.Checkpoint(); err == nil {
		want = cp.Size
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		count, next, err := l.idx.Count(ctx)
		if err != nil {
			return err
		}
		switch {
		case count != next:
			return fmt.Errorf("%w: it has %d rows for indexes 0…%d: %d rows are missing (rebuild it: vouch audit index --rebuild)", ErrIndex, count, next-1, next-count)
		case next >= want:
			return nil
		case l.w != nil || time.Now().After(deadline):
			return fmt.Errorf("%w: it has %d rows, the log %d entries (rebuild it: vouch audit index --rebuild)", ErrIndex, next, want)
		}
		// Read-only beside a server: its indexer may be a moment behind.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rowChecker checks rows against the entries they name, reading each entry
// bundle once.
type rowChecker struct {
	l      *Log
	bundle uint64
	ents   [][]byte
}

func (c *rowChecker) check(r index.Row) error {
	n := r.Index / tileWidth
	if c.ents == nil || n != c.bundle || int(r.Index%tileWidth) >= len(c.ents) {
		w := tileWidth
		if cp, err := c.l.Checkpoint(); err == nil && cp.Size < (n+1)*tileWidth {
			w = int(max(cp.Size, r.Index+1) - n*tileWidth)
		}
		if c.l.w != nil {
			w = int(min(uint64(tileWidth), max(c.l.w.integ.Load(), r.Index+1)-n*tileWidth))
		}
		ents, p, err := readBundle(c.l.fsys, n, w)
		if err != nil {
			return fmt.Errorf("%w: row %d: %s: %w", ErrIndex, r.Index, p, err)
		}
		c.bundle, c.ents = n, ents
	}
	rec, err := Parse(c.ents[r.Index%tileWidth])
	if err != nil {
		return fmt.Errorf("%w: entry %d: %w", ErrIndex, r.Index, err)
	}
	got := rowOf(rec, r.Index)
	if got.Time.UnixNano() != r.Time.UnixNano() || got.TraceID != r.TraceID || got.Kind != r.Kind || got.Model != r.Model ||
		got.Version != r.Version || got.Principal != r.Principal || got.Status != r.Status || got.Label != r.Label {
		return fmt.Errorf("%w: row %d says %+v, the log's entry %+v (rebuild it: vouch audit index --rebuild)", ErrIndex, r.Index, r, got)
	}
	return nil
}

// Scan calls fn for each entry that f selects, in log order, reading the
// log's entries themselves rather than the index: slower, and immune to a
// tampered index. On a writable log it covers the entries in the tree.
func (l *Log) Scan(ctx context.Context, f index.Filter, fn func(index.Row) error) error {
	var size uint64
	if l.w != nil {
		size = l.w.integ.Load()
	} else {
		cp, err := l.Checkpoint()
		if err != nil {
			return err
		}
		size = cp.Size
	}
	n := 0
	for b := uint64(0); b*tileWidth < size; b++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, p, err := readBundle(l.fsys, b, int(min(size-b*tileWidth, tileWidth)))
		if err != nil {
			return fmt.Errorf("audit: scan: %s: %w", p, err)
		}
		for k, e := range ents {
			rec, err := Parse(e)
			if err != nil {
				return fmt.Errorf("audit: scan: entry %d: %w", b*tileWidth+uint64(k), err)
			}
			r := rowOf(rec, b*tileWidth+uint64(k))
			if !f.Match(r) {
				continue
			}
			if err := fn(r); err != nil {
				return err
			}
			if n++; f.Limit > 0 && n >= f.Limit {
				return nil
			}
		}
	}
	return nil
}
