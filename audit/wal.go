package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The write-ahead log makes an append durable with one write and one fsync,
// shared by every append that arrives meanwhile (group commit); the entries
// reach tessera afterwards, in index order, and a restart feeds tessera
// whatever the WAL holds beyond tessera's integrated size.
//
// Files under <dir>/wal are named by the first index they may hold, 20
// decimal digits and ".wal". Each starts with the line "vouch-wal v1\n",
// then frames, all integers little-endian:
//
//	u32 len(data) | u32 CRC-32C(index | data) | u64 index | data
//
// Indexes are consecutive across frames and files. A frame cut short at the
// end of the last file is a write that never completed (and was never
// acknowledged): it is dropped. A bad frame anywhere else is damage to
// acknowledged records, and opening fails.
const walHeader = "vouch-wal v1\n"

const walFrameHeader = 16

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrWAL is returned (wrapped) when the write-ahead log is damaged.
var ErrWAL = errors.New("audit: damaged write-ahead log")

type walRecord struct {
	index uint64
	data  []byte
}

type wal struct {
	dir      string
	f        *os.File
	segs     []uint64 // first index of each segment file, ascending; the last is f
	size     int64    // bytes in f
	segBytes int64    // rotate after this many bytes
	buf      []byte
}

func walName(first uint64) string { return fmt.Sprintf("%020d.wal", first) }

// openWAL reads every segment under dir, drops a torn tail, and opens the
// last segment for appending (creating one for index next when none exists).
// It returns the records found.
func openWAL(dir string, segBytes int64, next uint64) (*wal, []walRecord, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	w := &wal{dir: dir, segBytes: segBytes}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".wal")
		if !ok || len(name) != 20 {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		w.segs = append(w.segs, n)
	}
	slices.Sort(w.segs)
	var recs []walRecord
	for i, first := range w.segs {
		last := i == len(w.segs)-1
		rs, good, err := readSegment(filepath.Join(dir, walName(first)), last)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range rs {
			if len(recs) > 0 && r.index != recs[len(recs)-1].index+1 {
				return nil, nil, fmt.Errorf("%w: %s: index %d follows %d", ErrWAL, walName(first), r.index, recs[len(recs)-1].index)
			}
			if r.index < first {
				return nil, nil, fmt.Errorf("%w: %s: index %d below the file's first index", ErrWAL, walName(first), r.index)
			}
			recs = append(recs, r)
		}
		if last {
			f, err := os.OpenFile(filepath.Join(dir, walName(first)), os.O_RDWR, 0o644)
			if err != nil {
				return nil, nil, fmt.Errorf("audit: %w", err)
			}
			if err := f.Truncate(good); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("audit: wal: %w", err)
			}
			if _, err := f.Seek(good, io.SeekStart); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("audit: wal: %w", err)
			}
			w.f, w.size = f, good
		}
	}
	if w.f == nil {
		if len(recs) > 0 {
			next = recs[len(recs)-1].index + 1
		}
		if err := w.newSegment(next); err != nil {
			return nil, nil, err
		}
	}
	return w, recs, nil
}

// readSegment returns the records of one segment and the length of its good
// prefix. Only the last segment may end in a torn frame.
func readSegment(path string, last bool) ([]walRecord, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: %w", err)
	}
	name := filepath.Base(path)
	if len(data) < len(walHeader) {
		if last && bytes.HasPrefix([]byte(walHeader), data) {
			return nil, 0, nil // created but header not yet durable
		}
		return nil, 0, fmt.Errorf("%w: %s: short header", ErrWAL, name)
	}
	if string(data[:len(walHeader)]) != walHeader {
		return nil, 0, fmt.Errorf("%w: %s: bad header %q", ErrWAL, name, data[:len(walHeader)])
	}
	var recs []walRecord
	off := len(walHeader)
	for off < len(data) {
		rest := data[off:]
		torn := func(why string) ([]walRecord, int64, error) {
			if last {
				return recs, int64(off), nil
			}
			return nil, 0, fmt.Errorf("%w: %s: offset %d: %s", ErrWAL, name, off, why)
		}
		if len(rest) < walFrameHeader {
			return torn("short frame header")
		}
		n := int(binary.LittleEndian.Uint32(rest))
		sum := binary.LittleEndian.Uint32(rest[4:])
		if n > len(rest)-walFrameHeader {
			return torn("short frame")
		}
		body := rest[8 : walFrameHeader+n]
		if crc32.Checksum(body, crcTable) != sum {
			if off+walFrameHeader+n == len(data) {
				return torn("checksum")
			}
			return nil, 0, fmt.Errorf("%w: %s: offset %d: checksum mismatch", ErrWAL, name, off)
		}
		recs = append(recs, walRecord{index: binary.LittleEndian.Uint64(body), data: body[8:]})
		off += walFrameHeader + n
	}
	return recs, int64(off), nil
}

func (w *wal) newSegment(first uint64) error {
	path := filepath.Join(w.dir, walName(first))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("audit: wal: %w", err)
	}
	if _, err := f.Write([]byte(walHeader)); err != nil {
		f.Close()
		return fmt.Errorf("audit: wal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("audit: wal: %w", err)
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f, w.size = f, int64(len(walHeader))
	w.segs = append(w.segs, first)
	return nil
}

// write appends frames for records first, first+1, … and makes them durable.
func (w *wal) write(first uint64, datas [][]byte) error {
	if w.size >= w.segBytes {
		if err := w.newSegment(first); err != nil {
			return err
		}
	}
	b := w.buf[:0]
	for i, d := range datas {
		start := len(b)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
		b = append(b, 0, 0, 0, 0)
		b = binary.LittleEndian.AppendUint64(b, first+uint64(i))
		b = append(b, d...)
		binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+8:], crcTable))
	}
	w.buf = b
	if _, err := w.f.Write(b); err != nil {
		// Cut back to the last whole frame so a later write stays readable.
		w.f.Truncate(w.size)
		w.f.Seek(w.size, io.SeekStart)
		return fmt.Errorf("audit: wal write: %w", err)
	}
	if err := fdatasync(w.f); err != nil {
		return fmt.Errorf("audit: wal sync: %w", err)
	}
	w.size += int64(len(b))
	return nil
}

// trim removes segments all of whose records are below index below.
func (w *wal) trim(below uint64) error {
	for len(w.segs) > 1 && w.segs[1] <= below {
		if err := os.Remove(filepath.Join(w.dir, walName(w.segs[0]))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit: wal: %w", err)
		}
		w.segs = w.segs[1:]
	}
	return nil
}

func (w *wal) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("audit: sync %s: %w", dir, err)
	}
	return nil
}
