package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/vouchml/vouch/audit"
)

// A Journal is the in-flight journal: the record of every accepted
// inference request is written to it before the engine runs the request,
// and marked done once the request's own record (its outcome) is in the
// audit log. A process that dies during a run — SIGKILL, the out-of-memory
// killer, or a fatal runtime error that no recover can catch (a stack
// overflow, concurrent map writes, running out of memory) — leaves the
// accepted records of its in-flight requests in the journal, and Recover,
// at the next start, appends each to the audit log as an error record
// (code 500, Error beginning with [Interrupted]). So every request that
// reached the engine has a record, even the one that took the process down,
// and it is that one an investigator needs.
//
// The write is one write(2) of one line, before the run: the kernel holds
// it in the page cache, where the process's death cannot lose it; with
// fsync (durable serving) it is also on disk before the run starts.
//
// Journal format, version 1: a file of lines, each
//
//	A <seq> <the accepted record: audit.Record canonical JSON>
//	D <seq>
//
// where seq numbers the entries of one process from 1 and A comes before
// its D. An A with no D is a request whose outcome was never recorded. A
// process starts a fresh journal (Recover empties it); a torn last line
// (the process died inside the write) is ignored.
type Journal struct {
	mu       sync.Mutex
	f        *os.File
	path     string
	fsync    bool
	seq      uint64
	inflight int
	size     int64
}

// Interrupted begins the Error of a record that Recover appends for a
// request whose run never finished.
const Interrupted = "interrupted: the server process ended during the run"

// journalCompact is the size past which the journal is emptied whenever
// nothing is in flight.
const journalCompact = 1 << 20

// OpenJournal opens (or creates) the journal at path. Call Recover before
// serving, so that the entries a dead process left are recorded (and the
// sequence numbers start over). With fsync, each accepted record is on
// disk before the run starts.
func OpenJournal(path string, fsync bool) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server: in-flight journal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("server: in-flight journal: %w", err)
	}
	j := &Journal{f: f, path: path, fsync: fsync, size: st.Size()}
	// Continue the numbering of what is there, so that a journal not yet
	// recovered never has two entries of one number.
	b, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("server: in-flight journal: %w", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		_, rest, _ := bytes.Cut(line, []byte(" "))
		num, _, _ := bytes.Cut(rest, []byte(" "))
		if seq, err := strconv.ParseUint(string(num), 10, 64); err == nil && seq > j.seq {
			j.seq = seq
		}
	}
	return j, nil
}

// Pending returns the accepted records in the journal that have no
// outcome, in the order they were accepted, with their record unchanged.
// A line that does not parse (a torn last write) is skipped.
func (j *Journal) Pending() ([]*audit.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, err := os.ReadFile(j.path)
	if err != nil {
		return nil, fmt.Errorf("server: in-flight journal: %w", err)
	}
	type entry struct {
		seq uint64
		rec *audit.Record
	}
	var order []entry
	done := map[uint64]bool{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		kind, rest, _ := bytes.Cut(line, []byte(" "))
		num, body, _ := bytes.Cut(rest, []byte(" "))
		seq, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			continue
		}
		switch string(kind) {
		case "A":
			rec, err := audit.Parse(body)
			if err != nil {
				continue // a torn write: the request never reached the engine
			}
			order = append(order, entry{seq, rec})
		case "D":
			done[seq] = true
		}
	}
	var out []*audit.Record
	for _, e := range order {
		if !done[e.seq] {
			out = append(out, e.rec)
		}
	}
	return out, nil
}

// Recover appends a record for every pending entry (see Pending) to app,
// each the accepted record with status error, code 500 and an Error that
// begins with Interrupted, then empties the journal. It returns the
// records appended. If an append fails, the journal is kept (a later
// Recover appends what is left; an entry may then be appended twice, never
// lost).
func (j *Journal) Recover(ctx context.Context, app Appender, now time.Time) ([]*audit.Record, error) {
	pending, err := j.Pending()
	if err != nil {
		return nil, err
	}
	var out []*audit.Record
	for _, rec := range pending {
		rec.SchemaVersion = 0 // the current schema: the outcome is written now
		rec.Status, rec.Code = audit.StatusError, 500
		rec.Error = fmt.Sprintf("%s (killed, out of memory, or a fatal runtime error) after the request was accepted at %s and before its outcome was recorded; recovered from the in-flight journal at %s",
			Interrupted, rec.Time.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339))
		if _, _, err := app.Append(ctx, rec); err != nil {
			return out, fmt.Errorf("server: in-flight journal: appending the record of interrupted request %s: %w", rec.TraceID, err)
		}
		out = append(out, rec)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.truncate(); err != nil {
		return out, err
	}
	return out, nil
}

func (j *Journal) truncate() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("server: in-flight journal: %w", err)
	}
	j.size = 0
	if j.fsync {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("server: in-flight journal: %w", err)
		}
	}
	return nil
}

// Accept writes rec, the record of a request about to run, and returns
// the function that marks it done; call it once the request's outcome
// record has been appended (or refused). rec must be encodable (the
// server passes its bounded form).
func (j *Journal) Accept(rec *audit.Record) (done func(), err error) {
	b, err := rec.MarshalCanonical()
	if err != nil {
		return nil, fmt.Errorf("server: in-flight journal: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	seq := j.seq
	line := make([]byte, 0, len(b)+24)
	line = append(line, "A "...)
	line = strconv.AppendUint(line, seq, 10)
	line = append(line, ' ')
	line = append(line, b...)
	line = append(line, '\n')
	if err := j.write(line); err != nil {
		return nil, err
	}
	j.inflight++
	var once sync.Once
	return func() { once.Do(func() { j.done(seq) }) }, nil
}

func (j *Journal) done(seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.inflight--
	if j.inflight == 0 && j.size > journalCompact {
		// Nothing in flight: every A has its D, the journal can start over.
		if j.truncate() == nil {
			return
		}
	}
	// A failed D write leaves an entry that Recover would record as
	// interrupted although its outcome is in the log: a duplicate record
	// of the same trace, never a lost one.
	j.write(append(strconv.AppendUint([]byte("D "), seq, 10), '\n'))
}

func (j *Journal) write(b []byte) error {
	n, err := j.f.Write(b)
	j.size += int64(n)
	if err == nil && j.fsync {
		err = j.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("server: in-flight journal: %w", err)
	}
	return nil
}

// Close closes the journal file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}
