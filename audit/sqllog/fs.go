package sqllog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/transparency-dev/tessera/api/layout"
)

// FS returns the log as a read-only fs.FS at the C2SP tlog-tiles paths:
// "checkpoint", "tile/L/N[.p/W]" and "tile/entries/N[.p/W]". A partial
// resource holds exactly W hashes or entries (the database keeps the
// largest version of a tile; the rest is cut off), as the spec requires.
// ctx bounds every read.
func (l *Log) FS(ctx context.Context) fs.FS { return &dbFS{ctx: ctx, l: l} }

type dbFS struct {
	ctx context.Context
	l   *Log
}

func (d *dbFS) Open(name string) (fs.File, error) {
	b, err := d.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return &file{name: name, Reader: bytes.NewReader(b), size: int64(len(b))}, nil
}

// ReadFile implements fs.ReadFileFS.
func (d *dbFS) ReadFile(name string) ([]byte, error) {
	perr := func(err error) error { return &fs.PathError{Op: "open", Path: name, Err: err} }
	if !fs.ValidPath(name) {
		return nil, perr(fs.ErrInvalid)
	}
	if name == "checkpoint" {
		b, err := d.l.reader.ReadCheckpoint(d.ctx)
		if err != nil || len(b) == 0 {
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return nil, perr(fs.ErrNotExist)
			}
			return nil, perr(err)
		}
		return b, nil
	}
	rest, ok := strings.CutPrefix(name, "tile/")
	if !ok {
		return nil, perr(fs.ErrNotExist)
	}
	if idx, ok := strings.CutPrefix(rest, "entries/"); ok {
		n, w, err := layout.ParseTileIndexPartial(idx)
		if err != nil {
			return nil, perr(fs.ErrNotExist)
		}
		b, err := d.l.reader.ReadEntryBundle(d.ctx, n, w)
		if err != nil {
			return nil, readErr(perr, err)
		}
		if w == 0 {
			w0 := layout.EntryBundleWidth
			return firstEntries(b, int(w0), perr)
		}
		return firstEntries(b, int(w), perr)
	}
	lvl, idx, ok := strings.Cut(rest, "/")
	if !ok {
		return nil, perr(fs.ErrNotExist)
	}
	lv, n, w, err := layout.ParseTileLevelIndexPartial(lvl, idx)
	if err != nil {
		return nil, perr(fs.ErrNotExist)
	}
	b, err := d.l.reader.ReadTile(d.ctx, lv, n, w)
	if err != nil {
		return nil, readErr(perr, err)
	}
	want := int(w)
	if want == 0 {
		want = layout.TileWidth
	}
	if len(b) < 32*want {
		return nil, perr(fs.ErrNotExist)
	}
	return b[:32*want], nil
}

func readErr(perr func(error) error, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return perr(fs.ErrNotExist)
	}
	return perr(err)
}

// firstEntries cuts an entry bundle (entries as 2-byte big-endian length
// and bytes) after its first w entries; fewer is "not there".
func firstEntries(b []byte, w int, perr func(error) error) ([]byte, error) {
	off := 0
	for i := 0; i < w; i++ {
		if len(b)-off < 2 {
			return nil, perr(fs.ErrNotExist)
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		if len(b)-off-2 < n {
			return nil, perr(fmt.Errorf("entry bundle truncated in entry %d", i))
		}
		off += 2 + n
	}
	return b[:off], nil
}

type file struct {
	name string
	*bytes.Reader
	size int64
}

func (f *file) Stat() (fs.FileInfo, error) { return f, nil }
func (f *file) Close() error               { return nil }
func (f *file) Name() string               { return f.name[strings.LastIndex(f.name, "/")+1:] }
func (f *file) Size() int64                { return f.size }
func (f *file) Mode() fs.FileMode          { return 0o444 }
func (f *file) ModTime() time.Time         { return time.Time{} }
func (f *file) IsDir() bool                { return false }
func (f *file) Sys() any                   { return nil }

// Entries returns up to max consecutive entries from index start, up to
// the integrated size (for exporters, package stream).
func (l *Log) Entries(start uint64, max int) ([][]byte, error) {
	ctx := context.Background()
	end, err := l.reader.IntegratedSize(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqllog: %w", err)
	}
	if start >= end || max <= 0 {
		return nil, nil
	}
	return l.entries(ctx, start, min(end, start+uint64(max)))
}

// entries returns entries start…end-1, all of which the caller knows to be
// in the tree.
func (l *Log) entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	var out [][]byte
	for i := start; i < end; {
		n := i / layout.EntryBundleWidth
		b, err := l.reader.ReadEntryBundle(ctx, n, layout.PartialTileSize(0, n, end))
		if err != nil {
			return out, fmt.Errorf("sqllog: entry bundle %d: %w", n, err)
		}
		for j, off := uint64(0), 0; off < len(b) && n*layout.EntryBundleWidth+j < end; j++ {
			if len(b)-off < 2 {
				return out, fmt.Errorf("sqllog: entry bundle %d: truncated", n)
			}
			sz := int(binary.BigEndian.Uint16(b[off:]))
			if len(b)-off-2 < sz {
				return out, fmt.Errorf("sqllog: entry bundle %d: truncated", n)
			}
			if k := n*layout.EntryBundleWidth + j; k >= i {
				out = append(out, b[off+2:off+2+sz])
			}
			off += 2 + sz
		}
		i = (n + 1) * layout.EntryBundleWidth
	}
	return out, nil
}
