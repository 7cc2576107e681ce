// Package capture keeps the input tensors of audited requests, encrypted,
// so that a request can be replayed months later, and so that they can be
// erased without touching the audit log.
//
// # Store layout
//
//	<dir>/keys                      the key file (mode 0600), see below
//	<dir>/blobs/<hh>/<hex>.<keyid>  one blob per input digest and key
//
// where <hex> is the 64 hex digits of the input digest (the record's
// input_digest without "sha256:"), <hh> its first two, and <keyid> the id
// of the key that encrypted it. The store is content-addressed: the same
// input under the same key is stored once.
//
// # Blob format, version 1
//
//	"vouch-capture-v1\n"
//	u16 len(keyid) | keyid
//	u16 len(key name) | key name    the model (or tenant) the key is for
//	u64 expires                     Unix seconds; 0: kept until purged by hand
//	32 bytes                        SHA-256 of the plaintext (the input digest)
//	12 bytes                        nonce
//	ciphertext | 16-byte tag        AES-256-GCM
//
// integers big-endian. Everything before the nonce is the additional
// authenticated data. The plaintext is the canonical tensor encoding of the
// input set, audit.EncodeTensors: its SHA-256 is the record's input digest,
// so [Store.Get] proves that what it returns is what was served.
//
// # Keys and erasure
//
// Each model (or tenant: the name is the caller's choice) has one live
// AES-256 key, made on first use. The key file holds one line per key:
//
//	vouch-capture-key-v1 <keyid> <name> <created RFC 3339> <base64 key>
//
// [Store.Shred] destroys a name's keys: the line's key is replaced by
// "shredded <RFC 3339>" and the file is rewritten and fsync'd, and the
// blobs under those keys are deleted. Copies of blobs elsewhere (backups)
// stay unreadable, which is the point of crypto-shredding; the audit log,
// which holds only digests, still verifies. A later Put for the name makes
// a new key.
//
// # Retention
//
// Put stamps each blob with an expiry (Options.Retain after the time it
// is stored); [Store.Purge] deletes expired blobs.
package capture

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/tensor"
)

// Errors, wrapped with detail; test with errors.Is.
var (
	ErrNotFound = errors.New("capture: no captured input")
	ErrShredded = errors.New("capture: input erased (its key was shredded)")
	ErrCorrupt  = errors.New("capture: blob does not decrypt or does not match its digest")
)

const (
	blobMagic = "vouch-capture-v1\n"
	keyMagic  = "vouch-capture-key-v1"
)

// Options configure a Store. The zero value keeps blobs until they are
// purged by hand.
type Options struct {
	// Retain is how long a blob is kept after Put; 0 means forever.
	Retain time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Store is an encrypted, content-addressed store of input tensors. It is
// safe for concurrent use, and several processes may share a directory: the
// key file is changed under an exclusive lock and re-read when it changes.
type Store struct {
	dir  string
	opts Options

	mu    sync.Mutex
	keys  []*key // in file order
	stamp keyStamp
}

type key struct {
	id, name string
	created  time.Time
	shredded time.Time // zero while live
	aead     cipher.AEAD
	raw      []byte
}

type keyStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// Open opens (creating) the store in dir with default options.
func Open(dir string) (*Store, error) { return OpenOptions(dir, Options{}) }

// OpenOptions opens (creating) the store in dir.
func OpenOptions(dir string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o700); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	s := &Store{dir: dir, opts: opts}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reload(true); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) keyPath() string { return filepath.Join(s.dir, "keys") }

// reload re-reads the key file when it changed since the last read.
func (s *Store) reload(force bool) error {
	st, err := os.Stat(s.keyPath())
	if errors.Is(err, fs.ErrNotExist) {
		s.keys, s.stamp = nil, keyStamp{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("capture: key file %s is readable by others (mode %v); chmod 600 it", s.keyPath(), st.Mode().Perm())
	}
	stamp := keyStamp{mod: st.ModTime(), size: st.Size()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		stamp.ino = sys.Ino
	}
	if !force && stamp == s.stamp {
		return nil
	}
	b, err := os.ReadFile(s.keyPath())
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	keys, err := parseKeys(b)
	if err != nil {
		return fmt.Errorf("capture: key file %s: %w", s.keyPath(), err)
	}
	s.keys, s.stamp = keys, stamp
	return nil
}

func parseKeys(b []byte) ([]*key, error) {
	var keys []*key
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] != keyMagic || (len(f) != 5 && len(f) != 6) {
			return nil, fmt.Errorf("line %d: not a %s line", line, keyMagic)
		}
		k := &key{id: f[1], name: f[2]}
		var err error
		if k.created, err = time.Parse(time.RFC3339, f[3]); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if f[4] == "shredded" {
			if len(f) != 6 {
				return nil, fmt.Errorf("line %d: shredded without a time", line)
			}
			if k.shredded, err = time.Parse(time.RFC3339, f[5]); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		} else {
			raw, err := base64.StdEncoding.DecodeString(f[4])
			if err != nil || len(raw) != 32 {
				return nil, fmt.Errorf("line %d: key is not 32 bytes of base64", line)
			}
			if k.aead, err = newAEAD(raw); err != nil {
				return nil, err
			}
			k.raw = raw
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

func newAEAD(raw []byte) (cipher.AEAD, error) {
	blk, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	return cipher.NewGCM(blk)
}

func formatKeys(keys []*key) []byte {
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s %s %s ", keyMagic, k.id, k.name, k.created.UTC().Format(time.RFC3339))
		if k.shredded.IsZero() {
			b.WriteString(base64.StdEncoding.EncodeToString(k.raw))
		} else {
			b.WriteString("shredded " + k.shredded.UTC().Format(time.RFC3339))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// checkName rejects key names that the key file cannot hold.
func checkName(name string) error {
	if name == "" || len(name) > 1024 || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("capture: key name %q: want a non-empty name without spaces or control characters", name)
	}
	return nil
}

// withKeyLock runs fn with the key file locked exclusively and freshly
// read; fn returns the keys to write back, or nil to leave the file alone.
func (s *Store) withKeyLock(fn func() ([]*key, error)) error {
	lf, err := os.OpenFile(filepath.Join(s.dir, "keys.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("capture: lock key file: %w", err)
	}
	if err := s.reload(true); err != nil {
		return err
	}
	keys, err := fn()
	if err != nil || keys == nil {
		return err
	}
	tmp := s.keyPath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	_, werr := f.Write(formatKeys(keys))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, s.keyPath())
	}
	if werr == nil {
		werr = syncDir(s.dir)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("capture: write key file: %w", werr)
	}
	return s.reload(true)
}

// liveKey returns name's live key, making one if there is none.
func (s *Store) liveKey(name string) (*key, error) {
	if err := s.reload(false); err != nil {
		return nil, err
	}
	if k := s.find(name); k != nil {
		return k, nil
	}
	var out *key
	err := s.withKeyLock(func() ([]*key, error) {
		if out = s.find(name); out != nil {
			return nil, nil // another process made it
		}
		raw := make([]byte, 32)
		id := make([]byte, 8)
		rand.Read(raw)
		rand.Read(id)
		aead, err := newAEAD(raw)
		if err != nil {
			return nil, err
		}
		out = &key{id: hex.EncodeToString(id), name: name, created: s.opts.Now().UTC().Truncate(time.Second), aead: aead, raw: raw}
		return append(append([]*key(nil), s.keys...), out), nil
	})
	return out, err
}

func (s *Store) find(name string) *key {
	for _, k := range s.keys {
		if k.name == name && k.shredded.IsZero() {
			return k
		}
	}
	return nil
}

func (s *Store) byID(id string) *key {
	for _, k := range s.keys {
		if k.id == id {
			return k
		}
	}
	return nil
}

// parseDigest returns the 64 hex digits of "sha256:<hex>".
func parseDigest(d string) (string, error) {
	h, ok := strings.CutPrefix(d, "sha256:")
	if _, err := hex.DecodeString(h); !ok || err != nil || len(h) != 64 || strings.ToLower(h) != h {
		return "", fmt.Errorf("capture: input digest %q: want sha256: and 64 lowercase hex digits", d)
	}
	return h, nil
}

func (s *Store) blobPath(hexDigest, keyID string) string {
	return filepath.Join(s.dir, "blobs", hexDigest[:2], hexDigest+"."+keyID)
}

// Put stores inputs, encrypted with the live key of model (made on first
// use), under inputDigest, which must be their digest (audit.InputDigest).
// Storing an input already stored under the same key does nothing.
func (s *Store) Put(model, inputDigest string, inputs map[string]*tensor.Tensor) error {
	h, err := parseDigest(inputDigest)
	if err != nil {
		return err
	}
	if err := checkName(model); err != nil {
		return err
	}
	plain, err := audit.EncodeTensors(inputs)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if got := audit.DigestOf(plain); got != inputDigest {
		return fmt.Errorf("capture: inputs digest to %s, not %s", got, inputDigest)
	}
	s.mu.Lock()
	k, err := s.liveKey(model)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	path := s.blobPath(h, k.id)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	var expires uint64
	if s.opts.Retain > 0 {
		expires = uint64(s.opts.Now().Add(s.opts.Retain).Unix())
	}
	blob := header(k.id, k.name, expires, plain)
	nonce := make([]byte, 12)
	rand.Read(nonce)
	aad := blob
	blob = append(blob, nonce...)
	blob = k.aead.Seal(blob, nonce, plain, aad)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	tmp := fmt.Sprintf("%s.%x.tmp", path, nonce[:4])
	if err := os.WriteFile(tmp, blob, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("capture: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("capture: %w", err)
	}
	return nil
}

func header(keyID, name string, expires uint64, plain []byte) []byte {
	b := make([]byte, 0, 128+len(plain)+16)
	b = append(b, blobMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(keyID)))
	b = append(b, keyID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint64(b, expires)
	sum := sha256.Sum256(plain)
	return append(b, sum[:]...)
}

// blobHeader is a parsed blob header.
type blobHeader struct {
	keyID, name string
	expires     uint64
	digest      [32]byte
	aadLen      int
}

func parseHeader(b []byte) (*blobHeader, error) {
	if !bytes.HasPrefix(b, []byte(blobMagic)) {
		return nil, fmt.Errorf("%w: not a %q blob", ErrCorrupt, strings.TrimSpace(blobMagic))
	}
	p := len(blobMagic)
	str := func() (string, bool) {
		if len(b) < p+2 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(b[p:]))
		if len(b) < p+2+n {
			return "", false
		}
		s := string(b[p+2 : p+2+n])
		p += 2 + n
		return s, true
	}
	h := &blobHeader{}
	var ok1, ok2 bool
	h.keyID, ok1 = str()
	h.name, ok2 = str()
	if !ok1 || !ok2 || len(b) < p+8+32+12+16 {
		return nil, fmt.Errorf("%w: truncated header", ErrCorrupt)
	}
	h.expires = binary.BigEndian.Uint64(b[p:])
	copy(h.digest[:], b[p+8:])
	h.aadLen = p + 8 + 32
	return h, nil
}

// Get returns the inputs stored under inputDigest, decrypted, after
// checking that their canonical encoding hashes to inputDigest. It fails
// with ErrNotFound when nothing was captured, ErrShredded when the inputs
// were erased, ErrCorrupt when a blob does not decrypt or match.
func (s *Store) Get(inputDigest string) (map[string]*tensor.Tensor, error) {
	h, err := parseDigest(inputDigest)
	if err != nil {
		return nil, err
	}
	paths, _ := filepath.Glob(filepath.Join(s.dir, "blobs", h[:2], h+".*"))
	s.mu.Lock()
	err = s.reload(false)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, p := range paths {
		if strings.HasSuffix(p, ".tmp") {
			continue
		}
		ts, err := s.open(p, inputDigest)
		if err == nil {
			return ts, nil
		}
		if firstErr == nil || errors.Is(firstErr, ErrShredded) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	// Shred deletes the blobs of a destroyed key, so an erased input is
	// "not found" here; the key file says which names were shredded.
	return nil, fmt.Errorf("%w for %s", ErrNotFound, inputDigest)
}

func (s *Store) open(path, inputDigest string) (map[string]*tensor.Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	hd, err := parseHeader(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	s.mu.Lock()
	k := s.byID(hd.keyID)
	s.mu.Unlock()
	switch {
	case k == nil:
		return nil, fmt.Errorf("%w: key %s of %s is not in the key file (%s)", ErrShredded, hd.keyID, hd.name, path)
	case !k.shredded.IsZero():
		return nil, fmt.Errorf("%w: key %s of %s shredded at %s", ErrShredded, k.id, k.name, k.shredded.Format(time.RFC3339))
	}
	plain, err := k.aead.Open(nil, b[hd.aadLen:hd.aadLen+12], b[hd.aadLen+12:], b[:hd.aadLen])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	if got := audit.DigestOf(plain); got != inputDigest {
		return nil, fmt.Errorf("%w: %s holds inputs with digest %s, want %s", ErrCorrupt, path, got, inputDigest)
	}
	ts, err := audit.DecodeTensors(plain)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	return ts, nil
}

// Shred destroys every key of name (crypto-shredding) and deletes the
// blobs they encrypted. It returns how many keys were destroyed; zero
// with ErrNotFound when name has none.
func (s *Store) Shred(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	err := s.withKeyLock(func() ([]*key, error) {
		keys := make([]*key, len(s.keys))
		for i, k := range s.keys {
			c := *k
			if c.name == name && c.shredded.IsZero() {
				c.shredded, c.raw, c.aead = s.opts.Now().UTC().Truncate(time.Second), nil, nil
				ids = append(ids, c.id)
			}
			keys[i] = &c
		}
		if len(ids) == 0 {
			return nil, nil
		}
		return keys, nil
	})
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, fmt.Errorf("%w: no live key for %q", ErrNotFound, name)
	}
	var errs []error
	for _, id := range ids {
		paths, _ := filepath.Glob(filepath.Join(s.dir, "blobs", "*", "*."+id))
		for _, p := range paths {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return len(ids), fmt.Errorf("capture: keys destroyed, but some blobs remain (unreadable): %w", errors.Join(errs...))
	}
	return len(ids), nil
}

// Purge deletes blobs whose retention has expired, and blobs whose key was
// shredded, and returns how many it deleted.
func (s *Store) Purge() (int, error) {
	s.mu.Lock()
	err := s.reload(false)
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	now := uint64(s.opts.Now().Unix())
	n := 0
	var errs []error
	err = filepath.WalkDir(filepath.Join(s.dir, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		head := make([]byte, 4096)
		k, _ := f.Read(head)
		f.Close()
		hd, err := parseHeader(append(head[:k], make([]byte, 28)...))
		if err != nil {
			return nil // not ours, or damaged: leave it for a human
		}
		s.mu.Lock()
		key := s.byID(hd.keyID)
		s.mu.Unlock()
		if (hd.expires != 0 && hd.expires <= now) || (key != nil && !key.shredded.IsZero()) {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			} else {
				n++
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("capture: purge: %w", errors.Join(errs...))
	}
	return n, nil
}

// Keys lists the store's keys: name, id, created, and when shredded.
func (s *Store) Keys() ([]KeyInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reload(false); err != nil {
		return nil, err
	}
	out := make([]KeyInfo, len(s.keys))
	for i, k := range s.keys {
		out[i] = KeyInfo{ID: k.id, Name: k.name, Created: k.created, Shredded: k.shredded}
	}
	return out, nil
}

// KeyInfo describes one key, without its secret.
type KeyInfo struct {
	ID, Name string
	Created  time.Time
	Shredded time.Time // zero while live
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ParseRetain parses a retention period: a Go duration ("36h") or a whole
// number of days ("30d") or years of 365 days ("7y"); "" and "0" mean
// forever.
func ParseRetain(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'y': 365 * 24 * time.Hour}[s[len(s)-1]]
	if unit != 0 {
		var n int64
		if _, err := fmt.Sscanf(s[:len(s)-1], "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != s[:len(s)-1] || n > 200*365 {
			return 0, fmt.Errorf("capture: retention %q: want a number of days (30d) or years (7y), or a duration", s)
		}
		return time.Duration(n) * unit, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("capture: retention %q: want a number of days (30d) or years (7y), or a duration", s)
	}
	return d, nil
}
