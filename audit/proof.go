package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/vouchml/vouch/audit/index"
)

// ErrProof is returned (wrapped) when an inclusion proof does not check.
var ErrProof = errors.New("audit: inclusion proof does not verify")

// An Inclusion is a record with the evidence that it is in the log: its
// index, leaf hash, an RFC 6962 inclusion proof, and the signed checkpoint
// the proof leads to. Its JSON form (also one line of an export) is
//
//	{"checkpoint":"<signed note>","index":N,"leaf_hash":"<hex>",
//	 "proof":["<hex>",…],"record":{…canonical record…}}
//
// The record member holds the record's canonical encoding byte for byte;
// its leaf hash is SHA-256(0x00 | those bytes). The proof hashes are those
// of golang.org/x/mod/sumdb/tlog.RecordProof. In an export, checkpoint is
// omitted from every line but the header.
type Inclusion struct {
	Checkpoint string          `json:"checkpoint,omitempty"`
	Index      uint64          `json:"index"`
	LeafHash   string          `json:"leaf_hash"`
	Proof      []string        `json:"proof"`
	Record     json.RawMessage `json:"record"`
}

func newInclusion(cp *Checkpoint, i uint64, entry []byte, p tlog.RecordProof) *Inclusion {
	leaf := tlog.RecordHash(entry)
	inc := &Inclusion{Checkpoint: string(cp.Note), Index: i, LeafHash: hex.EncodeToString(leaf[:]),
		Proof: make([]string, len(p)), Record: json.RawMessage(bytes.Clone(entry))}
	for k, h := range p {
		inc.Proof[k] = hex.EncodeToString(h[:])
	}
	return inc
}

// Verify checks the inclusion against its own checkpoint, whose signature
// must verify with one of verifierKeys, and returns the decoded record.
func (inc *Inclusion) Verify(verifierKeys ...string) (*Record, *Checkpoint, error) {
	cp, err := ParseCheckpoint([]byte(inc.Checkpoint), verifierKeys...)
	if err != nil {
		return nil, nil, err
	}
	rec, err := inc.check(cp)
	return rec, cp, err
}

// check verifies the proof against a checkpoint already verified.
func (inc *Inclusion) check(cp *Checkpoint) (*Record, error) {
	leaf := tlog.RecordHash(inc.Record)
	if got := hex.EncodeToString(leaf[:]); got != inc.LeafHash {
		return nil, fmt.Errorf("%w: entry %d: leaf hash is %s, record hashes to %s", ErrProof, inc.Index, inc.LeafHash, got)
	}
	if inc.Index >= cp.Size {
		return nil, fmt.Errorf("%w: entry %d is beyond the checkpoint's %d entries", ErrProof, inc.Index, cp.Size)
	}
	p := make(tlog.RecordProof, len(inc.Proof))
	for k, s := range inc.Proof {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			return nil, fmt.Errorf("%w: entry %d: proof hash %d is not 32 bytes of hex", ErrProof, inc.Index, k)
		}
		copy(p[k][:], b)
	}
	if err := tlog.CheckRecord(p, int64(cp.Size), cp.Root, int64(inc.Index), leaf); err != nil {
		return nil, fmt.Errorf("%w: entry %d in tree of %d: %w", ErrProof, inc.Index, cp.Size, err)
	}
	rec, err := Parse(inc.Record)
	if err != nil {
		return nil, fmt.Errorf("audit: entry %d: %w", inc.Index, err)
	}
	return rec, nil
}

// Prove returns entry i with its inclusion proof against the latest
// checkpoint, waiting (until ctx ends) for a checkpoint that covers it.
func (l *Log) Prove(ctx context.Context, i uint64) (*Inclusion, error) {
	if l.w != nil {
		if err := l.w.waitIntegrated(ctx, i+1); err != nil {
			return nil, err
		}
	}
	cp, err := l.waitCheckpoint(ctx, i+1)
	if err != nil {
		return nil, err
	}
	return l.proveAt(cp, &tileReader{fsys: l.fsys}, i)
}

func (l *Log) proveAt(cp *Checkpoint, tr *tileReader, i uint64) (*Inclusion, error) {
	entry, err := readEntry(l.fsys, i)
	if err != nil {
		return nil, fmt.Errorf("audit: entry %d: %w", i, err)
	}
	p, err := proveIndex(l.fsys, tr, cp, i)
	if err != nil {
		return nil, err
	}
	inc := newInclusion(cp, i, entry, p)
	// Never hand out evidence that does not check.
	if _, err := inc.check(cp); err != nil {
		return nil, err
	}
	return inc, nil
}

// Lookup returns the index rows of the entries with the given trace id.
func (l *Log) Lookup(ctx context.Context, trace string) ([]index.Row, error) {
	var rows []index.Row
	err := l.Query(ctx, index.Filter{TraceID: trace}, func(r index.Row) error {
		rows = append(rows, r)
		return nil
	})
	return rows, err
}

// Show returns the first record with the given trace id (an inference
// record before access records) with its inclusion proof.
func (l *Log) Show(ctx context.Context, trace string) (*Inclusion, error) {
	rows, err := l.Lookup(ctx, trace)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no record with trace id %q", ErrNotFound, trace)
	}
	pick := rows[0]
	for _, r := range rows {
		if r.Kind == KindInference {
			pick = r
			break
		}
	}
	inc, err := l.Prove(ctx, pick.Index)
	if err != nil {
		return nil, err
	}
	rec, err := Parse(inc.Record)
	if err != nil {
		return nil, fmt.Errorf("audit: entry %d: %w", pick.Index, err)
	}
	if rec.TraceID != trace {
		return nil, fmt.Errorf("audit: index says entry %d has trace %s, the log says %s (rebuild the index)", pick.Index, trace, rec.TraceID)
	}
	return inc, nil
}

// Query calls fn for each index row that f selects, in log order. On a
// writable log it first waits until the entries appended before the call
// are indexed; a read-only log sees what the writer has indexed. The index
// is checked against the log first (see ErrIndex): it must hold a row for
// every entry, and each row returned must match its entry.
func (l *Log) Query(ctx context.Context, f index.Filter, fn func(index.Row) error) error {
	if l.idx == nil {
		return fmt.Errorf("audit: the log was opened without its index")
	}
	if l.w != nil {
		if err := l.w.waitIndexed(ctx); err != nil {
			return err
		}
	}
	if err := l.checkIndex(ctx); err != nil {
		return err
	}
	c := &rowChecker{l: l}
	return l.idx.Query(ctx, f, func(r index.Row) error {
		if err := c.check(r); err != nil {
			return err
		}
		return fn(r)
	})
}

// RebuildIndex drops the index and rebuilds it from the log's entries.
func (l *Log) RebuildIndex(ctx context.Context) error {
	if l.idx == nil {
		return fmt.Errorf("audit: the log was opened without its index")
	}
	if l.w == nil {
		return ErrReadOnly
	}
	if err := l.idx.Reset(ctx); err != nil {
		return err
	}
	return l.catchUpIndex(ctx, l.w.integ.Load())
}

// catchUpIndex indexes the entries from the index's end up to n.
func (l *Log) catchUpIndex(ctx context.Context, n uint64) error {
	from, err := l.idx.Next(ctx)
	if err != nil {
		return err
	}
	var rows []index.Row
	for i := from; i < n; {
		w := min(int(n-i/tileWidth*tileWidth), tileWidth)
		ents, p, err := readBundle(l.fsys, i/tileWidth, w)
		if err != nil {
			return fmt.Errorf("audit: index from %s: %w", p, err)
		}
		for k := int(i % tileWidth); k < w; k, i = k+1, i+1 {
			rec, err := Parse(ents[k])
			if err != nil {
				return fmt.Errorf("audit: index entry %d: %w", i, err)
			}
			rows = append(rows, rowOf(rec, i))
		}
		if len(rows) >= 4096 || i >= n {
			if err := l.idx.Add(ctx, rows); err != nil {
				return err
			}
			rows = rows[:0]
		}
	}
	return nil
}

// ShowIndex returns entry i with its inclusion proof, as Show does for a
// trace id: records that share a trace id (a client continuing its
// caller's traceparent) are addressed one by one by their log index.
func (l *Log) ShowIndex(ctx context.Context, i uint64) (*Inclusion, error) {
	if l.w == nil {
		cp, err := l.Checkpoint()
		if err != nil {
			return nil, err
		}
		if i >= cp.Size {
			return nil, fmt.Errorf("%w: entry %d is not under the latest checkpoint (%d entries)", ErrNotFound, i, cp.Size)
		}
	} else {
		l.w.mu.Lock()
		n := l.w.next
		l.w.mu.Unlock()
		if i >= n {
			return nil, fmt.Errorf("%w: the log has %d entries, none at index %d", ErrNotFound, n, i)
		}
	}
	return l.Prove(ctx, i)
}

// ConsistencyProof returns the RFC 6962 proof that the tree of old entries
// is a prefix of the tree of the latest checkpoint, and that checkpoint.
func (l *Log) ConsistencyProof(old uint64) (tlog.TreeProof, *Checkpoint, error) {
	cp, err := l.Checkpoint()
	if err != nil {
		return nil, nil, err
	}
	if old > cp.Size {
		return nil, cp, fmt.Errorf("audit: no consistency proof from %d to the smaller %d", old, cp.Size)
	}
	tree := tlog.Tree{N: int64(cp.Size), Hash: cp.Root}
	p, err := tlog.ProveTree(tree.N, int64(old), tlog.TileHashReader(tree, &tileReader{fsys: l.fsys}))
	if err != nil {
		return nil, cp, fmt.Errorf("audit: consistency proof %d→%d: %w", old, cp.Size, err)
	}
	return p, cp, nil
}
