package bundle

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// algEd25519 is the signed-note algorithm byte for Ed25519 keys.
const algEd25519 = 1

// PublicKey is a trusted Ed25519 key, written as a signed-note verifier key
// "NAME+HASH+BASE64" (golang.org/x/mod/sumdb/note).
type PublicKey struct {
	id   string // NAME+HASH
	text string // the verifier key
	key  ed25519.PublicKey
}

// ID returns the key's ID, "NAME+HASH", which is the keyid of its DSSE
// signatures.
func (k *PublicKey) ID() string { return k.id }

// String returns the verifier key "NAME+HASH+BASE64".
func (k *PublicKey) String() string { return k.text }

// Ed25519 returns the raw public key.
func (k *PublicKey) Ed25519() ed25519.PublicKey { return k.key }

// PrivateKey is an Ed25519 signing key, written as a signed-note signer key
// "PRIVATE+KEY+NAME+HASH+BASE64".
type PrivateKey struct {
	pub  *PublicKey
	priv ed25519.PrivateKey
}

// ID returns the key's ID, "NAME+HASH".
func (k *PrivateKey) ID() string { return k.pub.id }

// Public returns the matching public key.
func (k *PrivateKey) Public() *PublicKey { return k.pub }

// ParsePublicKey parses a signed-note verifier key.
func ParsePublicKey(s string) (*PublicKey, error) {
	s = strings.TrimSpace(s)
	v, err := note.NewVerifier(s)
	if err != nil {
		return nil, fmt.Errorf("bundle: public key %.40q: %w", s, err)
	}
	// The name has no "+", the hash is hex; the base64 part may hold "+".
	parts := strings.SplitN(s, "+", 3)
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != algEd25519 {
		return nil, fmt.Errorf("bundle: public key %.40q is not an Ed25519 key", s)
	}
	return &PublicKey{
		id:   fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash()),
		text: s,
		key:  ed25519.PublicKey(raw[1:]),
	}, nil
}

// ParsePrivateKey parses a signed-note signer key.
func ParsePrivateKey(s string) (*PrivateKey, error) {
	s = strings.TrimSpace(s)
	sg, err := note.NewSigner(s)
	if err != nil {
		// The error never echoes the key: it is a secret.
		return nil, fmt.Errorf("bundle: private key: %w", err)
	}
	parts := strings.SplitN(s, "+", 5)
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != algEd25519 {
		return nil, fmt.Errorf("bundle: private key %s is not an Ed25519 key", sg.Name())
	}
	priv := ed25519.NewKeyFromSeed(raw[1:])
	vkey, err := note.NewEd25519VerifierKey(sg.Name(), priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("bundle: private key %s: %w", sg.Name(), err)
	}
	pub, err := ParsePublicKey(vkey)
	if err != nil {
		return nil, err
	}
	return &PrivateKey{pub: pub, priv: priv}, nil
}

// GenerateKey makes a key pair named name (a signed-note key name: no
// spaces or "+"), reading randomness from rand (crypto/rand when nil). It
// returns the signer key text and the private and public keys.
func GenerateKey(rnd io.Reader, name string) (skey string, priv *PrivateKey, err error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	skey, _, err = note.GenerateKey(rnd, name)
	if err != nil {
		return "", nil, fmt.Errorf("bundle: generating key %q: %w", name, err)
	}
	priv, err = ParsePrivateKey(skey)
	if err != nil {
		return "", nil, err
	}
	return skey, priv, nil
}

// KeygenOptions configure Keygen.
type KeygenOptions struct {
	Name           string    // key name, e.g. "vouch-ci"; required
	PrivateKeyPath string    // where the private key goes (mode 0600); required
	PublicKeyPath  string    // where the public key goes (mode 0644); optional
	Rand           io.Reader // nil means crypto/rand
	Force          bool      // overwrite existing files
}

// Keygen generates a key pair, writes the private key to
// opts.PrivateKeyPath with mode 0600 and, when set, the public key to
// opts.PublicKeyPath, and returns the public key. It refuses to overwrite a
// file unless opts.Force is set.
func Keygen(opts KeygenOptions) (*PublicKey, error) {
	if opts.Name == "" || opts.PrivateKeyPath == "" {
		return nil, errors.New("bundle: Keygen needs a key name and a private key path")
	}
	skey, priv, err := GenerateKey(opts.Rand, opts.Name)
	if err != nil {
		return nil, err
	}
	if err := writeKeyFile(opts.PrivateKeyPath, skey, 0o600, opts.Force); err != nil {
		return nil, err
	}
	if opts.PublicKeyPath != "" {
		if err := writeKeyFile(opts.PublicKeyPath, priv.pub.text, 0o644, opts.Force); err != nil {
			os.Remove(opts.PrivateKeyPath)
			return nil, err
		}
	}
	return priv.pub, nil
}

func writeKeyFile(path, text string, perm os.FileMode, force bool) error {
	if !force {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("bundle: %s already exists; not overwriting a key", path)
		}
	}
	return writeFileAtomic(path, perm, func(w io.Writer) error {
		_, err := io.WriteString(w, text+"\n")
		return err
	})
}

// ReadPrivateKey reads a private key file. It refuses a file that others
// than its owner can read.
func ReadPrivateKey(path string) (*PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("bundle: private key %s has mode %04o; it must not be readable by others (chmod 600)", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	k, err := ParsePrivateKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// ReadPublicKey returns the public key in s, or, if s is not a key, in the
// file named s.
func ReadPublicKey(s string) (*PublicKey, error) {
	if k, err := ParsePublicKey(s); err == nil {
		return k, nil
	}
	data, err := os.ReadFile(s)
	if err != nil {
		return nil, fmt.Errorf("bundle: %q is neither a public key nor a readable file: %w", s, err)
	}
	k, err := ParsePublicKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, s)
	}
	return k, nil
}
