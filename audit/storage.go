package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// ErrDamaged is returned (wrapped, with the evidence) when a writable log's
// own files do not agree with each other at Open: its tail does not hash
// to its tree state or signed checkpoint, or its write-ahead log and its
// tree hold different entries at one index. Appending to such a log would
// publish new checkpoints over damage, so Open refuses.
var ErrDamaged = errors.New("audit: the log's storage is damaged")

// checkTail checks, before tessera starts appending, that the newest
// entries (the last entry bundle) hash to the level-0 tile hashes, and
// that those are authenticated by the tree's root: the tree state's, and
// the signed checkpoint's when it is smaller. A full check is Verify's
// job; this one costs a few file reads and catches a cut or rewritten
// tail, which tessera would otherwise extend.
func (l *Log) checkTail() error {
	raw, err := fs.ReadFile(l.fsys, ".state/treeState")
	if errors.Is(err, fs.ErrNotExist) {
		if _, cerr := fs.Stat(l.fsys, "checkpoint"); cerr == nil {
			return fmt.Errorf("%w: %s has a checkpoint but no tree state (.state/treeState)", ErrDamaged, l.dir)
		}
		return nil // a new log
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	var st struct {
		Size uint64 `json:"size"`
		Root []byte `json:"root"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || len(st.Root) != tlog.HashSize {
		return fmt.Errorf("%w: .state/treeState does not parse (%q)", ErrDamaged, raw)
	}
	trees := []*Checkpoint{{Size: st.Size}}
	copy(trees[0].Root[:], st.Root)
	if b, err := fs.ReadFile(l.fsys, "checkpoint"); err == nil {
		cp, err := ParseCheckpoint(b, l.keys...)
		if err != nil {
			return fmt.Errorf("%w: the published checkpoint: %w", ErrDamaged, err)
		}
		switch {
		case cp.Size > st.Size:
			return fmt.Errorf("%w: the checkpoint has %d entries but the tree state only %d", ErrDamaged, cp.Size, st.Size)
		case cp.Size == st.Size && cp.Root != trees[0].Root:
			return fmt.Errorf("%w: the checkpoint and the tree state have %d entries but different roots (%x, %x)", ErrDamaged, cp.Size, cp.Root[:], st.Root)
		case cp.Size < st.Size:
			trees = append(trees, cp)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	for _, t := range trees {
		if err := checkBundleTail(l.fsys, t); err != nil {
			return fmt.Errorf("%w: %w (vouch audit verify --log %s shows the damage; restore the files from a backup)", ErrDamaged, err, l.dir)
		}
	}
	return nil
}

// checkBundleTail checks the last entry bundle of the tree of cp against
// the tiles, authenticated by cp's root.
func checkBundleTail(fsys fs.FS, cp *Checkpoint) error {
	if cp.Size == 0 {
		return nil
	}
	n := (cp.Size - 1) / tileWidth
	w := int(cp.Size - n*tileWidth)
	ents, p, err := readBundle(fsys, n, w)
	if err != nil {
		return fmt.Errorf("the last entry bundle of the tree of %d entries: %w", cp.Size, err)
	}
	ix := make([]int64, w)
	for k := range ix {
		ix[k] = tlog.StoredHashIndex(0, int64(n*tileWidth)+int64(k))
	}
	tree := tlog.Tree{N: int64(cp.Size), Hash: cp.Root}
	hs, err := tlog.TileHashReader(tree, &tileReader{fsys: fsys}).ReadHashes(ix)
	if err != nil {
		return fmt.Errorf("the tiles of the tree of %d entries do not hash to its root %x: %w", cp.Size, cp.Root[:], err)
	}
	for k, e := range ents {
		if got := tlog.RecordHash(e); got != hs[k] {
			return fmt.Errorf("entry %d (%s) hashes to %x, the tree of %d entries commits to %x", n*tileWidth+uint64(k), p, got[:], cp.Size, hs[k][:])
		}
	}
	return nil
}

// checkWALAgainstTree compares the records the write-ahead log still holds
// below the tree's size with the tree's entries: the two must agree, or
// one of them was changed behind the log's back.
func (l *Log) checkWALAgainstTree(recs []walRecord, size uint64) error {
	if len(recs) > 0 && recs[len(recs)-1].index+1 < size {
		l.log.Warn("audit: the write-ahead log ends before the tree (its newest file may be gone); the tree holds those entries",
			"wal_end", recs[len(recs)-1].index+1, "tree", size)
	}
	var ents [][]byte
	bundle := ^uint64(0)
	for _, r := range recs {
		if r.index >= size {
			break
		}
		// Read the bundle of the tree's own size: an older partial bundle
		// may still lie beside a full one.
		if n := r.index / tileWidth; n != bundle {
			var err error
			if ents, _, err = readBundle(l.fsys, n, int(min(size-n*tileWidth, tileWidth))); err != nil {
				return fmt.Errorf("%w: entry %d is in the write-ahead log but cannot be read from the tree: %w", ErrDamaged, r.index, err)
			}
			bundle = n
		}
		e := ents[r.index%tileWidth]
		if string(e) != string(r.data) {
			we, te := tlog.RecordHash(r.data), tlog.RecordHash(e)
			return fmt.Errorf("%w: entry %d differs between the write-ahead log (leaf %x) and the tree (leaf %x)", ErrDamaged, r.index, we[:], te[:])
		}
	}
	return nil
}

// tesseraTemp matches the names of the temporary files tessera's POSIX
// driver writes before renaming them: the target's name followed by a
// random decimal number. Tile and bundle names are three digits at most,
// so an all-digit name longer than that is a temporary file too.
var tesseraTemp = regexp.MustCompile(`^(?:(?:checkpoint|treeState|gcState|version)[0-9]+|[0-9]{4,})$`)

// sweepTemps removes tessera's temporary files older than age from the
// log directory. Tessera v1.0.4 leaves one behind for every write that
// fails (a full disk fails them all), and nothing else removes them.
func (l *Log) sweepTemps(age time.Duration) (int, error) {
	n := 0
	cut := time.Now().Add(-age)
	err := filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != l.dir && (name == "wal" || name == "capture") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !tesseraTemp.MatchString(d.Name()) {
			return nil
		}
		if info, err := d.Info(); err != nil || info.ModTime().After(cut) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			n++
		}
		return nil
	})
	return n, err
}
