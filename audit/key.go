package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		skey := strings.TrimSpace(string(b))
		if _, err := PublicKey(skey); err != nil {
			return "", fmt.Errorf("audit: %s: %w", path, err)
		}
		if name := strings.SplitN(skey, "+", 4)[2]; origin != "" && name != origin {
			return "", fmt.Errorf("audit: %s signs for origin %q, not %q (a log's origin cannot change; use another --data directory)", path, name, origin)
		}
		if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("audit: %s is readable by others (mode %v); chmod 600 it", path, st.Mode().Perm())
		}
		return skey, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("audit: %w", err)
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
