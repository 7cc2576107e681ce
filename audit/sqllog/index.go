package sqllog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/audit/sqlindex"
)

// The shared index (package sqlindex, tables of its own in the log's
// database) is kept by every replica:
//
//   - each replica indexes what it appends: once an append's transaction
//     has committed, its row is queued and written in a batch (INSERT
//     IGNORE: a row already there is left alone);
//   - a replica killed between the commit and the index write leaves a gap;
//     every replica's catch-up fills gaps from the log's own entries, in the
//     background for entries integrated a tick ago, and before answering
//     any query for every entry in the tree at the time of the query. So
//     a query never misses an acknowledged record, and the primary key
//     keeps it from holding one twice;
//   - the watermark (vouch_index_state.complete) says below which index
//     every row has been seen, so catch-up reads only past it.

// indexer writes this replica's rows and catches the index up.
type indexer struct {
	l   *Log
	db  *sqlindex.DB
	log *slog.Logger

	mu     sync.Mutex
	rows   []index.Row
	closed bool
	wake   chan struct{}

	fill sync.Mutex // one catch-up at a time in this process
	done chan struct{}
}

// rowOf is the index row of entry i, as package audit derives it.
func rowOf(r *audit.Record, i uint64) index.Row {
	kind, status := r.Kind, r.Status
	if kind == "" {
		kind = audit.KindInference
	}
	if status == "" {
		status = audit.StatusOK
	}
	return index.Row{Index: i, TraceID: r.TraceID, Time: r.Time.UTC(), Kind: kind, Model: r.Model,
		Version: r.ModelVersion, Principal: r.Principal, Status: status, Label: r.OutputLabel}
}

func newIndexer(l *Log, db *sqlindex.DB, lg *slog.Logger) *indexer {
	x := &indexer{l: l, db: db, log: lg, wake: make(chan struct{}, 1), done: make(chan struct{})}
	return x
}

// queue adds a row this replica appended.
func (x *indexer) queue(r index.Row) {
	x.mu.Lock()
	x.rows = append(x.rows, r)
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// run writes queued rows as they come and, every tick, catches the index
// up to the tree size seen at the previous tick (entries whose appender
// had a tick to index them).
func (x *indexer) run(tick time.Duration) {
	defer close(x.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	var prev uint64
	for {
		select {
		case <-x.wake:
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if prev > 0 {
				if err := x.catchUp(ctx, prev); err != nil {
					x.log.Warn("sqllog: index catch-up", "err", err)
				}
			}
			if n, err := x.l.st.IntegratedSize(ctx); err == nil {
				prev = n
			}
			cancel()
		}
		x.mu.Lock()
		rows, closed := x.rows, x.closed
		x.rows = nil
		x.mu.Unlock()
		if len(rows) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := x.db.Add(ctx, rows); err != nil {
				// Not lost: the entries are in the log, and catch-up
				// indexes them from there.
				x.log.Warn("sqllog: index write failed; catch-up will index these entries from the log",
					"from", rows[0].Index, "count", len(rows), "err", err)
			}
			cancel()
		}
		if closed {
			return
		}
	}
}

// close writes what is queued and stops.
func (x *indexer) close() {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
	<-x.done
}

// catchUp makes the index hold a row for every entry below n, filling the
// gaps past the watermark from the log, and raises the watermark to n.
func (x *indexer) catchUp(ctx context.Context, n uint64) error {
	x.fill.Lock()
	defer x.fill.Unlock()
	w, err := x.db.Complete(ctx)
	if err != nil {
		return err
	}
	for w < n {
		hi := min(n, w+1<<16)
		missing, err := x.db.Missing(ctx, w, hi, 0)
		if err != nil {
			return err
		}
		if err := x.fillFromLog(ctx, missing); err != nil {
			return err
		}
		if err := x.db.SetComplete(ctx, hi); err != nil {
			return err
		}
		w = hi
	}
	return nil
}

// check makes sure no row below n was removed behind the index's back
// (the watermark says they were all there); any that was is filled again
// from the log, with a warning.
func (x *indexer) check(ctx context.Context, n uint64) error {
	c, err := x.db.Count(ctx, n)
	if err != nil || c == n {
		return err
	}
	x.fill.Lock()
	defer x.fill.Unlock()
	missing, err := x.db.Missing(ctx, 0, n, 0)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	x.log.Warn("sqllog: rows below the index's watermark were missing (removed from vouch_index?); filled from the log",
		"count", len(missing), "first", missing[0])
	return x.fillFromLog(ctx, missing)
}

// fillFromLog indexes the given entries (ascending) from the log itself.
func (x *indexer) fillFromLog(ctx context.Context, missing []uint64) error {
	var rows []index.Row
	for k := 0; k < len(missing); {
		// A run of consecutive indexes is read bundle by bundle.
		j := k + 1
		for j < len(missing) && missing[j] == missing[j-1]+1 {
			j++
		}
		start, end := missing[k], missing[j-1]+1
		ents, err := x.l.entries(ctx, start, end)
		if err != nil {
			return err
		}
		if uint64(len(ents)) != end-start {
			return fmt.Errorf("sqllog: index: entries %d…%d: the log returned %d", start, end-1, len(ents))
		}
		for i, e := range ents {
			rec, err := audit.Parse(e)
			if err != nil {
				return fmt.Errorf("sqllog: index entry %d: %w", start+uint64(i), err)
			}
			rows = append(rows, rowOf(rec, start+uint64(i)))
		}
		if len(rows) >= 4096 || j == len(missing) {
			if err := x.db.Add(ctx, rows); err != nil {
				return err
			}
			rows = rows[:0]
		}
		k = j
	}
	return nil
}
