// Package sqlindex is the audit log's lookup table kept in MariaDB (or
// MySQL), for the log that several replicas share (package audit/sqllog):
// the same rows and filters as package index, the embedded SQLite index,
// in tables of its own beside tessera's.
//
// Like the SQLite index it is a cache of the log: every row names its
// entry's index, readers check the entry itself, and any row can be
// rebuilt from the log. Rows are written idempotently: the entry's index is
// the primary key and a row is inserted with INSERT IGNORE, so a replica
// that indexes what it appended, another that fills a gap from the log and
// a repeat after a crash all leave one row per entry, never two. Its
// schema, version 1:
//
//	CREATE TABLE vouch_index (
//	  idx       BIGINT UNSIGNED NOT NULL PRIMARY KEY, -- the entry's index in the log
//	  trace_id  VARBINARY(1024) NOT NULL,
//	  time_ns   BIGINT NOT NULL,                      -- Unix nanoseconds
//	  kind      VARBINARY(1024) NOT NULL,             -- "inference" or "access"
//	  model     VARBINARY(1024) NOT NULL,
//	  version   VARBINARY(1024) NOT NULL,
//	  principal VARBINARY(1024) NOT NULL,
//	  status    VARBINARY(1024) NOT NULL,
//	  label     VARBINARY(1024) NOT NULL,
//	  KEY (trace_id), KEY (time_ns, idx), KEY (model, time_ns, idx),
//	  KEY (principal, time_ns, idx), KEY (label, time_ns, idx)
//	);
//	CREATE TABLE vouch_index_state (
//	  id       TINYINT UNSIGNED NOT NULL PRIMARY KEY, -- 0
//	  version  INT UNSIGNED NOT NULL,                 -- 1
//	  complete BIGINT UNSIGNED NOT NULL               -- rows 0…complete-1 are all present
//	);
//
// Strings are compared byte for byte (VARBINARY), as SQLite compares them,
// not under a case-insensitive collation. A field longer than [MaxField]
// bytes cannot be indexed; package sqllog refuses to append such a record.
//
// complete is a watermark: every replica advances it (never back) once it
// has seen, or filled from the log, every row below it. Filling a gap
// from the log is the caller's (package sqllog); this package only finds
// the gaps ([DB.Missing]).
package sqlindex

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit/index"
)

// SchemaVersion is the version in vouch_index_state.
const SchemaVersion = 1

// MaxField is the longest string (in bytes) a row may hold in any column.
const MaxField = 1024

var schema = []string{
	"CREATE TABLE IF NOT EXISTS `vouch_index` (" +
		"`idx` BIGINT UNSIGNED NOT NULL, `trace_id` VARBINARY(1024) NOT NULL, `time_ns` BIGINT NOT NULL, " +
		"`kind` VARBINARY(1024) NOT NULL, `model` VARBINARY(1024) NOT NULL, `version` VARBINARY(1024) NOT NULL, " +
		"`principal` VARBINARY(1024) NOT NULL, `status` VARBINARY(1024) NOT NULL, `label` VARBINARY(1024) NOT NULL, " +
		"PRIMARY KEY (`idx`), KEY `vouch_index_trace` (`trace_id`), KEY `vouch_index_time` (`time_ns`, `idx`), " +
		"KEY `vouch_index_model` (`model`, `time_ns`, `idx`), KEY `vouch_index_principal` (`principal`, `time_ns`, `idx`), " +
		"KEY `vouch_index_label` (`label`, `time_ns`, `idx`)) ENGINE=InnoDB",
	"CREATE TABLE IF NOT EXISTS `vouch_index_state` (" +
		"`id` TINYINT UNSIGNED NOT NULL, `version` INT UNSIGNED NOT NULL, `complete` BIGINT UNSIGNED NOT NULL, " +
		"PRIMARY KEY (`id`)) ENGINE=InnoDB",
	fmt.Sprintf("INSERT IGNORE INTO `vouch_index_state` (`id`, `version`, `complete`) VALUES (0, %d, 0)", SchemaVersion),
}

// Errors, wrapped with detail; test with errors.Is.
var (
	ErrSchema = errors.New("sqlindex: unsupported schema version")
	ErrField  = errors.New("sqlindex: field too long to index")
)

// A DB is the shared index in one database. It is safe for concurrent use,
// and any number of processes may use one database at once.
type DB struct {
	db *sql.DB
}

// Open creates the index's tables in db when they are absent (every
// replica runs the same idempotent statements) and checks their version.
// The caller keeps db open while the DB is used, and closes it.
func Open(ctx context.Context, db *sql.DB) (*DB, error) {
	for _, q := range schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("sqlindex: creating the tables: %w", err)
		}
	}
	var v int
	if err := db.QueryRowContext(ctx, "SELECT `version` FROM `vouch_index_state` WHERE `id` = 0").Scan(&v); err != nil {
		return nil, fmt.Errorf("sqlindex: %w", err)
	}
	if v != SchemaVersion {
		return nil, fmt.Errorf("%w %d in vouch_index_state (want %d)", ErrSchema, v, SchemaVersion)
	}
	return &DB{db: db}, nil
}

// CheckRow reports whether r fits the table: ErrField names the column.
func CheckRow(r index.Row) error {
	for _, f := range []struct{ name, v string }{{"trace_id", r.TraceID}, {"kind", r.Kind}, {"model", r.Model},
		{"version", r.Version}, {"principal", r.Principal}, {"status", r.Status}, {"label", r.Label}} {
		if len(f.v) > MaxField {
			return fmt.Errorf("%w: %s of %d bytes (limit %d)", ErrField, f.name, len(f.v), MaxField)
		}
	}
	return nil
}

// Add inserts rows in one statement; a row whose index is already present
// is left as it is (the entry it names is the same), so adding again is
// idempotent. Rows need not be consecutive nor sorted.
func (d *DB) Add(ctx context.Context, rows []index.Row) error {
	for len(rows) > 0 {
		n := min(len(rows), 512)
		if err := d.add(ctx, rows[:n]); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func (d *DB) add(ctx context.Context, rows []index.Row) error {
	var b strings.Builder
	b.WriteString("INSERT IGNORE INTO `vouch_index` (`idx`, `trace_id`, `time_ns`, `kind`, `model`, `version`, `principal`, `status`, `label`) VALUES ")
	args := make([]any, 0, 9*len(rows))
	for i, r := range rows {
		if err := CheckRow(r); err != nil {
			return fmt.Errorf("sqlindex: entry %d: %w", r.Index, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, r.Index, []byte(r.TraceID), r.Time.UnixNano(), []byte(r.Kind), []byte(r.Model),
			[]byte(r.Version), []byte(r.Principal), []byte(r.Status), []byte(r.Label))
	}
	if _, err := d.db.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("sqlindex: insert entries %d…: %w", rows[0].Index, err)
	}
	return nil
}

// Complete returns the watermark: every row below it is present (unless
// removed behind the index's back; [DB.Count] tells).
func (d *DB) Complete(ctx context.Context) (uint64, error) {
	var n uint64
	if err := d.db.QueryRowContext(ctx, "SELECT `complete` FROM `vouch_index_state` WHERE `id` = 0").Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlindex: %w", err)
	}
	return n, nil
}

// SetComplete raises the watermark to n (never lowers it). The caller MUST
// have seen a row for every index below n.
func (d *DB) SetComplete(ctx context.Context, n uint64) error {
	if _, err := d.db.ExecContext(ctx, "UPDATE `vouch_index_state` SET `complete` = GREATEST(`complete`, ?) WHERE `id` = 0", n); err != nil {
		return fmt.Errorf("sqlindex: %w", err)
	}
	return nil
}

// Reset lowers the watermark to 0 (a rebuild then re-checks every row).
func (d *DB) Reset(ctx context.Context) error {
	if _, err := d.db.ExecContext(ctx, "UPDATE `vouch_index_state` SET `complete` = 0 WHERE `id` = 0"); err != nil {
		return fmt.Errorf("sqlindex: %w", err)
	}
	return nil
}

// Count returns the number of rows with an index below n.
func (d *DB) Count(ctx context.Context, n uint64) (uint64, error) {
	var c uint64
	if err := d.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `vouch_index` WHERE `idx` < ?", n).Scan(&c); err != nil {
		return 0, fmt.Errorf("sqlindex: %w", err)
	}
	return c, nil
}

// Missing returns the indexes in [from, to) that have no row, at most max
// of them (all when max is 0), in order.
func (d *DB) Missing(ctx context.Context, from, to uint64, max int) ([]uint64, error) {
	var out []uint64
	const chunk = 4096
	for lo := from; lo < to; lo += chunk {
		hi := min(to, lo+chunk)
		rows, err := d.db.QueryContext(ctx, "SELECT `idx` FROM `vouch_index` WHERE `idx` >= ? AND `idx` < ? ORDER BY `idx`", lo, hi)
		if err != nil {
			return nil, fmt.Errorf("sqlindex: %w", err)
		}
		next := lo
		for rows.Next() {
			var i uint64
			if err := rows.Scan(&i); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlindex: %w", err)
			}
			for ; next < i; next++ {
				out = append(out, next)
			}
			next = i + 1
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlindex: %w", err)
		}
		for ; next < hi; next++ {
			out = append(out, next)
		}
		if max > 0 && len(out) >= max {
			return out[:max], nil
		}
	}
	return out, nil
}

// Query calls fn for each row that f selects, in the order f asks for
// (index order, or newest first), as package index's Query does; the rows
// are read before fn is first called. Only rows below n are seen (n is
// the log size the caller has checked the index against).
func (d *DB) Query(ctx context.Context, f index.Filter, n uint64, fn func(index.Row) error) error {
	where, args := f.Where(false)
	where = append(where, "idx < ?")
	args = append(args, n)
	q := "SELECT `idx`, `trace_id`, `time_ns`, `kind`, `model`, `version`, `principal`, `status`, `label` FROM `vouch_index` WHERE " +
		strings.Join(where, " AND ")
	if f.Newest {
		q += " ORDER BY `time_ns` DESC, `idx` DESC"
	} else {
		q += " ORDER BY `idx`"
	}
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlindex: %w", err)
	}
	var out []index.Row
	for rows.Next() {
		var r index.Row
		var ns int64
		var tr, kind, model, version, principal, status, label []byte
		if err := rows.Scan(&r.Index, &tr, &ns, &kind, &model, &version, &principal, &status, &label); err != nil {
			rows.Close()
			return fmt.Errorf("sqlindex: %w", err)
		}
		r.TraceID, r.Kind, r.Model, r.Version = string(tr), string(kind), string(model), string(version)
		r.Principal, r.Status, r.Label = string(principal), string(status), string(label)
		r.Time = time.Unix(0, ns).UTC()
		out = append(out, r)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("sqlindex: %w", err)
	}
	for _, r := range out {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
