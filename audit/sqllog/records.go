package sqllog

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"time"

	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
)

// Records is the per-record view of the shared log, as *audit.Log gives it
// of a log directory: lookups through the shared index, each record with
// its RFC 6962 inclusion proof against the log's signed checkpoint, and
// exports that audit.VerifyExport checks. It is what the server's audit
// API (/v1/audit) and the console read on every replica; proofs come from
// the shared log, whichever replica appended the record.
type Records struct {
	l *Log
}

// Records returns the per-record view; nil when the log was opened with
// NoIndex.
func (l *Log) Records() *Records {
	if l.idx == nil {
		return nil
	}
	return &Records{l: l}
}

// Log returns the log the view reads.
func (r *Records) Log() *Log { return r.l }

// Handler serves the log's checkpoint and tiles (see Log.Handler).
func (r *Records) Handler() http.Handler { return r.l.Handler() }

// VerifierKeys returns the keys checkpoints are checked with.
func (r *Records) VerifierKeys() []string { return r.l.keys }

// FS returns the log's C2SP files (see Log.FS).
func (r *Records) FS(ctx context.Context) fs.FS { return r.l.FS(ctx) }

// Checkpoint returns the latest published checkpoint, its signature checked.
func (r *Records) Checkpoint() (*audit.Checkpoint, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.l.Checkpoint(ctx)
}

// Entry returns the entry at index i: a record's canonical encoding.
func (r *Records) Entry(i uint64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := r.l.st.IntegratedSize(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqllog: %w", err)
	}
	if i >= n {
		return nil, fmt.Errorf("%w: entry %d: the log has %d entries", audit.ErrNotFound, i, n)
	}
	ents, err := r.l.entries(ctx, i, i+1)
	if err != nil {
		return nil, err
	}
	if len(ents) != 1 {
		return nil, fmt.Errorf("sqllog: entry %d not in its bundle", i)
	}
	return ents[0], nil
}

// Query calls fn for each index row that f selects. Before answering it
// brings the index up to every entry in the tree at the time of the call,
// on any replica (filling what is missing from the log itself), so no
// acknowledged record is missed; and it checks each row it returns
// against the entry it names (audit.ErrIndex when they differ).
func (r *Records) Query(ctx context.Context, f index.Filter, fn func(index.Row) error) error {
	n, err := r.l.st.IntegratedSize(ctx)
	if err != nil {
		return fmt.Errorf("sqllog: %w", err)
	}
	x := r.l.idx
	if err := x.catchUp(ctx, n); err != nil {
		return err
	}
	if err := x.check(ctx, n); err != nil {
		return err
	}
	c := &rowChecker{l: r.l, ctx: ctx, size: n}
	return x.db.Query(ctx, f, n, func(row index.Row) error {
		if err := c.check(row); err != nil {
			return err
		}
		return fn(row)
	})
}

// Lookup returns the index rows of the entries with the given trace id.
func (r *Records) Lookup(ctx context.Context, trace string) ([]index.Row, error) {
	var rows []index.Row
	err := r.Query(ctx, index.Filter{TraceID: trace}, func(row index.Row) error {
		rows = append(rows, row)
		return nil
	})
	return rows, err
}

// Show returns the first record with the given trace id (an inference
// record before access records) with its inclusion proof, waiting (until
// ctx ends) for a checkpoint that covers it.
func (r *Records) Show(ctx context.Context, trace string) (*audit.Inclusion, error) {
	rows, err := r.Lookup(ctx, trace)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no record with trace id %q", audit.ErrNotFound, trace)
	}
	pick := rows[0]
	for _, row := range rows {
		if row.Kind == audit.KindInference {
			pick = row
			break
		}
	}
	return r.Prove(ctx, pick.Index)
}

// ShowIndex returns entry i with its inclusion proof.
func (r *Records) ShowIndex(ctx context.Context, i uint64) (*audit.Inclusion, error) {
	n, err := r.l.st.IntegratedSize(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqllog: %w", err)
	}
	if i >= n {
		return nil, fmt.Errorf("%w: the log has %d entries, none at index %d", audit.ErrNotFound, n, i)
	}
	return r.Prove(ctx, i)
}

// Prove returns entry i with its inclusion proof against the latest
// checkpoint, waiting (until ctx ends) for a checkpoint that covers it.
// The inclusion is checked before it is returned.
func (r *Records) Prove(ctx context.Context, i uint64) (*audit.Inclusion, error) {
	cp, err := r.waitCheckpoint(ctx, i+1)
	if err != nil {
		return nil, err
	}
	return r.proveAt(ctx, cp, &tileReader{ctx: ctx, fsys: r.l.FS(ctx)}, i)
}

func (r *Records) waitCheckpoint(ctx context.Context, n uint64) (*audit.Checkpoint, error) {
	for {
		cp, err := r.l.Checkpoint(ctx)
		switch {
		case err == nil && cp.Size >= n:
			return cp, nil
		case errors.Is(err, audit.ErrCheckpoint):
			return nil, err // a bad signature is no reason to wait
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sqllog: waiting for a checkpoint of %d entries: %w (last: %v)", n, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Records) proveAt(ctx context.Context, cp *audit.Checkpoint, tr *tileReader, i uint64) (*audit.Inclusion, error) {
	if i >= cp.Size {
		return nil, fmt.Errorf("sqllog: entry %d is not in the tree of size %d", i, cp.Size)
	}
	ents, err := r.l.entries(ctx, i, i+1)
	if err != nil {
		return nil, err
	}
	if len(ents) != 1 {
		return nil, fmt.Errorf("sqllog: entry %d not in its bundle", i)
	}
	entry := ents[0]
	tree := tlog.Tree{N: int64(cp.Size), Hash: cp.Root}
	p, err := tlog.ProveRecord(tree.N, int64(i), tlog.TileHashReader(tree, tr))
	if err != nil {
		return nil, fmt.Errorf("sqllog: prove entry %d in tree %d: %w", i, cp.Size, err)
	}
	leaf := tlog.RecordHash(entry)
	inc := &audit.Inclusion{Checkpoint: string(cp.Note), Index: i, LeafHash: hex.EncodeToString(leaf[:]),
		Proof: make([]string, len(p)), Record: json.RawMessage(bytes.Clone(entry))}
	for k, h := range p {
		inc.Proof[k] = hex.EncodeToString(h[:])
	}
	// Never hand out evidence that does not check.
	if _, _, err := inc.Verify(r.l.keys...); err != nil {
		return nil, err
	}
	return inc, nil
}

// Export writes the records that f selects, with their inclusion proofs
// against the latest checkpoint, to w, in audit.ExportFormat (checked by
// audit.VerifyExport). Records not yet under a checkpoint are left out.
func (r *Records) Export(ctx context.Context, w io.Writer, f index.Filter) (int, error) {
	cp, err := r.Checkpoint()
	if err != nil {
		return 0, err
	}
	tr := &tileReader{ctx: ctx, fsys: r.l.FS(ctx)}
	n, err := audit.WriteExport(w, cp,
		func(fn func(index.Row) error) error { return r.Query(ctx, f, fn) },
		func(i uint64) (*audit.Inclusion, error) { return r.proveAt(ctx, cp, tr, i) })
	if err != nil {
		return n, fmt.Errorf("sqllog: export: %w", err)
	}
	return n, nil
}

// tileReader serves tlog's TileHashReader from the database's hash tiles;
// tlog authenticates every tile against the checkpoint's root.
type tileReader struct {
	ctx   context.Context
	fsys  fs.FS
	cache map[tlog.Tile][]byte
}

func (t *tileReader) Height() int { return layout.TileHeight }

func (t *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tl := range tiles {
		if b, ok := t.cache[tl]; ok {
			out[i] = b
			continue
		}
		if tl.L < 0 || tl.N < 0 || tl.W <= 0 || tl.W > layout.TileWidth {
			return nil, fmt.Errorf("sqllog: bad tile %+v", tl)
		}
		w := uint8(tl.W % layout.TileWidth) // 0: a full tile
		b, err := fs.ReadFile(t.fsys, layout.TilePath(uint64(tl.L), uint64(tl.N), w))
		if err != nil {
			return nil, fmt.Errorf("sqllog: tile %d/%d (width %d): %w", tl.L, tl.N, tl.W, err)
		}
		out[i] = b
	}
	return out, nil
}

func (t *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	if t.cache == nil || len(t.cache) > 4096 {
		t.cache = make(map[tlog.Tile][]byte)
	}
	for i, tl := range tiles {
		t.cache[tl] = data[i]
	}
}

// rowChecker checks index rows against the entries they name, reading
// each entry bundle once.
type rowChecker struct {
	l      *Log
	ctx    context.Context
	size   uint64
	bundle uint64
	ents   [][]byte
}

func (c *rowChecker) check(row index.Row) error {
	n := row.Index / layout.EntryBundleWidth
	if c.ents == nil || n != c.bundle {
		start := n * layout.EntryBundleWidth
		ents, err := c.l.entries(c.ctx, start, min(c.size, start+layout.EntryBundleWidth))
		if err != nil {
			return fmt.Errorf("%w: row %d: %w", audit.ErrIndex, row.Index, err)
		}
		c.bundle, c.ents = n, ents
	}
	k := row.Index % layout.EntryBundleWidth
	if k >= uint64(len(c.ents)) {
		return fmt.Errorf("%w: row %d names an entry beyond the log's %d", audit.ErrIndex, row.Index, c.size)
	}
	rec, err := audit.Parse(c.ents[k])
	if err != nil {
		return fmt.Errorf("%w: entry %d: %w", audit.ErrIndex, row.Index, err)
	}
	got := rowOf(rec, row.Index)
	if got.Time.UnixNano() != row.Time.UnixNano() || got.TraceID != row.TraceID || got.Kind != row.Kind || got.Model != row.Model ||
		got.Version != row.Version || got.Principal != row.Principal || got.Status != row.Status || got.Label != row.Label {
		return fmt.Errorf("%w: row %d says %+v, the log's entry %+v (delete the row: DELETE FROM vouch_index WHERE idx = %d; the next query refills it from the log)",
			audit.ErrIndex, row.Index, row, got, row.Index)
	}
	return nil
}
