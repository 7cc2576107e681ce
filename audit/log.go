package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/vouchml/vouch/audit/index"
)

// An Appender adds records to an audit log. It is the seam between the
// server and the log; the server declares its own copy of this interface.
//
// Append MUST encode rec canonically ([Record.MarshalCanonical]) and return
// the index the entry has (or will have) in the log and its RFC 6962 leaf
// hash. In durable mode Append MUST NOT return a nil error until the entry
// would survive a crash of the process or the machine; in async mode it MAY
// return once the entry is queued, and MUST then block (or fail with the
// context's error) while the queue is full. Indexes MUST be dense and
// assigned in the order the entries appear in the log. Append MUST be safe
// for concurrent use.
type Appender interface {
	Append(ctx context.Context, rec *Record) (index uint64, leafHash [32]byte, err error)
}

// Durability says when Append returns.
type Durability int

const (
	// Durable: Append returns once the entry is on disk (fsync'd).
	Durable Durability = iota
	// Async: Append returns once the entry is queued; the queue is bounded
	// by Options.MaxPending and Append blocks while it is full.
	Async
)

func (d Durability) String() string {
	if d == Async {
		return "async"
	}
	return "durable"
}

// ParseDurability parses "durable" or "async".
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "durable", "":
		return Durable, nil
	case "async":
		return Async, nil
	}
	return 0, fmt.Errorf("audit: unknown durability %q (want durable or async)", s)
}

// Options configure [Open]. The zero value opens a log read-only.
type Options struct {
	// SignerKey is the Ed25519 signed-note key that signs checkpoints (see
	// GenerateKey); its name is the log's origin. Without it the log is
	// opened read-only: Append fails, everything else works.
	SignerKey string
	// Signer, when set, signs checkpoints instead of SignerKey (a key
	// held in a KMS or an HSM, for instance).
	Signer Signer
	// VerifierKeys check the checkpoints the log reads back. When empty, the
	// signer key's public half is used, or else the key in <dir>/log.pub.
	VerifierKeys []string

	Durability Durability
	// MaxPending bounds the entries accepted but not yet in the Merkle
	// tree; Append blocks beyond it. Default 65536.
	MaxPending int
	// CheckpointInterval is how often a new checkpoint is signed and
	// published while the log grows. Default 1s; at least 100ms.
	CheckpointInterval time.Duration
	// BatchMaxAge and BatchMaxSize configure tessera's batching. Defaults
	// 250ms (see Open for why it is long) and 4096. They delay integration into the tree (and so proofs),
	// not durable appends, which the write-ahead log makes durable.
	BatchMaxAge  time.Duration
	BatchMaxSize uint
	// WALSegmentBytes is the size after which the write-ahead log starts a
	// new file. Default 64 MiB.
	WALSegmentBytes int64
	// NoIndex disables the SQLite index: no Show, Query or Export.
	NoIndex bool
	// Witnesses are C2SP tlog-witnesses (URL=VERIFIERKEY, see package
	// witness) that must cosign each checkpoint before it is published:
	// the published checkpoint carries their cosignatures, and a witness
	// that saw another history refuses, so that no checkpoint is
	// published. WitnessQuorum is how many must (default: all).
	Witnesses     []string
	WitnessQuorum int
	// RepairWAL opens a log whose write-ahead log is damaged (see ErrWAL)
	// by setting the damage aside: the records before it are kept, the
	// damaged files are renamed *.damaged-<time>, and every loss is logged
	// at level Error. Without it such a log does not open.
	RepairWAL bool
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Errors returned by Log methods, wrapped with detail; test with errors.Is.
var (
	ErrReadOnly    = errors.New("audit: log opened read-only")
	ErrClosed      = errors.New("audit: log closed")
	ErrUnavailable = errors.New("audit: log unavailable")
	ErrTooLarge    = errors.New("audit: record too large")
	ErrNotFound    = errors.New("audit: not found")
	// ErrLocked: another process (a running server) holds the log for
	// appending; open it read-only, or append through that process.
	ErrLocked = errors.New("audit: log is held by another process")
)

// maxEntry is the largest entry C2SP tlog-tiles allows.
const maxEntry = 1<<16 - 1

// Log is an audit log in a directory:
//
//	checkpoint, tile/…   the C2SP tlog-tiles log (tessera's POSIX driver)
//	.state/              tessera's private state
//	wal/                 the write-ahead log (see below)
//	index.db             the SQLite index (package index), rebuildable
//	log.pub              the verifier key, for convenience (trust it no more
//	                     than the directory it came from)
//	.lock                held (flock) by the one process that may append
//
// Append writes the entry to the write-ahead log with group commit and
// returns; a background loop hands entries to tessera in index order,
// awaits their integration into the tree, and then indexes them.
type Log struct {
	dir  string
	fsys fs.FS
	opts Options
	log  *slog.Logger
	keys []string // verifier keys

	idx *index.DB

	// writer side; nil when read-only
	w *writer
}

type writer struct {
	l       *Log
	lock    *os.File
	wal     *wal
	sem     chan struct{}
	wake    chan struct{}
	pwake   chan struct{}
	iwake   chan struct{}
	tess    *tessera.Appender
	reader  tessera.LogReader
	tstop   func(context.Context) error
	cancel  context.CancelFunc
	ctx     context.Context
	durable bool

	mu      sync.Mutex
	next    uint64
	pending []*item
	closed  bool
	fatal   error // sticky: the WAL or the tree is in doubt

	pmu      sync.Mutex
	ppending []*item
	pclosed  bool

	imu      sync.Mutex
	irows    []index.Row
	ilag     bool // rows were dropped; catch up from the log
	iclosed  bool
	tessErr  atomic.Pointer[error]
	stopped  atomic.Bool   // Close gave up on the pump: it must do nothing more
	integ    atomic.Uint64 // entries integrated into the tree
	indexed  atomic.Uint64 // entries in the index
	wgWriter sync.WaitGroup
	wgPump   sync.WaitGroup
	wgIndex  sync.WaitGroup
}

type item struct {
	index uint64
	data  []byte
	row   index.Row
	done  chan error // nil in async mode
}

// Open opens the audit log in dir, creating it if opts.SignerKey is set and
// the directory holds no log. A writable log recovers its write-ahead log
// into the tree and brings the index up to date before returning.
func Open(ctx context.Context, dir string, opts Options) (*Log, error) {
	if opts.MaxPending <= 0 {
		opts.MaxPending = 1 << 16
	}
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = time.Second
	}
	if opts.BatchMaxAge == 0 {
		// Long on purpose. The pump hands tessera one chunk at a time and
		// waits for it; a full chunk flushes by size inside the pump's own
		// Add, in order. Tessera v1.0.4's timer flush runs on another
		// goroutine and can overtake a size flush (or a second timer flush)
		// on its way to the sequencer, reordering entries. With an age far
		// beyond the time it takes to add a chunk, a chunk is never split
		// across two flushes, so nothing can overtake it. Requests do not
		// wait for this: durability comes from the write-ahead log.
		opts.BatchMaxAge = 250 * time.Millisecond
	}
	if opts.BatchMaxSize == 0 {
		opts.BatchMaxSize = 4096
	}
	if opts.WALSegmentBytes == 0 {
		opts.WALSegmentBytes = 64 << 20
	}
	if opts.CheckpointInterval < 100*time.Millisecond {
		return nil, fmt.Errorf("audit: checkpoint interval %v is below 100ms", opts.CheckpointInterval)
	}
	l := &Log{dir: dir, fsys: os.DirFS(dir), opts: opts, log: opts.Logger}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.keys = opts.VerifierKeys
	if opts.Signer == nil && opts.SignerKey != "" {
		s, err := NewSigner(opts.SignerKey)
		if err != nil {
			return nil, err
		}
		l.opts.Signer = s
	}
	if l.opts.Signer != nil {
		pub := l.opts.Signer.VerifierKey()
		if _, err := verifiers([]string{pub}); err != nil {
			return nil, fmt.Errorf("audit: the signer's verifier key: %w", err)
		}
		if len(l.keys) == 0 {
			l.keys = []string{pub}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "log.pub"), []byte(pub+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	} else {
		if _, err := os.Stat(filepath.Join(dir, "checkpoint")); err != nil {
			return nil, fmt.Errorf("audit: %s holds no log: %w", dir, err)
		}
		if len(l.keys) == 0 {
			b, err := os.ReadFile(filepath.Join(dir, "log.pub"))
			if err != nil {
				return nil, fmt.Errorf("audit: no verifier key given and %w", err)
			}
			l.keys = []string{strings.TrimSpace(string(b))}
		}
	}
	if _, err := verifiers(l.keys); err != nil {
		return nil, err
	}
	if !opts.NoIndex {
		db, err := index.Open(filepath.Join(dir, "index.db"), l.opts.Signer == nil)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		l.idx = db
	}
	if l.opts.Signer != nil {
		if err := l.openWriter(ctx); err != nil {
			if l.idx != nil {
				l.idx.Close()
			}
			return nil, err
		}
	}
	return l, nil
}

func (l *Log) openWriter(ctx context.Context) (err error) {
	lock, err := os.OpenFile(filepath.Join(l.dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return fmt.Errorf("%w: %s (%s): %w", ErrLocked, l.dir, filepath.Join(l.dir, ".lock"), err)
	}
	w := &writer{
		l: l, lock: lock,
		sem:     make(chan struct{}, l.opts.MaxPending),
		wake:    make(chan struct{}, 1),
		pwake:   make(chan struct{}, 1),
		iwake:   make(chan struct{}, 1),
		durable: l.opts.Durability == Durable,
	}
	defer func() {
		if err != nil {
			w.shutdownQuick()
		}
	}()
	signer := l.opts.Signer
	if err := l.checkTail(); err != nil {
		return err
	}
	if n, err := l.sweepTemps(0); err != nil {
		l.log.Warn("audit: removing tessera's temporary files", "err", err)
	} else if n > 0 {
		l.log.Warn("audit: removed temporary files left by failed writes (a full or failing disk?)", "count", n)
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	drv, err := posix.New(w.ctx, posix.Config{Path: l.dir})
	if err != nil {
		return fmt.Errorf("audit: tessera: %w", err)
	}
	topts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(l.opts.BatchMaxSize, l.opts.BatchMaxAge).
		WithPushback(2*l.opts.BatchMaxSize + 1).
		WithCheckpointInterval(l.opts.CheckpointInterval)
	if len(l.opts.Witnesses) > 0 {
		wg, err := witnessPolicy(l.opts.Witnesses, l.opts.WitnessQuorum)
		if err != nil {
			return err
		}
		topts.WithWitnesses(wg, &tessera.WitnessOptions{Timeout: 10 * time.Second})
	}
	w.tess, w.tstop, w.reader, err = tessera.NewAppender(w.ctx, drv, topts)
	if err != nil {
		return fmt.Errorf("audit: tessera: %w", err)
	}
	size, err := w.reader.IntegratedSize(ctx)
	if err != nil {
		return fmt.Errorf("audit: tessera: %w", err)
	}
	w.integ.Store(size)

	wl, found, err := openWAL(filepath.Join(l.dir, "wal"), l.opts.WALSegmentBytes, size, l.opts.RepairWAL)
	if err != nil {
		return fmt.Errorf("%w (the log in %s will not start on a write-ahead log that may have lost acknowledged records; vouch audit repair sets the damage aside and says what is lost)", err, l.dir)
	}
	w.wal = wl
	for _, d := range found.torn {
		l.log.Warn("audit: write-ahead log ended in a torn frame (a write cut by a crash, never acknowledged); zeroed",
			"file", d.file, "offset", d.offset, "why", d.why)
	}
	for _, d := range found.fixed {
		lost := "none whole"
		if d.after > 0 {
			lost = fmt.Sprintf("%d whole frames up to index %d", d.after, d.lastIx)
		}
		l.log.Error("AUDIT REPAIR: the write-ahead log was damaged; acknowledged records after the damage are LOST and the damaged files are kept aside as *.damaged-*",
			"file", d.file, "offset", d.offset, "why", d.why, "lost", lost)
	}
	recs := found.recs
	if err := l.checkWALAgainstTree(recs, size); err != nil {
		return err
	}
	w.next = size
	var redo []*item
	for _, r := range recs {
		if r.index < size {
			continue
		}
		if r.index != w.next {
			return fmt.Errorf("%w: holds index %d but the tree has %d entries", ErrWAL, r.index, w.next)
		}
		redo = append(redo, &item{index: r.index, data: r.data})
		w.next++
	}
	l.w = w
	w.wgWriter.Add(1)
	go w.writeLoop()
	w.wgPump.Add(1)
	go w.pumpLoop()
	w.wgIndex.Add(1)
	go w.indexLoop()
	if len(redo) > 0 {
		l.log.Info("audit: recovering entries from the write-ahead log", "from", redo[0].index, "count", len(redo))
		for range redo {
			w.sem <- struct{}{}
		}
		w.toPump(redo)
		if err := w.waitIntegrated(ctx, w.next); err != nil {
			return err
		}
	}
	if err := wl.trim(w.integ.Load()); err != nil {
		return err
	}
	if l.idx != nil {
		w.imu.Lock()
		w.irows, w.ilag = nil, false
		w.imu.Unlock()
		if err := l.catchUpIndex(ctx, w.integ.Load()); err != nil {
			l.log.Warn("audit: index catch-up (rebuild the index)", "err", err)
		}
		w.indexed.Store(w.integ.Load())
	}
	return nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Append adds rec to the log; see [Appender]. It fails with ErrReadOnly,
// ErrClosed, ErrTooLarge, ErrRecord, ErrUnavailable (the log cannot take
// records: the disk is full or failing) or the context's error.
func (l *Log) Append(ctx context.Context, rec *Record) (uint64, [32]byte, error) {
	w := l.w
	if w == nil {
		return 0, [32]byte{}, ErrReadOnly
	}
	data, err := rec.MarshalCanonical()
	if err != nil {
		return 0, [32]byte{}, err
	}
	if len(data) > maxEntry {
		return 0, [32]byte{}, fmt.Errorf("%w: trace %s: %d bytes (limit %d)", ErrTooLarge, rec.TraceID, len(data), maxEntry)
	}
	leaf := tlog.RecordHash(data)
	w.mu.Lock()
	fatal := w.fatal
	w.mu.Unlock()
	if fatal != nil {
		return 0, leaf, fmt.Errorf("%w: %w", ErrUnavailable, fatal)
	}
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, leaf, fmt.Errorf("audit: queue full: %w", ctx.Err())
	}
	it := &item{data: data, row: rowOf(rec, 0)}
	if w.durable {
		it.done = make(chan error, 1)
	}
	w.mu.Lock()
	if w.closed || w.fatal != nil {
		err := w.fatal
		w.mu.Unlock()
		<-w.sem
		if err == nil {
			return 0, leaf, ErrClosed
		}
		return 0, leaf, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	it.index = w.next
	it.row.Index = it.index
	w.next++
	w.pending = append(w.pending, it)
	w.mu.Unlock()
	signal(w.wake)
	if !w.durable {
		return it.index, leaf, nil
	}
	select {
	case err := <-it.done:
		if err != nil {
			return 0, leaf, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return it.index, leaf, nil
	case <-ctx.Done():
		return it.index, leaf, fmt.Errorf("audit: entry %d not yet durable: %w", it.index, ctx.Err())
	}
}

func rowOf(r *Record, i uint64) index.Row {
	return index.Row{Index: i, TraceID: r.TraceID, Time: r.Time.UTC(), Kind: r.kind(), Model: r.Model,
		Version: r.ModelVersion, Principal: r.Principal, Status: r.status(), Label: r.OutputLabel}
}

// writeLoop group-commits pending entries to the WAL.
func (w *writer) writeLoop() {
	defer w.wgWriter.Done()
	var datas [][]byte
	for {
		<-w.wake
		for {
			w.mu.Lock()
			batch := w.pending
			w.pending = nil
			closed := w.closed
			w.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			datas = datas[:0]
			for _, it := range batch {
				datas = append(datas, it.data)
			}
			if err := w.wal.write(batch[0].index, datas); err != nil {
				w.l.log.Error("audit: write-ahead log", "err", err)
				// The WAL is cut back to its last whole frame: give the
				// indexes back and fail everything queued behind them.
				w.mu.Lock()
				rest := w.pending
				w.pending = nil
				w.next = batch[0].index
				if strings.Contains(err.Error(), "wal sync") {
					w.fatal = err
				}
				w.mu.Unlock()
				for _, it := range append(batch, rest...) {
					if it.done != nil {
						it.done <- err
					}
					<-w.sem
				}
				continue
			}
			for _, it := range batch {
				if it.done != nil {
					it.done <- nil
				}
			}
			w.toPump(batch)
		}
	}
}

func (w *writer) toPump(items []*item) {
	w.pmu.Lock()
	w.ppending = append(w.ppending, items...)
	w.pmu.Unlock()
	signal(w.pwake)
}

// Err returns nil while the log takes records, or why it does not (or did
// not at its last attempt): for health checks, metrics and alarms.
func (l *Log) Err() error {
	if l.w == nil {
		return ErrReadOnly
	}
	l.w.mu.Lock()
	err := l.w.fatal
	l.w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if p := l.w.tessErr.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, *p)
	}
	return nil
}

// Sync waits until every entry appended so far is in the Merkle tree and
// covered by a published checkpoint.
func (l *Log) Sync(ctx context.Context) error {
	if l.w == nil {
		return nil
	}
	l.w.mu.Lock()
	n := l.w.next
	l.w.mu.Unlock()
	if err := l.w.waitIntegrated(ctx, n); err != nil {
		return err
	}
	_, err := l.waitCheckpoint(ctx, n)
	return err
}

// Close stops taking records, waits until every accepted entry is in the
// tree under a published checkpoint and indexed, and releases the log.
func (l *Log) Close(ctx context.Context) error {
	var errs []error
	if w := l.w; w != nil {
		w.mu.Lock()
		already := w.closed
		w.closed = true
		w.mu.Unlock()
		if already {
			return ErrClosed
		}
		signal(w.wake)
		w.wgWriter.Wait()
		w.pmu.Lock()
		w.pclosed = true
		w.pmu.Unlock()
		signal(w.pwake)
		tctx := ctx
		if err := w.waitPump(ctx); err != nil {
			errs = append(errs, err)
			// Tessera's shutdown waits for its entries to be integrated,
			// which a failing disk will not let happen.
			var cancel context.CancelFunc
			tctx, cancel = context.WithTimeout(ctx, time.Second)
			defer cancel()
		}
		if err := w.tstop(tctx); err != nil && tctx == ctx {
			errs = append(errs, fmt.Errorf("audit: tessera shutdown: %w", err))
		}
		if _, err := l.sweepTemps(0); err != nil {
			l.log.Warn("audit: removing tessera's temporary files", "err", err)
		}
		w.imu.Lock()
		w.iclosed = true
		w.imu.Unlock()
		signal(w.iwake)
		w.wgIndex.Wait()
		w.shutdownQuick()
		w.mu.Lock()
		if w.fatal != nil {
			errs = append(errs, w.fatal)
		}
		w.mu.Unlock()
	}
	if l.idx != nil {
		if err := l.idx.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitPump waits for the pump to hand every entry to the tree, but not
// past ctx, nor at all while the tree cannot take entries (a full disk):
// then it stops the pump and says what stays in the write-ahead log for
// the next Open to recover. Nothing acknowledged is lost either way.
func (w *writer) waitPump(ctx context.Context) error {
	done := make(chan struct{})
	go func() { w.wgPump.Wait(); close(done) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		failing := w.tessErr.Load() != nil
		if !failing {
			w.mu.Lock()
			failing = w.fatal != nil
			w.mu.Unlock()
		}
		select {
		case <-done:
			return nil
		case <-tick.C:
			if !failing {
				continue
			}
		case <-ctx.Done():
		}
		w.stopped.Store(true)
		w.cancel() // stops the pump's retries and tessera
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			// The pump waits on a tessera future that a failing disk may
			// never resolve: leave it; stopped keeps it from acting.
		}
		w.mu.Lock()
		next := w.next
		w.mu.Unlock()
		if in := w.integ.Load(); in < next {
			return fmt.Errorf("audit: closed with entries %d…%d not yet in the tree (they are in the write-ahead log; the next open recovers them)", in, next-1)
		}
		return nil
	}
}

// shutdownQuick releases the writer's resources without draining.
func (w *writer) shutdownQuick() {
	if w.cancel != nil {
		w.cancel()
	}
	if w.wal != nil {
		w.wal.close()
	}
	if w.lock != nil {
		w.lock.Close()
	}
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// VerifierKeys returns the keys the log checks its checkpoints with.
func (l *Log) VerifierKeys() []string { return l.keys }

// Checkpoint returns the latest published checkpoint, its signature
// checked.
func (l *Log) Checkpoint() (*Checkpoint, error) {
	b, err := fs.ReadFile(l.fsys, "checkpoint")
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return ParseCheckpoint(b, l.keys...)
}

// waitCheckpoint waits for a published checkpoint of at least n entries.
func (l *Log) waitCheckpoint(ctx context.Context, n uint64) (*Checkpoint, error) {
	for {
		cp, err := l.Checkpoint()
		if err != nil {
			return nil, err
		}
		if cp.Size >= n {
			return cp, nil
		}
		if l.w == nil {
			return nil, fmt.Errorf("%w: entry %d is not under the latest checkpoint (size %d)", ErrNotFound, n-1, cp.Size)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("audit: waiting for a checkpoint of %d entries: %w", n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Entry returns the entry at index i: a record's canonical encoding.
func (l *Log) Entry(i uint64) ([]byte, error) {
	if l.w != nil && i >= l.w.integ.Load() {
		return nil, fmt.Errorf("%w: entry %d is not in the tree yet", ErrNotFound, i)
	}
	b, err := readEntry(l.fsys, i)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: entry %d", ErrNotFound, i)
		}
		return nil, fmt.Errorf("audit: entry %d: %w", i, err)
	}
	return b, nil
}
