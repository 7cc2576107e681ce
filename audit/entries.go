package audit

import (
	"errors"
	"fmt"
	"io/fs"
)

// Entries returns up to max consecutive entries starting at index start,
// read a bundle at a time, stopping at the end of what is in the tree
// (integrated) and, for a log opened read-only, at the latest checkpoint's
// size. It returns no entries and no error when start is at the end. It is
// how exporters read the log: one bundle read serves up to 256 entries.
func (l *Log) Entries(start uint64, max int) ([][]byte, error) {
	var end uint64
	if l.w != nil {
		end = l.w.integ.Load()
	} else {
		cp, err := l.Checkpoint()
		if err != nil {
			return nil, err
		}
		end = cp.Size
	}
	if start >= end || max <= 0 {
		return nil, nil
	}
	end = min(end, start+uint64(max))
	var out [][]byte
	for i := start; i < end; {
		n := i / tileWidth
		w := tileWidth
		if last := (n + 1) * tileWidth; last > end {
			w = int(end - n*tileWidth)
		}
		ents, _, err := readBundle(l.fsys, n, w)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return out, fmt.Errorf("%w: entry %d", ErrNotFound, i)
			}
			return out, fmt.Errorf("audit: entries from %d: %w", i, err)
		}
		for j := i - n*tileWidth; j < uint64(w); j++ {
			out = append(out, ents[j])
		}
		i = n*tileWidth + uint64(w)
	}
	return out, nil
}
