// Package index is the audit log's lookup table: an SQLite database
// (modernc.org/sqlite, no cgo) with one row per log entry, for finding
// records by trace id and filtering them by time, model, version, principal,
// status and label.
//
// The index is a cache. The log is the truth: every row names the entry's
// index in the log, readers fetch and check the entry itself, and the whole
// table can be dropped and rebuilt from the log. Its schema, version 1:
//
//	CREATE TABLE entries (
//	  idx       INTEGER PRIMARY KEY, -- the entry's index in the log
//	  trace_id  TEXT NOT NULL,
//	  time_ns   INTEGER NOT NULL,    -- Unix nanoseconds
//	  kind      TEXT NOT NULL,       -- "inference" or "access"
//	  model     TEXT NOT NULL,
//	  version   TEXT NOT NULL,
//	  principal TEXT NOT NULL,
//	  status    TEXT NOT NULL,
//	  label     TEXT NOT NULL
//	);
//
// with indexes on trace_id, time_ns, (model, time_ns), (principal,
// time_ns) and (label, time_ns) (the last two added later, made on open
// when missing: a search for a rare caller or outcome reads its rows, not
// the table), and PRAGMA user_version = 1.
package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

const schemaVersion = 1

const schema = `
CREATE TABLE IF NOT EXISTS entries (
  idx       INTEGER PRIMARY KEY,
  trace_id  TEXT NOT NULL,
  time_ns   INTEGER NOT NULL,
  kind      TEXT NOT NULL,
  model     TEXT NOT NULL,
  version   TEXT NOT NULL,
  principal TEXT NOT NULL,
  status    TEXT NOT NULL,
  label     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_trace ON entries(trace_id);
CREATE INDEX IF NOT EXISTS entries_time ON entries(time_ns);
CREATE INDEX IF NOT EXISTS entries_model ON entries(model, time_ns);
CREATE INDEX IF NOT EXISTS entries_principal ON entries(principal, time_ns);
CREATE INDEX IF NOT EXISTS entries_label ON entries(label, time_ns);
PRAGMA user_version = 1;
`

// A Row is one indexed log entry.
type Row struct {
	Index     uint64
	TraceID   string
	Time      time.Time
	Kind      string
	Model     string
	Version   string
	Principal string
	Status    string
	Label     string
}

// A Filter selects rows; zero fields select everything. Since is inclusive,
// Until exclusive. Rows come in index order, at most Limit of them (all when
// Limit is 0); After, when not zero, keeps rows whose index is greater
// (paging: pass the last index of the previous page).
//
// With Newest, rows come newest first instead: by time, then index, both
// descending, which the time and model indexes serve without sorting (a
// search page over millions of rows answers from the first rows it reads).
// Before, when not zero, then keeps the rows that come after it in that
// order (paging: pass the last row of the previous page).
type Filter struct {
	TraceID   string
	Model     string
	Version   string
	Principal string
	Status    string
	Label     string
	Kind      string
	Since     time.Time
	Until     time.Time
	After     uint64
	Newest    bool
	Before    Cursor
	Limit     int
}

// A Cursor is a position in the newest-first order: a row's time and index.
type Cursor struct {
	Time  time.Time
	Index uint64
}

// CursorOf returns the position of r.
func CursorOf(r Row) Cursor { return Cursor{r.Time, r.Index} }

// ErrSchema is returned when the database holds another schema version.
var ErrSchema = errors.New("index: unsupported schema version")

// A DB is an open index. It is safe for concurrent use.
type DB struct {
	db *sql.DB
}

// Open opens (creating if need be) the index database at path. With
// readOnly, it neither creates nor writes.
func Open(path string, readOnly bool) (*DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	if readOnly {
		q.Add("mode", "ro")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Add("_pragma", "cache_size(-16384)")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", path, err)
	}
	d := &DB{db: db}
	if !readOnly {
		db.SetMaxOpenConns(1) // one writer; SQLite serialises anyway
		if _, err := db.Exec(schema); err != nil {
			db.Close()
			return nil, fmt.Errorf("index: create schema in %s: %w", path, err)
		}
	}
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, fmt.Errorf("index: %s: %w", path, err)
	}
	if v != schemaVersion {
		db.Close()
		return nil, fmt.Errorf("%w %d in %s (want %d)", ErrSchema, v, path, schemaVersion)
	}
	return d, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Add inserts rows in one transaction. Rows at or beyond the first row's
// index are replaced, so adding again after a crash is idempotent.
func (d *DB) Add(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "DELETE FROM entries WHERE idx >= ?", int64(rows[0].Index)); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO entries
		(idx, trace_id, time_ns, kind, model, version, principal, status, label)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer st.Close()
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, int64(r.Index), r.TraceID, r.Time.UnixNano(), r.Kind,
			r.Model, r.Version, r.Principal, r.Status, r.Label); err != nil {
			return fmt.Errorf("index: insert entry %d: %w", r.Index, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// Next returns one past the highest index present (0 when empty): where a
// catch-up from the log starts.
func (d *DB) Next(ctx context.Context) (uint64, error) {
	var n sql.NullInt64
	if err := d.db.QueryRowContext(ctx, "SELECT MAX(idx) FROM entries").Scan(&n); err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	if !n.Valid {
		return 0, nil
	}
	return uint64(n.Int64) + 1, nil
}

// Reset deletes every row, before a rebuild.
func (d *DB) Reset(ctx context.Context) error {
	if _, err := d.db.ExecContext(ctx, "DELETE FROM entries"); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// Where returns the SQL conditions (joined by AND) and their arguments that
// select f's rows from a table of this schema, without Limit and order; the
// SQL shared by this index and the shared one (package sqlindex). With
// rowValues, the Newest page cursor is one row-value comparison, which
// SQLite answers with one index seek; without, the equivalent OR.
func (f Filter) Where(rowValues bool) (where []string, args []any) {
	eq := func(col, v string) {
		if v != "" {
			where = append(where, col+" = ?")
			args = append(args, v)
		}
	}
	eq("trace_id", f.TraceID)
	eq("model", f.Model)
	eq("version", f.Version)
	eq("principal", f.Principal)
	eq("status", f.Status)
	eq("label", f.Label)
	eq("kind", f.Kind)
	if !f.Since.IsZero() {
		where = append(where, "time_ns >= ?")
		args = append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		where = append(where, "time_ns < ?")
		args = append(args, f.Until.UnixNano())
	}
	if f.After > 0 {
		where = append(where, "idx > ?")
		args = append(args, int64(f.After))
	}
	if f.Newest && !f.Before.Time.IsZero() {
		t, i := f.Before.Time.UnixNano(), int64(f.Before.Index)
		if rowValues {
			where = append(where, "(time_ns, idx) < (?, ?)")
			args = append(args, t, i)
		} else {
			where = append(where, "(time_ns < ? OR (time_ns = ? AND idx < ?))")
			args = append(args, t, t, i)
		}
	}
	return where, args
}

// Query calls fn for each row that f selects, in index order, stopping at
// the first error fn returns.
func (d *DB) Query(ctx context.Context, f Filter, fn func(Row) error) error {
	where, args := f.Where(true)
	q := "SELECT idx, trace_id, time_ns, kind, model, version, principal, status, label FROM entries"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Newest {
		q += " ORDER BY time_ns DESC, idx DESC"
	} else {
		q += " ORDER BY idx"
	}
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	// Collect first: fn may read the log while SQLite would hold a read
	// transaction open on our single connection.
	var out []Row
	for rows.Next() {
		var r Row
		var idx, ns int64
		if err := rows.Scan(&idx, &r.TraceID, &ns, &r.Kind, &r.Model, &r.Version, &r.Principal, &r.Status, &r.Label); err != nil {
			rows.Close()
			return fmt.Errorf("index: %w", err)
		}
		r.Index, r.Time = uint64(idx), time.Unix(0, ns).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return fmt.Errorf("index: %w", err)
	}
	rows.Close()
	for _, r := range out {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Count returns the number of rows and one past the highest index (0, 0
// when empty). The rows of a complete index are exactly 0…next-1, so
// count < next means rows were deleted.
func (d *DB) Count(ctx context.Context) (count, next uint64, err error) {
	var c int64
	var m sql.NullInt64
	if err := d.db.QueryRowContext(ctx, "SELECT COUNT(*), MAX(idx) FROM entries").Scan(&c, &m); err != nil {
		return 0, 0, fmt.Errorf("index: %w", err)
	}
	if m.Valid {
		next = uint64(m.Int64) + 1
	}
	return uint64(c), next, nil
}

// Match reports whether r is selected by f, as Query's SQL selects it; for
// filtering rows computed from the log itself.
func (f Filter) Match(r Row) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	return eq(f.TraceID, r.TraceID) && eq(f.Model, r.Model) && eq(f.Version, r.Version) &&
		eq(f.Principal, r.Principal) && eq(f.Status, r.Status) && eq(f.Label, r.Label) && eq(f.Kind, r.Kind) &&
		(f.Since.IsZero() || r.Time.UnixNano() >= f.Since.UnixNano()) &&
		(f.Until.IsZero() || r.Time.UnixNano() < f.Until.UnixNano())
}
