package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/vouchml/vouch/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// An Appender adds records to an audit log. The audit package's log
// (*audit.Log) satisfies it; FileAppender is the stand-alone default. The
// record type is audit.Record, the one the log encodes and replay checks:
// the server keeps no copy of it.
//
// Append MUST return the index the entry has (or will have) in the log and
// its RFC 6962 leaf hash, and MUST be safe for concurrent use. A non-nil
// error means the record is not in the log; the server then refuses the
// request (503) so that nothing is served unaudited.
type Appender interface {
	Append(ctx context.Context, rec *audit.Record) (index uint64, leafHash [32]byte, err error)
}

// FileAppender appends records to a file as JSON lines, one record a line in
// its canonical encoding (audit.Record.MarshalCanonical, the log's entry
// bytes), opened append-only. It is the audit hook's default until the
// transparency log is plugged in: it gives dense indexes (the line number,
// from 0) and leaf hashes over each line without its newline, but no proofs.
type FileAppender struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	next uint64
	sync bool

	// Group commit: one fsync covers every line written before it began,
	// so concurrent appenders share fsyncs instead of queueing for one each.
	smu    sync.Mutex
	synced uint64 // lines known durable
}

// OpenFileAppender opens (or creates) path for appending. Existing lines are
// counted so that indexes continue. With fsync, each Append returns only
// after the line is on disk.
func OpenFileAppender(path string, fsync bool) (*FileAppender, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server: audit file: %w", err)
	}
	var n uint64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		n++
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, fmt.Errorf("server: audit file %s: %w", path, err)
	}
	return &FileAppender{f: f, w: bufio.NewWriterSize(f, 64<<10), next: n, sync: fsync}, nil
}

// Append writes rec's canonical encoding as one line and, with fsync, returns once the line
// is on disk.
func (a *FileAppender) Append(ctx context.Context, rec *audit.Record) (uint64, [32]byte, error) {
	b, err := rec.MarshalCanonical()
	if err != nil {
		return 0, [32]byte{}, fmt.Errorf("server: audit record: %w", err)
	}
	leaf := [32]byte(tlog.RecordHash(b)) // RFC 6962: SHA-256(0x00 ‖ entry)
	a.mu.Lock()
	if a.f == nil {
		a.mu.Unlock()
		return 0, [32]byte{}, errors.New("server: audit file is closed")
	}
	a.w.Write(b)
	a.w.WriteByte('\n')
	if err := a.w.Flush(); err != nil {
		a.mu.Unlock()
		return 0, [32]byte{}, fmt.Errorf("server: audit file: %w", err)
	}
	idx := a.next
	a.next++
	f := a.f
	a.mu.Unlock()
	if !a.sync {
		return idx, leaf, nil
	}
	a.smu.Lock()
	defer a.smu.Unlock()
	if a.synced > idx {
		return idx, leaf, nil // a later fsync covered this line
	}
	a.mu.Lock()
	upto := a.next
	a.mu.Unlock()
	if err := f.Sync(); err != nil {
		return 0, [32]byte{}, fmt.Errorf("server: audit file: %w", err)
	}
	a.synced = upto
	return idx, leaf, nil
}

// Close flushes and closes the file.
func (a *FileAppender) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.w.Flush()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.f = nil
	return err
}
