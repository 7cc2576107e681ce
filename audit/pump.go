package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/transparency-dev/tessera"
)

// pumpLoop hands WAL'd entries to tessera in index order, one batch at a
// time, and waits for each batch to be integrated before the next, so that
// a failed batch can be retried without reordering.
func (w *writer) pumpLoop() {
	defer w.wgPump.Done()
	for {
		<-w.pwake
		for {
			w.pmu.Lock()
			n := min(len(w.ppending), int(w.l.opts.BatchMaxSize))
			chunk := w.ppending[:n:n]
			w.ppending = w.ppending[n:]
			closed := w.pclosed
			w.pmu.Unlock()
			if n == 0 {
				if closed {
					return
				}
				break
			}
			w.mu.Lock()
			dead := w.fatal != nil
			w.mu.Unlock()
			if dead {
				// Release the queue so blocked appends see the failure; the
				// entries stay in the WAL for the next Open.
				for range chunk {
					<-w.sem
				}
				continue
			}
			err := w.integrate(chunk)
			if w.stopped.Load() {
				return
			}
			if err != nil {
				w.l.log.Error("audit: entries cannot enter the tree", "from", chunk[0].index, "err", err)
				w.mu.Lock()
				if w.fatal == nil {
					w.fatal = err
				}
				w.mu.Unlock()
				for range chunk {
					<-w.sem
				}
				continue
			}
			w.integ.Store(chunk[n-1].index + 1)
			for range chunk {
				<-w.sem
			}
			if err := w.wal.trim(chunk[n-1].index + 1); err != nil {
				w.l.log.Warn("audit: trim write-ahead log", "err", err)
			}
			if w.l.idx != nil {
				w.imu.Lock()
				if len(w.irows) > 1<<17 {
					w.irows, w.ilag = nil, true // the indexer reads them back from the log
				} else if !w.ilag {
					for _, it := range chunk {
						if it.row.TraceID != "" {
							w.irows = append(w.irows, it.row)
						} else {
							w.ilag = true // recovered from the WAL: no row at hand
						}
					}
				}
				w.imu.Unlock()
				signal(w.iwake)
			}
		}
	}
}

// integrate adds chunk to tessera and waits until every entry is in the
// tree at the index it was promised, retrying after transient failures.
func (w *writer) integrate(chunk []*item) error {
	backoff := 10 * time.Millisecond
	for {
		// Hash first, so that the Adds below are quick: tessera's queue
		// flushes on a timer, and a chunk split across two flushes can be
		// sequenced out of order when the machine is starved (v1.0.4's
		// timer and size flushes race to its work channel).
		ents := make([]*tessera.Entry, len(chunk))
		for i, it := range chunk {
			ents[i] = tessera.NewEntry(it.data)
		}
		futs := make([]tessera.IndexFuture, len(chunk))
		for i, e := range ents {
			futs[i] = w.tess.Add(w.ctx, e)
		}
		var failed error
		moved := 0
		lo, hi := chunk[0].index, chunk[len(chunk)-1].index
		for i, f := range futs {
			got, err := f()
			if err != nil {
				failed = err
				continue
			}
			if got.Index != chunk[i].index {
				if got.Index < lo || got.Index > hi {
					return fmt.Errorf("audit: tessera put entry %d at index %d, outside %d…%d", chunk[i].index, got.Index, lo, hi)
				}
				moved++
			}
		}
		if moved > 0 && failed == nil {
			// Every entry is in the tree, within the chunk's range: the tree
			// and the WAL still agree on its size, but some appends were told
			// an index that now holds another of these entries.
			w.l.log.Error("audit: tessera reordered entries within a batch; their indexes differ from those returned by Append",
				"from", lo, "to", hi, "moved", moved)
		}
		if failed != nil && moved > 0 {
			return fmt.Errorf("audit: tessera reordered and failed entries %d…%d: %w", lo, hi, failed)
		}
		if failed == nil {
			w.tessErr.Store(nil)
			return nil
		}
		w.tessErr.Store(&failed)
		w.l.log.Warn("audit: tessera append failed; retrying", "from", chunk[0].index, "err", failed)
		// Tessera leaves a temporary file behind for each failed write;
		// those older than any write in flight can go.
		if n, _ := w.l.sweepTemps(time.Minute); n > 0 {
			w.l.log.Warn("audit: removed temporary files left by failed writes", "count", n)
		}
		select {
		case <-w.ctx.Done():
			return failed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
		size, err := w.reader.IntegratedSize(w.ctx)
		if err != nil {
			continue
		}
		for len(chunk) > 0 && chunk[0].index < size {
			chunk = chunk[1:]
		}
		if len(chunk) == 0 {
			return nil
		}
		if chunk[0].index != size {
			return fmt.Errorf("audit: tree has %d entries, next entry to add is %d", size, chunk[0].index)
		}
	}
}

// indexLoop writes index rows in transactions, reading entries back from
// the log when rows were dropped or recovered.
func (w *writer) indexLoop() {
	defer w.wgIndex.Done()
	for {
		<-w.iwake
		w.imu.Lock()
		rows, lag, closed := w.irows, w.ilag, w.iclosed
		w.irows, w.ilag = nil, false
		w.imu.Unlock()
		ctx := context.Background()
		if lag {
			n := w.integ.Load()
			if err := w.l.catchUpIndex(ctx, n); err != nil {
				w.l.log.Warn("audit: index catch-up", "err", err)
			} else {
				w.indexed.Store(n)
			}
		} else if err := w.l.idx.Add(ctx, rows); err != nil {
			w.l.log.Warn("audit: index", "err", err)
		} else if len(rows) > 0 {
			w.indexed.Store(rows[len(rows)-1].Index + 1)
		}
		if closed {
			return
		}
	}
}

// waitIndexed waits until every entry appended before the call is indexed.
func (w *writer) waitIndexed(ctx context.Context) error {
	w.mu.Lock()
	n := w.next
	w.mu.Unlock()
	for w.indexed.Load() < n {
		if err := w.waitIntegrated(ctx, n); err != nil {
			return err
		}
		signal(w.iwake)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// waitIntegrated waits until the first n entries are in the tree.
func (w *writer) waitIntegrated(ctx context.Context, n uint64) error {
	for w.integ.Load() < n {
		w.mu.Lock()
		err := w.fatal
		w.mu.Unlock()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
