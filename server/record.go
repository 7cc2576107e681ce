package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Record is the audit record of one inference request, served or refused.
// Its fields mirror the audit log's record schema version 1 (DESIGN.md,
// package audit) one for one, so that an adapter from this type to the log's
// is a field copy; the JSON names are the log's member names.
type Record struct {
	SchemaVersion int            `json:"schema_version"`
	Kind          string         `json:"kind"`
	TraceID       string         `json:"trace_id"`
	RequestID     string         `json:"request_id,omitempty"`
	TraceParent   string         `json:"traceparent,omitempty"`
	Time          time.Time      `json:"time"`
	Principal     string         `json:"principal,omitempty"`
	SourceAddr    string         `json:"source_addr,omitempty"`
	Model         string         `json:"model,omitempty"`
	ModelVersion  string         `json:"model_version,omitempty"`
	BundleDigest  string         `json:"bundle_digest,omitempty"`
	PlanDigest    string         `json:"plan_digest,omitempty"`
	Precision     string         `json:"precision,omitempty"`
	Profile       string         `json:"profile,omitempty"`
	Backend       string         `json:"backend,omitempty"`
	Device        string         `json:"device,omitempty"`
	InputDigest   string         `json:"input_digest,omitempty"`
	Inputs        []TensorDigest `json:"inputs,omitempty"`
	OutputDigest  string         `json:"output_digest,omitempty"`
	Outputs       []TensorDigest `json:"outputs,omitempty"`
	OutputLabel   string         `json:"output_label,omitempty"`
	Confidence    *float64       `json:"confidence,omitempty"`
	LatencyMicros int64          `json:"latency_us,omitempty"`
	Status        string         `json:"status"` // "ok" or "error"
	Code          int            `json:"code,omitempty"`
	Error         string         `json:"error,omitempty"`
	Access        *Access        `json:"access,omitempty"` // kind "access" only
}

// Access describes one read of audit data, for a record of kind "access":
// the action ("show", "query", "export", "replay", …) and its target (a
// trace id, or the query as the reader gave it).
type Access struct {
	Action string `json:"action"`
	Target string `json:"target,omitempty"`
}

// Record statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// An Appender adds records to an audit log. The audit package's log
// satisfies it through an adapter; FileAppender is the stand-alone default.
//
// Append MUST return the index the entry has (or will have) in the log and
// its RFC 6962 leaf hash, and MUST be safe for concurrent use. A non-nil
// error means the record is not in the log; the server then refuses the
// request (503) so that nothing is served unaudited.
type Appender interface {
	Append(ctx context.Context, rec *Record) (index uint64, leafHash [32]byte, err error)
}

// LeafHash returns the RFC 6962 leaf hash of an entry: SHA-256(0x00 ‖ entry).
func LeafHash(entry []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(entry)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// FileAppender appends records to a file as JSON lines, one record a line,
// opened append-only. It is the audit hook's default until the
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

// Append writes rec as one JSON line and, with fsync, returns once the line
// is on disk.
func (a *FileAppender) Append(ctx context.Context, rec *Record) (uint64, [32]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, [32]byte{}, fmt.Errorf("server: audit record: %w", err)
	}
	leaf := LeafHash(b)
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
