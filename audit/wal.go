package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The write-ahead log makes an append durable with one write and one fsync,
// shared by every append that arrives meanwhile (group commit); the entries
// reach tessera afterwards, in index order, and a restart feeds tessera
// whatever the WAL holds beyond tessera's integrated size.
//
// Files under <dir>/wal are named by the first index they may hold, 20
// decimal digits and ".wal". Format version 2 (written since vouch's
// storage hardening) starts with the line "vouch-wal v2\n" and the file's
// allocated length as a u64; the file is created at that length (zeros,
// preallocated where the file system can), and frames are written in place
// from the header on, all integers little-endian:
//
//	u32 len(data) | u32 CRC-32C(index | data) | u64 index | data
//
// A zero frame header ends the data. Indexes are consecutive across frames
// and files. Because the length is fixed when the file is made, a file cut
// short (or grown) afterwards is detected: acknowledged frames may be gone,
// and opening fails. A frame torn by a crash (a write that was never
// acknowledged: the fsync did not return) can only be the last thing in the
// last file; it is zeroed on open and reported. A bad frame followed by any
// whole frame further on is damage to acknowledged records (a corrupted
// length field, for instance): opening fails, and [Options.RepairWAL]
// drops what follows the damage, keeping the damaged files aside and
// logging every lost index.
//
// Version 1 files ("vouch-wal v1\n", appended without preallocation) are
// still read; a log that has one starts a version 2 file for new frames.
// In a version 1 file a truncation at a frame boundary cannot be told from
// a clean end.
const (
	walHeaderV1 = "vouch-wal v1\n"
	walHeaderV2 = "vouch-wal v2\n"
	walHeadLen  = len(walHeaderV2) + 8
)

const walFrameHeader = 16

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrWAL is returned (wrapped) when the write-ahead log is damaged, or
// disagrees with the tree.
var ErrWAL = errors.New("audit: damaged write-ahead log")

type walRecord struct {
	index uint64
	data  []byte
}

type wal struct {
	dir      string
	f        *os.File
	segs     []uint64 // first index of each segment file, ascending; the last is f
	size     int64    // bytes used in f
	cap      int64    // allocated length of f
	segBytes int64    // allocate this much for a new segment
	buf      []byte
}

func walName(first uint64) string { return fmt.Sprintf("%020d.wal", first) }

// walDamage describes damage found by openWAL.
type walDamage struct {
	file   string
	offset int64
	why    string
	after  int    // whole frames found beyond the damage
	lastIx uint64 // the highest index among them
	torn   bool   // only a torn tail: no acknowledged frame is affected
}

func (d *walDamage) Error() string {
	s := fmt.Sprintf("%s: offset %d: %s", d.file, d.offset, d.why)
	if d.after > 0 {
		s += fmt.Sprintf("; %d whole frames follow it (up to index %d): acknowledged records would be lost", d.after, d.lastIx)
	}
	return s
}

// walOpen is what openWAL found.
type walOpen struct {
	recs  []walRecord
	torn  []*walDamage // torn tails zeroed (unclean shutdown)
	fixed []*walDamage // damage repaired (only with repair)
}

// openWAL reads every segment under dir and opens the last one for
// writing, creating a segment for index next when none exists (or when
// the last is in format 1). Damage fails with ErrWAL, unless repair is set:
// then the records before the damage are kept (rewritten into a fresh
// segment), the damaged files are renamed aside (*.damaged-<unix time>),
// and the damage is reported in walOpen.fixed.
func openWAL(dir string, segBytes int64, next uint64, repair bool) (*wal, *walOpen, error) {
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
	res := &walOpen{}
	var lastSeg *segment
	repaired := false
	var damagedFrom uint64
	for i, first := range w.segs {
		last := i == len(w.segs)-1
		path := filepath.Join(dir, walName(first))
		seg, err := readSegment(path, last)
		if err == nil {
			for _, r := range seg.recs {
				if len(res.recs) > 0 && r.index != res.recs[len(res.recs)-1].index+1 {
					err = &walDamage{file: walName(first), why: fmt.Sprintf("index %d follows %d", r.index, res.recs[len(res.recs)-1].index)}
					break
				}
				if r.index < first {
					err = &walDamage{file: walName(first), why: fmt.Sprintf("index %d below the file's first index", r.index)}
					break
				}
				res.recs = append(res.recs, r)
			}
		}
		if err != nil {
			var d *walDamage
			if !errors.As(err, &d) || !repair {
				return nil, nil, fmt.Errorf("%w: %w", ErrWAL, err)
			}
			// Repair: keep what came before the damage, set the rest aside.
			damagedFrom, repaired = first, true
			if seg != nil {
				for _, r := range seg.recs {
					if r.index < first || (len(res.recs) > 0 && r.index != res.recs[len(res.recs)-1].index+1) {
						break
					}
					res.recs = append(res.recs, r)
				}
			}
			res.fixed = append(res.fixed, d)
			stamp := strconv.FormatInt(time.Now().Unix(), 10)
			for _, s := range w.segs[i:] {
				p := filepath.Join(dir, walName(s))
				if err := os.Rename(p, p+".damaged-"+stamp); err != nil {
					return nil, nil, fmt.Errorf("audit: wal repair: %w", err)
				}
			}
			w.segs = w.segs[:i]
			if err := syncDir(dir); err != nil {
				return nil, nil, err
			}
			break
		}
		if seg.torn != nil {
			res.torn = append(res.torn, seg.torn)
		}
		if last {
			lastSeg = seg
		}
	}
	walNext := next
	if len(res.recs) > 0 {
		walNext = max(next, res.recs[len(res.recs)-1].index+1)
	}
	if lastSeg != nil {
		first := w.segs[len(w.segs)-1]
		f, err := os.OpenFile(filepath.Join(dir, walName(first)), os.O_RDWR, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("audit: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("audit: wal: %w", err)
		}
		w.f, w.size, w.cap = f, lastSeg.good, st.Size()
		torn := len(res.torn) > 0 && res.torn[len(res.torn)-1].file == walName(first)
		if !lastSeg.v2 {
			// Format 1: cut a torn tail off, and write new frames to a
			// format 2 segment.
			if torn {
				if err := f.Truncate(lastSeg.good); err != nil {
					f.Close()
					return nil, nil, fmt.Errorf("audit: wal: %w", err)
				}
			}
			f.Close()
			w.f = nil
			return w, res, w.newSegment(walNext, 0)
		}
		// Zero a torn tail so that a later, shorter write cannot leave part
		// of it behind.
		if torn {
			if err := w.zero(lastSeg.good, w.cap); err != nil {
				f.Close()
				return nil, nil, err
			}
		}
		return w, res, nil
	}
	// No segment (a new log), or a repair set the last ones aside: the
	// records kept from the damaged file go back on disk first.
	var redo []walRecord
	if repaired {
		for _, r := range res.recs {
			if r.index >= damagedFrom {
				redo = append(redo, r)
			}
		}
	}
	if len(redo) == 0 {
		return w, res, w.newSegment(walNext, 0)
	}
	if err := w.newSegment(redo[0].index, 0); err != nil {
		return nil, nil, err
	}
	datas := make([][]byte, len(redo))
	for k, r := range redo {
		datas[k] = r.data
	}
	if err := w.write(redo[0].index, datas); err != nil {
		return nil, nil, err
	}
	return w, res, nil
}

// segment is what readSegment found in one file.
type segment struct {
	recs []walRecord
	good int64 // length of the good prefix
	v2   bool
	torn *walDamage
}

// readSegment returns the records of one segment. Only the last segment
// may end in a torn frame; a bad frame with a whole frame after it is
// damage, reported as a *walDamage (with the records before it).
func readSegment(path string, last bool) (*segment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	name := filepath.Base(path)
	seg := &segment{}
	var off int
	switch {
	case bytes.HasPrefix(data, []byte(walHeaderV2)):
		if len(data) < walHeadLen {
			return seg, &walDamage{file: name, why: "short header"}
		}
		seg.v2 = true
		if n := binary.LittleEndian.Uint64(data[len(walHeaderV2):]); n != uint64(len(data)) {
			return seg, &walDamage{file: name, why: fmt.Sprintf("the file has %d bytes but was allocated %d: it was cut short or extended, and acknowledged records may be gone", len(data), n)}
		}
		off = walHeadLen
	case bytes.HasPrefix(data, []byte(walHeaderV1)):
		off = len(walHeaderV1)
	case last && len(data) < walHeadLen && (bytes.HasPrefix([]byte(walHeaderV2), data) || bytes.HasPrefix([]byte(walHeaderV1), data)):
		return seg, nil // created but header not yet durable; never written to
	default:
		return seg, &walDamage{file: name, why: fmt.Sprintf("bad header %q", data[:min(len(data), len(walHeaderV2))])}
	}
	for off < len(data) {
		rest := data[off:]
		var why string
		if len(rest) < walFrameHeader {
			if seg.v2 && allZero(rest) {
				break
			}
			why = "short frame header"
		} else {
			n := int(binary.LittleEndian.Uint32(rest))
			sum := binary.LittleEndian.Uint32(rest[4:])
			switch {
			case seg.v2 && n == 0 && sum == 0 && allZero(rest[:walFrameHeader]):
				why = "end" // the end of the data, unless a frame follows
			case n > len(rest)-walFrameHeader:
				why = "frame longer than the file"
			case crc32.Checksum(rest[8:walFrameHeader+n], crcTable) != sum:
				why = "checksum mismatch"
			default:
				body := rest[8 : walFrameHeader+n]
				seg.recs = append(seg.recs, walRecord{index: binary.LittleEndian.Uint64(body), data: body[8:]})
				off += walFrameHeader + n
				continue
			}
		}
		expect := uint64(0)
		if k := len(seg.recs); k > 0 {
			expect = seg.recs[k-1].index + 1
		}
		d := &walDamage{file: name, offset: int64(off), why: why}
		d.after, d.lastIx = framesAfter(data, off+1, expect, len(seg.recs) == 0)
		if d.after > 0 {
			if why == "end" {
				d.why = "zeros where a frame should be"
			}
			seg.good = int64(off)
			return seg, d
		}
		if why == "end" {
			break
		}
		if !last {
			seg.good = int64(off)
			return seg, d
		}
		d.torn = true
		seg.torn = d
		break
	}
	seg.good = int64(off)
	return seg, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// framesAfter counts the whole, checksummed frames that start at or after
// from and carry an index at or beyond expect (any index when anyIndex):
// evidence that what lies before them is damage, not a torn tail.
func framesAfter(data []byte, from int, expect uint64, anyIndex bool) (n int, last uint64) {
	for off := from; off+walFrameHeader <= len(data); off++ {
		l := int(binary.LittleEndian.Uint32(data[off:]))
		if l == 0 || l > maxEntry || l > len(data)-off-walFrameHeader {
			continue
		}
		ix := binary.LittleEndian.Uint64(data[off+8:])
		if !anyIndex && (ix < expect || ix-expect > 1<<32) {
			continue
		}
		if crc32.Checksum(data[off+8:off+walFrameHeader+l], crcTable) != binary.LittleEndian.Uint32(data[off+4:]) {
			continue
		}
		n, last = n+1, ix
		off += walFrameHeader + l - 1
	}
	return n, last
}

// newSegment starts a segment for records from first on, allocated for at
// least need bytes of frames.
func (w *wal) newSegment(first uint64, need int64) error {
	path := filepath.Join(w.dir, walName(first))
	size := max(w.segBytes, int64(walHeadLen)+need)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("audit: wal: %w", err)
	}
	head := binary.LittleEndian.AppendUint64([]byte(walHeaderV2), uint64(size))
	err = preallocate(f, size)
	if err == nil {
		_, err = f.WriteAt(head, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(w.dir)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("audit: wal: new segment %s: %w", walName(first), err)
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f, w.size, w.cap = f, int64(walHeadLen), size
	w.segs = append(w.segs, first)
	return nil
}

// write appends frames for records first, first+1, … and makes them durable.
func (w *wal) write(first uint64, datas [][]byte) error {
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
	// Room for the frames and a zero header after them.
	if w.f == nil || w.size+int64(len(b))+walFrameHeader > w.cap {
		if err := w.newSegment(first, int64(len(b))+walFrameHeader); err != nil {
			return err
		}
	}
	if _, err := w.f.WriteAt(b, w.size); err != nil {
		// Zero what may have been written, so that no part of frames that
		// were never acknowledged stays behind a later, shorter write.
		if zerr := w.zero(w.size, w.size+int64(len(b))); zerr != nil {
			return fmt.Errorf("audit: wal sync: %w (and zeroing the failed write: %v)", err, zerr)
		}
		return fmt.Errorf("audit: wal write: %w", err)
	}
	if err := fdatasync(w.f); err != nil {
		return fmt.Errorf("audit: wal sync: %w", err)
	}
	w.size += int64(len(b))
	return nil
}

// zero writes zeros over [from, to) of the current segment.
func (w *wal) zero(from, to int64) error {
	z := make([]byte, min(to-from, 1<<20))
	for off := from; off < to; off += int64(len(z)) {
		n := min(int64(len(z)), to-off)
		if _, err := w.f.WriteAt(z[:n], off); err != nil {
			return fmt.Errorf("audit: wal: %w", err)
		}
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("audit: wal: %w", err)
	}
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
