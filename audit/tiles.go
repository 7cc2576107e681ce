package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/mod/sumdb/tlog"
)

// The log's public files follow C2SP tlog-tiles, as tessera's POSIX driver
// writes them under the log directory:
//
//	checkpoint                      the latest signed checkpoint
//	tile/<L>/<N>[.p/<W>]            hash tiles: level L, number N, width W when partial
//	tile/entries/<N>[.p/<W>]        entry bundles: entries 256·N … 256·N+W-1
//
// N is written in groups of three digits, all but the last prefixed "x"
// (1234067 → x001/x234/067). A hash tile is W concatenated 32-byte hashes;
// a level-0 tile holds leaf hashes, a level-L tile the roots of complete
// subtrees of 256^L leaves. An entry bundle is W entries, each a big-endian
// uint16 length followed by that many bytes.

const (
	tileWidth = layout.TileWidth // 256
	hashSize  = tlog.HashSize
)

// readResource reads the resource at p (a full tile or bundle path) with at
// least w items. A partial of exactly w is preferred; failing that the full
// resource, then any larger partial, all of which begin with the same w
// items. It returns the data and the path it came from.
func readResource(fsys fs.FS, full string, w int) ([]byte, string, error) {
	var try []string
	if w < tileWidth {
		try = append(try, full+".p/"+strconv.Itoa(w))
	}
	try = append(try, full)
	for _, p := range try {
		b, err := fs.ReadFile(fsys, p)
		if err == nil {
			return b, p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, p, err
		}
	}
	if w < tileWidth {
		if ents, err := fs.ReadDir(fsys, full+".p"); err == nil {
			for _, e := range ents {
				if k, err := strconv.Atoi(e.Name()); err == nil && k > w && k < tileWidth {
					p := full + ".p/" + e.Name()
					if b, err := fs.ReadFile(fsys, p); err == nil {
						return b, p, nil
					}
				}
			}
		}
	}
	return nil, try[0], fs.ErrNotExist
}

// tilePath returns the path of the full tile at level l, number n.
func tilePath(l, n uint64) string { return layout.TilePath(l, n, 0) }

// bundlePath returns the path of the full entry bundle number n.
func bundlePath(n uint64) string { return layout.EntriesPath(n, 0) }

// readHashTile reads w hashes of tile (l, n).
func readHashTile(fsys fs.FS, l, n uint64, w int) ([]byte, string, error) {
	b, p, err := readResource(fsys, tilePath(l, n), w)
	if err != nil {
		return nil, p, err
	}
	if len(b)%hashSize != 0 || len(b) < w*hashSize {
		return nil, p, fmt.Errorf("tile %s has %d bytes, want %d", p, len(b), w*hashSize)
	}
	return b[:w*hashSize], p, nil
}

// parseBundle splits an entry bundle into its entries. It returns the
// entries it could parse and an error if the data ends inside an entry.
func parseBundle(b []byte) ([][]byte, error) {
	var ents [][]byte
	for off := 0; off < len(b); {
		if len(b)-off < 2 {
			return ents, fmt.Errorf("truncated length at byte %d", off)
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		off += 2
		if len(b)-off < n {
			return ents, fmt.Errorf("entry %d truncated: %d of %d bytes", len(ents), len(b)-off, n)
		}
		ents = append(ents, b[off:off+n:off+n])
		off += n
	}
	return ents, nil
}

// readBundle returns the first w entries of bundle n. The resource read must
// parse whole, and hold exactly w entries when it is the one named for w.
func readBundle(fsys fs.FS, n uint64, w int) ([][]byte, string, error) {
	b, p, err := readResource(fsys, bundlePath(n), w)
	if err != nil {
		return nil, p, err
	}
	ents, err := parseBundle(b)
	if err != nil {
		return nil, p, fmt.Errorf("entry bundle %s: %w", p, err)
	}
	exact := bundlePath(n)
	if w < tileWidth {
		exact += ".p/" + strconv.Itoa(w)
	}
	if len(ents) < w || (p == exact && len(ents) != w) {
		return nil, p, fmt.Errorf("entry bundle %s: %d entries, want %d", p, len(ents), w)
	}
	return ents[:w], p, nil
}

// readEntry returns entry i of a log of at least i+1 entries.
func readEntry(fsys fs.FS, i uint64) ([]byte, error) {
	ents, _, err := readBundle(fsys, i/tileWidth, int(i%tileWidth)+1)
	if err != nil {
		return nil, err
	}
	return ents[i%tileWidth], nil
}

// tileReader serves golang.org/x/mod/sumdb/tlog's TileHashReader from the
// tlog-tiles files; tlog authenticates every tile against the tree hash.
type tileReader struct {
	fsys  fs.FS
	cache map[tlog.Tile][]byte
}

func (r *tileReader) Height() int { return layout.TileHeight }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if b, ok := r.cache[t]; ok {
			out[i] = b
			continue
		}
		if t.L < 0 || t.N < 0 {
			return nil, fmt.Errorf("audit: bad tile %+v", t)
		}
		b, _, err := readHashTile(r.fsys, uint64(t.L), uint64(t.N), t.W)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		out[i] = b
	}
	return out, nil
}

func (r *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	if r.cache == nil || len(r.cache) > 4096 {
		r.cache = make(map[tlog.Tile][]byte)
	}
	for i, t := range tiles {
		r.cache[t] = data[i]
	}
}

// proveIndex returns the inclusion proof of entry i in the tree of cp.
func proveIndex(fsys fs.FS, tr *tileReader, cp *Checkpoint, i uint64) (tlog.RecordProof, error) {
	if i >= cp.Size {
		return nil, fmt.Errorf("audit: entry %d is not in the tree of size %d", i, cp.Size)
	}
	tree := tlog.Tree{N: int64(cp.Size), Hash: cp.Root}
	p, err := tlog.ProveRecord(tree.N, int64(i), tlog.TileHashReader(tree, tr))
	if err != nil {
		return nil, fmt.Errorf("audit: prove entry %d in tree %d: %w", i, cp.Size, err)
	}
	return p, nil
}
