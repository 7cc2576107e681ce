package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/vouchml/vouch/audit/witness"
)

// ErrTampered is returned (wrapped, with the first piece of evidence) when
// Verify finds the log's data inconsistent with its signed checkpoint.
var ErrTampered = errors.New("audit: log data does not match its checkpoint")

// VerifyOptions configure [Verify].
type VerifyOptions struct {
	// VerifierKeys are the trusted note verifier keys; the checkpoint must
	// carry a signature by one of them. Required.
	VerifierKeys []string
	// Saved is an earlier checkpoint of the same log, kept by the auditor.
	// When set, the log must extend it: a log rewritten before Saved.Size
	// is caught even if its new checkpoint is validly signed.
	Saved []byte
	// Witnesses are verifier keys of witnesses whose cosignatures the
	// checkpoint must carry, at least Quorum of them (default: all).
	Witnesses []string
	Quorum    int
	// CheckRecords also decodes every entry as a canonical record.
	CheckRecords bool
	// MaxProblems stops collecting evidence after this many (default 100).
	MaxProblems int
}

// A Problem is one piece of evidence of tampering or damage.
type Problem struct {
	Kind     string // "entry", "missing", "tile", "root", "history", "record"
	Index    int64  // the entry concerned, or -1
	Path     string // the file concerned, if any
	Expected string // hex hash the signed data commits to, if any
	Found    string // hex hash of what is stored, if any
	Detail   string
}

var problemText = map[string]string{
	"entry":   "entry does not match the tiles",
	"missing": "entries unreadable",
	"tile":    "bad tile",
	"root":    "root hash differs from the checkpoint",
	"history": "history differs from the saved checkpoint",
	"record":  "entry is not a canonical record",
}

func (p Problem) String() string {
	var b strings.Builder
	if t, ok := problemText[p.Kind]; ok {
		b.WriteString(t)
	} else {
		b.WriteString(p.Kind)
	}
	if p.Index >= 0 {
		fmt.Fprintf(&b, " at index %d", p.Index)
	}
	if p.Path != "" {
		fmt.Fprintf(&b, " (%s)", p.Path)
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	if p.Expected != "" || p.Found != "" {
		fmt.Fprintf(&b, ": expected %s, found %s", p.Expected, p.Found)
	}
	return b.String()
}

// A Report is what Verify found.
type Report struct {
	Checkpoint *Checkpoint // the verified checkpoint
	Saved      *Checkpoint // the saved checkpoint, when given
	Cosigned   []string    // the witnesses whose cosignatures verified
	Root       tlog.Hash   // the root recomputed from the entries
	Problems   []Problem
	Truncated  bool // more problems were found than MaxProblems
}

func (r *Report) String() string {
	var b strings.Builder
	if r.Checkpoint != nil {
		fmt.Fprintf(&b, "checkpoint %s, %d entries, root %x\n", r.Checkpoint.Origin, r.Checkpoint.Size, r.Checkpoint.Root[:])
	}
	for _, p := range r.Problems {
		b.WriteString(p.String() + "\n")
	}
	if r.Truncated {
		b.WriteString("(more problems not shown)\n")
	}
	return b.String()
}

// Verify checks a log in tlog-tiles layout (a directory through os.DirFS,
// or any fs.FS): the checkpoint's signature; every entry bundle against the
// level-0 tiles (a mismatch names the entry, the hash the tiles commit to
// and the hash of the stored entry); every higher tile against the hashes
// recomputed from the entries; the tree root recomputed from the entries
// against the checkpoint; and, with opts.Saved, that the log extends the
// saved checkpoint. Missing, truncated or malformed files are reported as
// problems, never panics. The error wraps ErrTampered when the data is
// inconsistent, ErrCheckpoint when the checkpoint itself is bad.
func Verify(ctx context.Context, fsys fs.FS, opts VerifyOptions) (rep *Report, err error) {
	rep = &Report{}
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("audit: verify: internal error: %v", e)
		}
	}()
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 100
	}
	raw, err := fs.ReadFile(fsys, "checkpoint")
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	cp, err := ParseCheckpoint(raw, opts.VerifierKeys...)
	if err != nil {
		return rep, err
	}
	rep.Checkpoint = cp
	if len(opts.Witnesses) > 0 {
		names, err := witness.CheckQuorum(raw, opts.Witnesses, opts.Quorum)
		rep.Cosigned = names
		if err != nil {
			return rep, fmt.Errorf("%w: %w: no quorum of witnesses vouches that this is the history they saw", ErrCheckpoint, err)
		}
	}
	v := &verifier{fsys: fsys, opts: opts, rep: rep, size: cp.Size}
	if opts.Saved != nil {
		saved, err := ParseCheckpoint(opts.Saved, opts.VerifierKeys...)
		if err != nil {
			return rep, fmt.Errorf("saved %w", err)
		}
		rep.Saved = saved
		switch {
		case saved.Origin != cp.Origin:
			return rep, fmt.Errorf("%w: saved checkpoint is for log %q, this is %q", ErrCheckpoint, saved.Origin, cp.Origin)
		case saved.Size > cp.Size:
			v.problem(Problem{Kind: "history", Index: -1, Detail: fmt.Sprintf("log shrank: saved checkpoint has %d entries, current %d", saved.Size, cp.Size)})
		}
	}
	if err := v.run(ctx); err != nil {
		return rep, err
	}
	if len(rep.Problems) > 0 {
		more := ""
		if n := len(rep.Problems); n > 1 {
			more = fmt.Sprintf(" (and %d more problems)", n-1)
		}
		return rep, fmt.Errorf("%w: %s%s", ErrTampered, rep.Problems[0], more)
	}
	return rep, nil
}

type verifier struct {
	fsys fs.FS
	opts VerifyOptions
	rep  *Report
	size uint64

	stack []stackNode // compact range of the leaves so far
	level [][]tlog.Hash
}

type stackNode struct {
	h tlog.Hash
	n uint64 // leaves under h, a power of two
}

func (v *verifier) problem(p Problem) {
	if len(v.rep.Problems) >= v.opts.MaxProblems {
		v.rep.Truncated = true
		return
	}
	v.rep.Problems = append(v.rep.Problems, p)
}

func hexh(h []byte) string { return fmt.Sprintf("%x", h) }

// bundleResult is one entry bundle's leaf hashes, computed by a worker.
type bundleResult struct {
	n      uint64
	leaves []tlog.Hash
	path   string
	err    error
	bad    []Problem // undecodable records
}

func (v *verifier) run(ctx context.Context) error {
	nb := (v.size + tileWidth - 1) / tileWidth
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan uint64)
	results := make([]chan bundleResult, nb)
	for i := range results {
		results[i] = make(chan bundleResult, 1)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(jobs)
		for n := range nb {
			select {
			case jobs <- n:
			case <-done:
				return
			}
		}
	}()
	for range workers {
		go func() {
			defer func() { recover() }() // a panic becomes a missing result, reported below
			for n := range jobs {
				results[n] <- v.hashBundle(n)
			}
		}()
	}
	var savedRoot *tlog.Hash
	for n := range nb {
		var r bundleResult
		select {
		case r = <-results[n]:
		case <-ctx.Done():
			return ctx.Err()
		}
		w := int(min(v.size-n*tileWidth, tileWidth))
		tile, tpath, terr := readHashTile(v.fsys, 0, n, w)
		if terr != nil {
			v.problem(Problem{Kind: "tile", Index: int64(n * tileWidth), Path: tpath, Detail: terr.Error()})
			tile = nil
		}
		if r.err != nil {
			v.problem(Problem{Kind: "missing", Index: int64(n * tileWidth), Path: r.path,
				Detail: fmt.Sprintf("entries %d–%d unreadable: %v", n*tileWidth, n*tileWidth+uint64(w)-1, r.err)})
			// Go on with the tile's hashes so that the rest is still checked.
			r.leaves = make([]tlog.Hash, w)
			for k := range r.leaves {
				if tile != nil {
					copy(r.leaves[k][:], tile[k*hashSize:])
				}
			}
		} else if tile != nil {
			for k, h := range r.leaves {
				if string(h[:]) != string(tile[k*hashSize:(k+1)*hashSize]) {
					v.problem(Problem{Kind: "entry", Index: int64(n*tileWidth) + int64(k), Path: r.path,
						Expected: hexh(tile[k*hashSize : (k+1)*hashSize]), Found: hexh(h[:])})
				}
			}
		}
		for _, p := range r.bad {
			v.problem(p)
		}
		for k, h := range r.leaves {
			v.push(h)
			if s := v.rep.Saved; s != nil && n*tileWidth+uint64(k)+1 == s.Size {
				root := v.root()
				savedRoot = &root
			}
		}
		if w == tileWidth {
			v.addLevel(1, treeHash(r.leaves))
		}
	}
	v.rep.Root = v.root()
	if v.size == 0 {
		v.rep.Root = tlog.Hash(emptyRoot)
	}
	if v.rep.Root == v.rep.Checkpoint.Root {
		// The entries are what was signed: a disagreeing level-0 tile is the
		// damaged party.
		for k, p := range v.rep.Problems {
			if p.Kind == "entry" {
				p.Kind, p.Detail = "tile", "level-0 tile disagrees with the entries, which match the checkpoint"
				p.Expected, p.Found = p.Found, p.Expected
				p.Path = tilePath(0, uint64(p.Index)/tileWidth)
				v.rep.Problems[k] = p
			}
		}
	} else {
		v.problem(Problem{Kind: "root", Index: -1, Path: "checkpoint",
			Detail: fmt.Sprintf("tree of %d entries", v.size), Expected: hexh(v.rep.Checkpoint.Root[:]), Found: hexh(v.rep.Root[:])})
	}
	if s := v.rep.Saved; s != nil && s.Size <= v.size {
		got := tlog.Hash(emptyRoot)
		if savedRoot != nil {
			got = *savedRoot
		}
		if got != s.Root {
			v.problem(Problem{Kind: "history", Index: -1,
				Detail:   fmt.Sprintf("rewritten: the first %d entries no longer hash to the saved checkpoint's root", s.Size),
				Expected: hexh(s.Root[:]), Found: hexh(got[:])})
		}
	}
	v.checkUpperTiles()
	return nil
}

var emptyRoot = tlog.Hash{0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55}

func (v *verifier) hashBundle(n uint64) bundleResult {
	w := int(min(v.size-n*tileWidth, tileWidth))
	ents, p, err := readBundle(v.fsys, n, w)
	r := bundleResult{n: n, path: p, err: err}
	if err != nil {
		return r
	}
	r.leaves = make([]tlog.Hash, w)
	for k, e := range ents {
		r.leaves[k] = tlog.RecordHash(e)
		if v.opts.CheckRecords {
			if _, err := Parse(e); err != nil {
				r.bad = append(r.bad, Problem{Kind: "record", Index: int64(n*tileWidth) + int64(k), Path: p, Detail: err.Error()})
			}
		}
	}
	return r
}

// push adds a leaf hash to the compact range.
func (v *verifier) push(h tlog.Hash) {
	v.stack = append(v.stack, stackNode{h, 1})
	for k := len(v.stack); k >= 2 && v.stack[k-2].n == v.stack[k-1].n; k = len(v.stack) {
		v.stack[k-2] = stackNode{tlog.NodeHash(v.stack[k-2].h, v.stack[k-1].h), 2 * v.stack[k-1].n}
		v.stack = v.stack[:k-1]
	}
}

// root returns the RFC 6962 tree hash of the leaves pushed so far.
func (v *verifier) root() tlog.Hash {
	if len(v.stack) == 0 {
		return emptyRoot
	}
	h := v.stack[len(v.stack)-1].h
	for k := len(v.stack) - 2; k >= 0; k-- {
		h = tlog.NodeHash(v.stack[k].h, h)
	}
	return h
}

// treeHash returns the hash of a complete subtree of len(hs) (a power of
// two) leaves.
func treeHash(hs []tlog.Hash) tlog.Hash {
	hs = append([]tlog.Hash(nil), hs...)
	for len(hs) > 1 {
		for k := 0; k < len(hs)/2; k++ {
			hs[k] = tlog.NodeHash(hs[2*k], hs[2*k+1])
		}
		hs = hs[:len(hs)/2]
	}
	return hs[0]
}

// addLevel records h as the next hash at tile level l (the root of a
// complete subtree of 256^l leaves), and carries full tiles upwards.
func (v *verifier) addLevel(l int, h tlog.Hash) {
	for len(v.level) <= l {
		v.level = append(v.level, nil)
	}
	v.level[l] = append(v.level[l], h)
	if n := len(v.level[l]); n%tileWidth == 0 {
		v.addLevel(l+1, treeHash(v.level[l][n-tileWidth:]))
	}
}

// checkUpperTiles compares the stored tiles of level 1 and up with the
// hashes recomputed from the entries.
func (v *verifier) checkUpperTiles() {
	for l := 1; l < len(v.level); l++ {
		hs := v.level[l]
		for n := uint64(0); n*tileWidth < uint64(len(hs)); n++ {
			w := int(min(uint64(len(hs))-n*tileWidth, tileWidth))
			tile, p, err := readHashTile(v.fsys, uint64(l), n, w)
			if err != nil {
				v.problem(Problem{Kind: "tile", Index: -1, Path: p, Detail: err.Error()})
				continue
			}
			for k := range w {
				want := hs[n*tileWidth+uint64(k)]
				if got := tile[k*hashSize : (k+1)*hashSize]; string(got) != string(want[:]) {
					span := uint64(1) << (8 * l)
					first := (n*tileWidth + uint64(k)) * span
					v.problem(Problem{Kind: "tile", Index: int64(first), Path: p,
						Detail:   fmt.Sprintf("hash %d (entries %d–%d)", k, first, first+span-1),
						Expected: hexh(want[:]), Found: hexh(got)})
				}
			}
		}
	}
}
