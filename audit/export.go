package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/vouchml/vouch/audit/index"
)

// ExportFormat is the version line of an export file.
const ExportFormat = "vouch-audit-export/v1"

// An export is JSON lines: first a header
//
//	{"checkpoint":"<signed note>","format":"vouch-audit-export/v1"}
//
// then one [Inclusion] per record, without its checkpoint member, each
// proven against the header's checkpoint. It can be checked offline with
// [VerifyExport] and the log's verifier key, and nothing else.
type exportHeader struct {
	Checkpoint string `json:"checkpoint"`
	Format     string `json:"format"`
}

// Export writes the records that f selects, with their inclusion proofs
// against the latest checkpoint, to w. Records not yet under a checkpoint
// are left out. It returns the number of records written.
func (l *Log) Export(ctx context.Context, w io.Writer, f index.Filter) (int, error) {
	cp, err := l.Checkpoint()
	if err != nil {
		return 0, err
	}
	tr := &tileReader{fsys: l.fsys}
	n, err := WriteExport(w, cp,
		func(fn func(index.Row) error) error { return l.Query(ctx, f, fn) },
		func(i uint64) (*Inclusion, error) { return l.proveAt(cp, tr, i) })
	if err != nil {
		return n, fmt.Errorf("audit: export: %w", err)
	}
	return n, nil
}

// WriteExport writes an export to w: the header holding cp, then the
// inclusion proof (prove) of each row that query yields under cp (rows at
// or past cp.Size are left out), without its checkpoint member. Both the
// local log and the replicas' shared log export through it. It returns
// the number of records written.
func WriteExport(w io.Writer, cp *Checkpoint, query func(fn func(index.Row) error) error, prove func(index uint64) (*Inclusion, error)) (int, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(exportHeader{Checkpoint: string(cp.Note), Format: ExportFormat}); err != nil {
		return 0, err
	}
	n := 0
	err := query(func(r index.Row) error {
		if r.Index >= cp.Size {
			return nil
		}
		inc, err := prove(r.Index)
		if err != nil {
			return err
		}
		inc.Checkpoint = ""
		n++
		return enc.Encode(inc)
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// VerifyExport checks an export read from r: the header's checkpoint
// signature (by one of verifierKeys) and every record's inclusion proof. It
// calls fn, when not nil, with each verified record. An error names the
// line at fault.
func VerifyExport(r io.Reader, fn func(*Inclusion, *Record) error, verifierKeys ...string) (*Checkpoint, int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, 0, fmt.Errorf("audit: export: %w", err)
		}
		return nil, 0, fmt.Errorf("audit: export: empty file")
	}
	var h exportHeader
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
		return nil, 0, fmt.Errorf("audit: export line 1: %w", err)
	}
	if h.Format != ExportFormat {
		return nil, 0, fmt.Errorf("audit: export line 1: format %q, want %q", h.Format, ExportFormat)
	}
	cp, err := ParseCheckpoint([]byte(h.Checkpoint), verifierKeys...)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: export line 1: %w", err)
	}
	n := 0
	for line := 2; sc.Scan(); line++ {
		var inc Inclusion
		if err := json.Unmarshal(sc.Bytes(), &inc); err != nil {
			return cp, n, fmt.Errorf("audit: export line %d: %w", line, err)
		}
		if inc.Checkpoint != "" {
			return cp, n, fmt.Errorf("audit: export line %d: a record line carries its own checkpoint", line)
		}
		rec, err := inc.check(cp)
		if err != nil {
			return cp, n, fmt.Errorf("audit: export line %d: %w", line, err)
		}
		if fn != nil {
			if err := fn(&inc, rec); err != nil {
				return cp, n, err
			}
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return cp, n, fmt.Errorf("audit: export: %w", err)
	}
	return cp, n, nil
}
