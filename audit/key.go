package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// KeyFile is the name of the signer key file in a log directory that
// [LoadOrCreateKey] manages; the verifier key is beside it in log.pub.
const KeyFile = "log.key"

// LoadOrCreateKey returns the signer key kept in dir/log.key, generating it
// (mode 0600, and dir/log.pub with its verifier key) on first use for a log
// named origin. An existing key whose name is not origin is an error unless
// origin is empty: a log's origin is fixed when its key is made.
func LoadOrCreateKey(dir, origin string) (signerKey string, err error) {
	path := filepath.Join(dir, KeyFile)
	if skey, found, err := readSignerKey(path, origin); found || err != nil {
		return skey, err
	}
	if origin == "" {
		return "", fmt.Errorf("audit: %s does not exist and no origin was given to create it", path)
	}
	skey, vkey, err := GenerateKey(origin)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	// O_EXCL: two processes starting at once must not make two keys.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateKey(dir, origin)
	}
	if err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	_, werr := f.WriteString(skey + "\n")
	serr := f.Sync()
	if cerr := f.Close(); werr == nil && serr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = serr
	}
	if werr != nil {
		os.Remove(path)
		return "", fmt.Errorf("audit: write %s: %w", path, werr)
	}
	if err := os.WriteFile(filepath.Join(dir, "log.pub"), []byte(vkey+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	return skey, syncDir(dir)
}

// A Signer signs the log's checkpoints: a golang.org/x/mod/sumdb/note
// signer (its name is the log's origin) that also knows its verifier key.
// [NewSigner] makes one from a key string; a KMS or PKCS#11 signer plugs in
// by implementing the interface. Sign MUST return an Ed25519 signature of
// msg that the verifier key checks, and MUST be safe for concurrent use.
type Signer interface {
	note.Signer
	// VerifierKey returns the note verifier key of the signer.
	VerifierKey() string
}

type keySigner struct {
	note.Signer
	vkey string
}

func (s keySigner) VerifierKey() string { return s.vkey }

// NewSigner returns the Signer of an Ed25519 signer key in note encoding
// (see GenerateKey).
func NewSigner(signerKey string) (Signer, error) {
	vkey, err := PublicKey(signerKey)
	if err != nil {
		return nil, err
	}
	s, err := note.NewSigner(signerKey)
	if err != nil {
		return nil, fmt.Errorf("audit: signer key: %w", err)
	}
	return keySigner{s, vkey}, nil
}

// ErrKeyPlacement is returned (wrapped) for a signer key file kept where it
// weakens the log: inside the log's directory, or readable by others.
var ErrKeyPlacement = errors.New("audit: signer key badly placed")

// LoadKeyFile returns the signer key in the file path, creating it (mode
// 0600, its directory 0700) for a log named origin when it does not exist
// and origin is not empty. The file must not be readable or writable by
// group or others, and must not lie inside logDir: whoever can write the
// log's directory could otherwise replace the whole history and sign it
// again. An existing key whose name is not origin (when given) is an error.
func LoadKeyFile(path, origin, logDir string) (string, error) {
	if logDir != "" {
		if inside(path, logDir) {
			return "", fmt.Errorf("%w: %s is inside the log directory %s; keep the key elsewhere", ErrKeyPlacement, path, logDir)
		}
	}
	if skey, found, err := readSignerKey(path, origin); found || err != nil {
		return skey, err
	}
	if origin == "" {
		return "", fmt.Errorf("audit: signer key %s does not exist", path)
	}
	skey, _, err := GenerateKey(origin)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadKeyFile(path, origin, logDir)
	}
	if err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	_, werr := f.WriteString(skey + "\n")
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return "", fmt.Errorf("audit: write %s: %w", path, werr)
	}
	return skey, syncDir(filepath.Dir(path))
}

// inside reports whether path lies in dir (after resolving both).
func inside(path, dir string) bool {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		if r, err := filepath.EvalSymlinks(filepath.Dir(a)); err == nil {
			return filepath.Join(r, filepath.Base(a))
		}
		return a
	}
	p, d := abs(path), abs(dir)
	if r, err := filepath.EvalSymlinks(d); err == nil {
		d = r
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// readSignerKey reads an existing signer key file: found is false (and err
// nil) when there is none. The key must parse, sign for origin (when
// given: a log's origin cannot change), and be readable by its owner only.
func readSignerKey(path, origin string) (skey string, found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("audit: %w", err)
	}
	skey = strings.TrimSpace(string(b))
	if _, err := PublicKey(skey); err != nil {
		return "", true, fmt.Errorf("audit: %s: %w", path, err)
	}
	if name := strings.SplitN(skey, "+", 4)[2]; origin != "" && name != origin {
		return "", true, fmt.Errorf("audit: %s signs for origin %q, not %q (a log's origin cannot change)", path, name, origin)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", true, fmt.Errorf("audit: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", true, fmt.Errorf("%w: %s has mode %v; chmod 600 it", ErrKeyPlacement, path, st.Mode().Perm())
	}
	return skey, true, nil
}
