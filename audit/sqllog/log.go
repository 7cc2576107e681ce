// Package sqllog is the audit log shared by several vouch servers: one
// C2SP tlog-tiles transparency log kept in MariaDB (or MySQL) through
// tessera's MySQL driver, to which any number of replicas append at once.
//
// Each replica batches its appends; a batch is one database transaction
// that takes the tree state's row lock, writes the entry bundles and hash
// tiles, and commits, so the replicas' entries interleave in one total
// order and an append is acknowledged only once its transaction committed
// (durable as the database is: InnoDB with its default
// innodb_flush_log_at_trx_commit=1). Checkpoints are signed by whichever
// replica publishes next, with the one log key all replicas hold.
//
// The log reads back as an fs.FS at the C2SP paths ([Log.FS]), so that
// audit.Verify, the exporters (package stream) and the public /log/
// handler work on it exactly as on a log directory.
//
// Beside the log, in tables of its own, every replica keeps the shared
// query index (package audit/sqlindex; see index.go for how it stays
// complete when replicas die), and [Log.Records] answers what
// *audit.Log answers of a log directory — show, query and export, with
// inclusion proofs from the shared log — for the server's /v1/audit and
// the console on every replica.
package sqllog

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-sql-driver/mysql" // the database/sql driver tessera's MySQL storage uses
	"github.com/transparency-dev/tessera"
	tmysql "github.com/transparency-dev/tessera/storage/mysql"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/sqlindex"
)

// Options configure Open.
type Options struct {
	// DSN is a go-sql-driver/mysql data source name, e.g.
	// "vouch:secret@tcp(db:3306)/vouch_audit" or "root@unix(/run/mysqld/mysqld.sock)/vouch".
	DSN string
	// Signer signs checkpoints (audit.NewSigner of a key from
	// audit.GenerateKey); every replica of one log holds the same key.
	// Without it the log is read-only.
	Signer audit.Signer
	// VerifierKeys check checkpoints read back (default: SignerKey's).
	VerifierKeys []string
	// BatchMaxAge and BatchMaxSize bound a replica's batch (defaults 50 ms
	// and 1024): the latency and the transaction size of an append.
	BatchMaxAge  time.Duration
	BatchMaxSize uint
	// CheckpointInterval (default and minimum 1 s, the driver's floor).
	CheckpointInterval time.Duration
	// NoIndex leaves out the shared query index (package sqlindex): no
	// Records. By default every handle keeps it (see index.go).
	NoIndex bool
	// IndexTick is how often a replica catches the index up from the log
	// (default 500 ms).
	IndexTick time.Duration
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Log is a handle on the shared log. It implements server.Appender.
type Log struct {
	db     *sql.DB
	st     *tmysql.Storage
	app    *tessera.Appender
	stop   func(context.Context) error
	reader tessera.LogReader
	keys   []string
	cancel context.CancelFunc
	idx    *indexer // nil with NoIndex
}

// Open connects to the database, creates the tables when they are absent,
// and starts this replica's appender.
func Open(ctx context.Context, o Options) (*Log, error) {
	if o.DSN == "" {
		return nil, errors.New("sqllog: no database (DSN)")
	}
	db, err := sql.Open("mysql", o.DSN)
	if err != nil {
		return nil, fmt.Errorf("sqllog: %w", err)
	}
	db.SetMaxOpenConns(16)
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqllog: database: %w", err)
	}
	for _, q := range schema {
		if err := retryDeadlock(ctx, func() error { _, err := db.ExecContext(ctx, q); return err }); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqllog: creating the tables: %w", err)
		}
	}
	st, err := tmysql.New(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqllog: tessera: %w", err)
	}
	l := &Log{db: db, st: st, reader: st, keys: o.VerifierKeys}
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	if !o.NoIndex {
		var xdb *sqlindex.DB
		err := retryDeadlock(ctx, func() (err error) { xdb, err = sqlindex.Open(ctx, db); return err })
		if err != nil {
			db.Close()
			return nil, err
		}
		l.idx = newIndexer(l, xdb, lg)
	}
	if o.Signer == nil {
		if len(l.keys) == 0 {
			db.Close()
			return nil, errors.New("sqllog: a read-only log needs verifier keys")
		}
		if l.idx != nil {
			close(l.idx.done) // no background loop: queries catch up themselves
		}
		return l, nil
	}
	signer := o.Signer
	if len(l.keys) == 0 {
		l.keys = []string{signer.VerifierKey()}
	}
	if o.BatchMaxAge <= 0 {
		o.BatchMaxAge = 50 * time.Millisecond
	}
	if o.BatchMaxSize == 0 {
		o.BatchMaxSize = 1024
	}
	if o.CheckpointInterval < time.Second {
		o.CheckpointInterval = time.Second
	}
	actx, cancel := context.WithCancel(context.Background())
	topts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(o.BatchMaxSize, o.BatchMaxAge).
		WithCheckpointInterval(o.CheckpointInterval)
	app, stop, reader, err := tessera.NewAppender(actx, st, topts)
	if err != nil {
		cancel()
		db.Close()
		return nil, fmt.Errorf("sqllog: tessera: %w", err)
	}
	l.app, l.stop, l.reader, l.cancel = app, stop, reader, cancel
	if l.idx != nil {
		if o.IndexTick <= 0 {
			o.IndexTick = 500 * time.Millisecond
		}
		// Repair at start what a killed replica left unindexed.
		if n, err := st.IntegratedSize(ctx); err == nil {
			if err := l.idx.catchUp(ctx, n); err != nil {
				lg.Warn("sqllog: index catch-up at start", "err", err)
			}
		}
		go l.idx.run(o.IndexTick)
	}
	return l, nil
}

// retryDeadlock runs fn again (up to 10 times) while it fails with
// InnoDB's deadlock error, which replicas creating the tables at the same
// moment may meet; the statements are idempotent.
func retryDeadlock(ctx context.Context, fn func() error) error {
	var err error
	for try := range 10 {
		var me *mysql.MySQLError
		if err = fn(); err == nil || !errors.As(err, &me) || me.Number != 1213 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(10*(try+1)) * time.Millisecond):
		}
	}
	return err
}

// Append adds the record's canonical encoding and returns its index and
// leaf hash once the transaction holding it has committed; its index row
// is then written in the background (see index.go). A record whose index
// fields do not fit the index (sqlindex.MaxField) is refused before it is
// appended.
func (l *Log) Append(ctx context.Context, rec *audit.Record) (uint64, [32]byte, error) {
	var lh [32]byte
	if l.app == nil {
		return 0, lh, audit.ErrReadOnly
	}
	b, err := rec.MarshalCanonical()
	if err != nil {
		return 0, lh, err
	}
	if len(b) > 1<<16-1 {
		return 0, lh, fmt.Errorf("%w: trace %s: %d bytes (limit %d)", audit.ErrTooLarge, rec.TraceID, len(b), 1<<16-1)
	}
	row := rowOf(rec, 0)
	if l.idx != nil {
		if err := sqlindex.CheckRow(row); err != nil {
			return 0, lh, fmt.Errorf("%w: trace %s: %w", audit.ErrRecord, rec.TraceID, err)
		}
	}
	idx, err := l.app.Add(ctx, tessera.NewEntry(b))()
	if err != nil {
		return 0, lh, fmt.Errorf("%w: %v", audit.ErrUnavailable, err)
	}
	if l.idx != nil {
		row.Index = idx.Index
		l.idx.queue(row)
	}
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(b)
	h.Sum(lh[:0])
	return idx.Index, lh, nil
}

// VerifierKeys returns the keys checkpoints are checked with.
func (l *Log) VerifierKeys() []string { return l.keys }

// DB returns the log's database handle, for the tables that live beside
// the log's (package sqlcapture's); it is closed with the log.
func (l *Log) DB() *sql.DB { return l.db }

// Checkpoint returns the latest published checkpoint, its signature checked.
func (l *Log) Checkpoint(ctx context.Context) (*audit.Checkpoint, error) {
	b, err := l.reader.ReadCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqllog: checkpoint: %w", err)
	}
	return audit.ParseCheckpoint(b, l.keys...)
}

// Handler serves the log's checkpoint and tiles read-only at their C2SP
// paths, as audit.Log's Handler does.
func (l *Log) Handler() http.Handler {
	return audit.FSHandler(l.FS(context.Background()))
}

// Close stops this replica's appender (what it acknowledged is committed)
// and closes the database handle.
func (l *Log) Close(ctx context.Context) error {
	var err error
	if l.stop != nil {
		err = l.stop(ctx)
		l.cancel()
	}
	if l.idx != nil {
		l.idx.close()
	}
	return errors.Join(err, l.db.Close())
}
