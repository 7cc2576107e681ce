package stream

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Source is the log an exporter reads. *audit.Log implements it.
type Source interface {
	// Entries returns up to max consecutive entries from index start, as
	// far as the log has made them durable; none at the end of the log.
	Entries(start uint64, max int) ([][]byte, error)
}

// Event is one log entry on its way to a sink.
type Event struct {
	Index         uint64   // position in the log: the idempotency key
	LeafHash      [32]byte // RFC 6962 leaf hash of Entry
	Entry         []byte   // the record's canonical JSON, as logged
	Kind          string   // "inference" or "access"
	TraceID       string
	Model         string
	ModelVersion  string
	SchemaVersion int
	Time          time.Time
}

// Sink receives events.
//
// Send MUST NOT return nil before the sink durably accepted every event of
// evs (the broker acknowledged it). On an error the exporter sends the
// batch again, from its first event, after a backoff; a sink MUST accept
// such a repeat (events carry Index for deduplication). Send MUST return
// when ctx is done.
type Sink interface {
	Send(ctx context.Context, evs []Event) error
	Close() error
}

// Options configures an Exporter. The zero value of every field but
// Name and CursorPath selects a default.
type Options struct {
	// Name identifies the exporter (in the cursor file, logs and metrics).
	Name string
	// CursorPath is the cursor file. Its directory must exist.
	CursorPath string
	// Batch is the most events handed to one Send (default 256).
	Batch int
	// Poll is how often the log is read when no Notify came (default 50 ms).
	Poll time.Duration
	// MaxBackoff bounds the wait between failed sends (default 5 s; the
	// first retry comes after 50 ms, then doubling).
	MaxBackoff time.Duration
	// Logger receives delivery failures and recoveries (default: discard).
	Logger *slog.Logger
	// OnDelivered, when set, is called after each acknowledged batch with
	// the batch and the time of delivery (metrics hook).
	OnDelivered func(evs []Event, at time.Time)
}

// Exporter delivers a log's entries to one sink. Run drives it; the other
// methods may be called from any goroutine.
type Exporter struct {
	src  Source
	sink Sink
	opts Options

	cursor  atomic.Uint64 // next index to deliver
	seen    atomic.Uint64 // entries known to be in the log
	failing atomic.Bool
	wake    chan struct{}

	mu      sync.Mutex
	lastErr error
	oldest  time.Time // time of the oldest undelivered record, zero when none
}

// ErrCursor is wrapped by every error about a cursor file.
var ErrCursor = errors.New("stream: bad cursor file")

const cursorMagic = "vouch-export-cursor v1"

// New returns an exporter of src to sink, resuming from the cursor file
// when it exists (from index 0 when it does not).
func New(src Source, sink Sink, opts Options) (*Exporter, error) {
	if opts.Name == "" || strings.ContainsAny(opts.Name, "\n\r") {
		return nil, fmt.Errorf("stream: exporter needs a one-line name, got %q", opts.Name)
	}
	if opts.CursorPath == "" {
		return nil, fmt.Errorf("stream: exporter %s: no cursor file", opts.Name)
	}
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{src: src, sink: sink, opts: opts, wake: make(chan struct{}, 1)}
	c, err := ReadCursor(opts.CursorPath, opts.Name)
	if err != nil {
		return nil, err
	}
	e.cursor.Store(c)
	e.seen.Store(c)
	return e, nil
}

// ReadCursor returns the index stored in the cursor file at path for
// exporter name, or 0 when the file does not exist.
func ReadCursor(path, name string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCursor, err)
	}
	if len(b) > 4096 {
		return 0, fmt.Errorf("%w: %s: %d bytes", ErrCursor, path, len(b))
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 || lines[0] != cursorMagic {
		return 0, fmt.Errorf("%w: %s: not a version 1 cursor file", ErrCursor, path)
	}
	if lines[1] != name {
		return 0, fmt.Errorf("%w: %s belongs to exporter %q, not %q", ErrCursor, path, lines[1], name)
	}
	n, err := strconv.ParseUint(lines[2], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: index %q", ErrCursor, path, lines[2])
	}
	return n, nil
}

// writeCursor stores next durably: a synced temporary file renamed over
// the old one, and the directory synced.
func writeCursor(path, name string, next uint64) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".cursor-*")
	if err != nil {
		return fmt.Errorf("stream: cursor: %w", err)
	}
	tmp := f.Name()
	_, err = fmt.Fprintf(f, "%s\n%s\n%d\n", cursorMagic, name, next)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("stream: cursor %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Notify tells the exporter that the log grew, so that it reads at once
// rather than at its next poll. It never blocks.
func (e *Exporter) Notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Name returns the exporter's name.
func (e *Exporter) Name() string { return e.opts.Name }

// Cursor returns the next log index the exporter will deliver: every
// entry before it has been acknowledged by the sink.
func (e *Exporter) Cursor() uint64 { return e.cursor.Load() }

// Lag returns how many entries the exporter knows of that the sink has
// not acknowledged yet.
func (e *Exporter) Lag() uint64 {
	s, c := e.seen.Load(), e.cursor.Load()
	if s < c {
		return 0
	}
	return s - c
}

// LagAge returns how long the oldest undelivered record has waited (by
// its record time), or 0 when the exporter has caught up.
func (e *Exporter) LagAge(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.oldest.IsZero() {
		return 0
	}
	return max(now.Sub(e.oldest), 0)
}

// Err returns the last delivery error, nil once a send succeeded again.
func (e *Exporter) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastErr
}

// Run delivers entries until ctx is done, then returns ctx's error. A
// failing sink is retried forever with a bounded backoff; a cursor that
// cannot be written, or a log that cannot be read, is retried the same way
// and reported through Err and the logger.
func (e *Exporter) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	var pending []Event // read, not yet acknowledged
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(pending) == 0 {
			var err error
			pending, err = e.read(e.cursor.Load())
			if err != nil {
				e.fail(err)
				backoff = e.sleep(ctx, backoff)
				continue
			}
		}
		if len(pending) == 0 {
			e.setOldest(time.Time{})
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-e.wake:
			case <-time.After(e.opts.Poll):
			}
			continue
		}
		e.setOldest(pending[0].Time)
		if err := e.sink.Send(ctx, pending); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.fail(fmt.Errorf("stream: exporter %s: send from index %d: %w", e.opts.Name, pending[0].Index, err))
			backoff = e.sleep(ctx, backoff)
			continue
		}
		next := pending[len(pending)-1].Index + 1
		if err := writeCursor(e.opts.CursorPath, e.opts.Name, next); err != nil {
			// The sink has the batch; without the cursor it would be sent
			// again after a restart, which receivers tolerate. Keep going
			// in memory and keep trying to persist.
			e.fail(err)
		}
		e.cursor.Store(next)
		if e.opts.OnDelivered != nil {
			e.opts.OnDelivered(pending, time.Now())
		}
		pending = nil
		backoff = 0
		if e.failing.Swap(false) {
			e.opts.Logger.Info("stream: exporter recovered", "exporter", e.opts.Name, "cursor", next)
		}
		e.mu.Lock()
		e.lastErr = nil
		e.mu.Unlock()
	}
}

func (e *Exporter) setOldest(t time.Time) {
	e.mu.Lock()
	e.oldest = t
	e.mu.Unlock()
}

func (e *Exporter) fail(err error) {
	e.mu.Lock()
	e.lastErr = err
	e.mu.Unlock()
	if !e.failing.Swap(true) {
		e.opts.Logger.Warn("stream: delivery failing; retrying", "exporter", e.opts.Name, "err", err)
	}
}

func (e *Exporter) sleep(ctx context.Context, prev time.Duration) time.Duration {
	d := min(max(2*prev, 50*time.Millisecond), e.opts.MaxBackoff)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return d
}

// read returns the events from index start on, at most one batch.
func (e *Exporter) read(start uint64) ([]Event, error) {
	ents, err := e.src.Entries(start, e.opts.Batch)
	if err != nil && len(ents) == 0 {
		return nil, fmt.Errorf("stream: exporter %s: read log at %d: %w", e.opts.Name, start, err)
	}
	if s := start + uint64(len(ents)); s > e.seen.Load() {
		e.seen.Store(s)
	}
	evs := make([]Event, len(ents))
	for i, b := range ents {
		evs[i] = EventOf(start+uint64(i), b)
	}
	return evs, nil
}

// EventOf describes log entry i. The record's fields are read leniently
// (an entry that is not a record still travels, with only its index, hash
// and bytes): the exporter carries what the log holds, it does not judge it.
func EventOf(i uint64, entry []byte) Event {
	ev := Event{Index: i, Entry: entry, LeafHash: LeafHash(entry)}
	var r struct {
		Kind          string `json:"kind"`
		TraceID       string `json:"trace_id"`
		Model         string `json:"model"`
		ModelVersion  string `json:"model_version"`
		SchemaVersion int    `json:"schema_version"`
		Time          string `json:"time"`
	}
	if json.Unmarshal(entry, &r) == nil {
		ev.Kind, ev.TraceID, ev.Model, ev.ModelVersion, ev.SchemaVersion = r.Kind, r.TraceID, r.Model, r.ModelVersion, r.SchemaVersion
		ev.Time, _ = time.Parse(time.RFC3339Nano, r.Time)
	}
	return ev
}

// LeafHash returns the RFC 6962 leaf hash of an entry: SHA-256 of a zero
// byte followed by the entry.
func LeafHash(entry []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(entry)
	var out [32]byte
	h.Sum(out[:0])
	return out
}
