package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Names of the files a bundle may hold.
const (
	MetadataFile         = "metadata.json"
	PlanFile             = "plan.vouchplan"
	BuildLogFile         = "build.log.jsonl"
	ReportFile           = "report.json"
	TimingCacheFile      = "timing.cache"
	CalibrationCacheFile = "calibration.cache"
	ExplainFile          = "explain.json"
	ProvenanceFile       = "provenance.json"
)

// fileOrder is the order in which Write emits entries; it is also the list
// of the names a bundle may hold.
var fileOrder = []string{
	MetadataFile, PlanFile, BuildLogFile, ReportFile,
	TimingCacheFile, CalibrationCacheFile, ExplainFile, ProvenanceFile,
}

func knownFile(name string) bool {
	for _, n := range fileOrder {
		if n == name {
			return true
		}
	}
	return false
}

// Default limits for Read.
const (
	DefaultMaxFileSize  = 8 << 30  // one file, the plan included
	DefaultMaxTotalSize = 16 << 30 // all files together
	// MaxJSONSize bounds metadata.json and provenance.json whatever the
	// limits, since they are parsed whole.
	MaxJSONSize = 16 << 20
	// maxTrailer bounds the zero padding accepted after the end of archive.
	maxTrailer = 1 << 20
)

// Limits bounds what Read accepts. The zero value means the defaults.
type Limits struct {
	MaxFileSize  int64 // largest entry; 0 means DefaultMaxFileSize
	MaxTotalSize int64 // sum of all entries; 0 means DefaultMaxTotalSize
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = DefaultMaxFileSize
	}
	if l.MaxTotalSize <= 0 {
		l.MaxTotalSize = DefaultMaxTotalSize
	}
	return l
}

// Bundle is a bundle's files in memory. A Bundle returned by Read is
// well-formed but not yet verified: call Verify (or use Load) before
// trusting anything in it.
type Bundle struct {
	files map[string][]byte
	meta  Metadata
}

// Metadata returns the bundle's parsed metadata.json.
func (b *Bundle) Metadata() Metadata { return b.meta }

// File returns the contents of the named file and whether the bundle holds
// it. The slice must not be modified.
func (b *Bundle) File(name string) ([]byte, bool) {
	data, ok := b.files[name]
	return data, ok
}

// Plan returns the plan's bytes. The slice must not be modified.
func (b *Bundle) Plan() []byte { return b.files[PlanFile] }

// Names returns the names of the files the bundle holds, in archive order.
func (b *Bundle) Names() []string {
	var names []string
	for _, n := range fileOrder {
		if _, ok := b.files[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// Signed reports whether the bundle holds a provenance.json.
func (b *Bundle) Signed() bool {
	_, ok := b.files[ProvenanceFile]
	return ok
}

// Digest returns "sha256:" and the lowercase hex SHA-256 of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// validDigest reports whether d is "sha256:" and 64 lowercase hex digits.
func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// epoch is the mtime of every entry.
var epoch = time.Unix(0, 0).UTC()

// Encode returns the bundle's archive bytes (see the package documentation).
func (b *Bundle) Encode() []byte {
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		panic(err) // bytes.Buffer does not fail
	}
	return buf.Bytes()
}

// WriteTo writes the bundle's archive to w.
func (b *Bundle) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	for _, name := range b.Names() {
		data := b.files[name]
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     name,
			Mode:     0o644,
			Size:     int64(len(data)),
			ModTime:  epoch,
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return cw.n, fmt.Errorf("bundle: writing %s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return cw.n, fmt.Errorf("bundle: writing %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return cw.n, fmt.Errorf("bundle: writing archive end: %w", err)
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteFile writes the bundle to path atomically: to a temporary file in the
// same directory, synced, then renamed over path. On error nothing is left
// behind.
func (b *Bundle) WriteFile(path string) error {
	return writeFileAtomic(path, 0o644, func(w io.Writer) error {
		_, err := b.WriteTo(w)
		return err
	})
}

// writeFileAtomic writes path via a temporary file and a rename.
func writeFileAtomic(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("bundle: writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("bundle: writing %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("bundle: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("bundle: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bundle: writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("bundle: writing %s: %w", path, err)
	}
	return nil
}

// ReadFile reads and parses the bundle file at path with default limits.
// It does not verify it.
func ReadFile(path string) (*Bundle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	b, err := Read(f, Limits{})
	if err != nil {
		return nil, fmt.Errorf("%w (reading %s)", err, path)
	}
	return b, nil
}

// Read parses a bundle archive from r, refusing anything the package
// documentation does not allow. It does not verify signatures or digests.
func Read(r io.Reader, lim Limits) (*Bundle, error) {
	lim = lim.withDefaults()
	tail := &tailReader{r: r}
	tr := tar.NewReader(tail)
	files := make(map[string][]byte)
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, errFormat("truncated archive after %d entries", len(files))
			}
			return nil, errFormat("invalid archive after %d entries: %v", len(files), err)
		}
		name := hdr.Name
		if err := checkName(name); err != nil {
			return nil, err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, errFormat("entry %q is %s, not a regular file", name, typeName(hdr))
		}
		if !knownFile(name) {
			return nil, errFormat("unknown entry %q (a version 1 bundle holds only %s)", name, strings.Join(fileOrder, ", "))
		}
		if _, dup := files[name]; dup {
			return nil, errFormat("duplicate entry %q", name)
		}
		max := lim.MaxFileSize
		if (name == MetadataFile || name == ProvenanceFile) && max > MaxJSONSize {
			max = MaxJSONSize
		}
		if hdr.Size > max {
			return nil, errFormat("entry %q is %d bytes, over the limit of %d", name, hdr.Size, max)
		}
		if total+hdr.Size > lim.MaxTotalSize {
			return nil, errFormat("entries add up to more than the limit of %d bytes at %q", lim.MaxTotalSize, name)
		}
		total += hdr.Size
		// io.ReadAll grows as data arrives, so a header that lies about
		// its size cannot make us allocate it up front.
		data, err := io.ReadAll(tr)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, errFormat("truncated archive in entry %q (%d of %d bytes)", name, len(data), hdr.Size)
			}
			return nil, errFormat("reading entry %q: %v", name, err)
		}
		files[name] = data
	}
	if !tail.endMarker() {
		return nil, errFormat("truncated archive: no end-of-archive marker after %d entries", len(files))
	}
	if err := checkTrailer(r); err != nil {
		return nil, err
	}
	return fromFiles(files)
}

// tailReader remembers the last 1024 bytes read through it: an archive that
// archive/tar reads to io.EOF without them being zero was cut at an entry
// boundary instead of ending with the two zero blocks.
type tailReader struct {
	r    io.Reader
	last [1024]byte
	n    int64
}

func (t *tailReader) Read(p []byte) (int, error) {
	k, err := t.r.Read(p)
	if k >= len(t.last) {
		copy(t.last[:], p[k-len(t.last):k])
	} else if k > 0 {
		copy(t.last[:], t.last[k:])
		copy(t.last[len(t.last)-k:], p[:k])
	}
	t.n += int64(k)
	return k, err
}

func (t *tailReader) endMarker() bool {
	return t.n >= int64(len(t.last)) && t.last == [1024]byte{}
}

// checkTrailer requires that only zero bytes, and not many, follow the end
// of the archive, so that nothing can hide there.
func checkTrailer(r io.Reader) error {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		for _, c := range buf[:k] {
			if c != 0 {
				return errFormat("data after the end of the archive")
			}
		}
		n += int64(k)
		if n > maxTrailer {
			return errFormat("more than %d bytes after the end of the archive", maxTrailer)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errFormat("reading after the end of the archive: %v", err)
		}
	}
}

// checkName refuses names that would escape a directory if extracted.
func checkName(name string) error {
	if name == "" {
		return errFormat("entry with an empty name")
	}
	if strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.Contains(name, "/") ||
		name == "." || name == ".." || strings.Contains(name, "..") || strings.ContainsRune(name, 0) {
		return errFormat("entry %q escapes the bundle (path traversal)", name)
	}
	return nil
}

func typeName(hdr *tar.Header) string {
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		return fmt.Sprintf("a symbolic link to %q", hdr.Linkname)
	case tar.TypeLink:
		return fmt.Sprintf("a hard link to %q", hdr.Linkname)
	case tar.TypeDir:
		return "a directory"
	case tar.TypeChar, tar.TypeBlock:
		return "a device"
	case tar.TypeFifo:
		return "a FIFO"
	case tar.TypeXGlobalHeader:
		return "a global PAX header"
	case tar.TypeGNUSparse:
		return "a sparse file"
	}
	return fmt.Sprintf("of type %q", hdr.Typeflag)
}

// fromFiles checks the files' presence and parses metadata.json.
func fromFiles(files map[string][]byte) (*Bundle, error) {
	for _, req := range []string{MetadataFile, PlanFile} {
		if _, ok := files[req]; !ok {
			return nil, errFormat("no %s in the archive", req)
		}
	}
	meta, err := parseMetadata(files[MetadataFile])
	if err != nil {
		return nil, err
	}
	return &Bundle{files: files, meta: meta}, nil
}
