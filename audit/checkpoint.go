package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// ErrCheckpoint is returned (wrapped) for a checkpoint that does not parse
// or whose signature does not verify.
var ErrCheckpoint = errors.New("audit: bad checkpoint")

// A Checkpoint is a signed statement of the log's size and root hash, in the
// C2SP tlog-checkpoint format: a signed note (golang.org/x/mod/sumdb/note)
// whose text is
//
//	<origin>\n
//	<tree size, decimal>\n
//	<root hash, standard base64>\n
//	[extension lines…]
//
// signed with Ed25519 by a key whose name is the origin. The root hash is
// the RFC 6962 Merkle tree hash of the first size entries, as computed by
// golang.org/x/mod/sumdb/tlog.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   tlog.Hash
	Note   []byte // the signed note, byte for byte as published
}

// GenerateKey returns a new Ed25519 signer key and its verifier key, in
// golang.org/x/mod/sumdb/note encoding, for a log whose origin is origin
// (by convention a schema-less URL such as "example.com/vouch/audit").
// The signer key is secret; the verifier key is what auditors are given.
func GenerateKey(origin string) (signerKey, verifierKey string, err error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", "", fmt.Errorf("audit: generate key: %w", err)
	}
	return skey, vkey, nil
}

// PublicKey returns the verifier key of an Ed25519 signer key.
func PublicKey(signerKey string) (string, error) {
	// PRIVATE+KEY+<name>+<hash>+<base64(alg || seed)>
	parts := strings.SplitN(signerKey, "+", 5)
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return "", fmt.Errorf("audit: malformed signer key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return "", fmt.Errorf("audit: signer key is not an Ed25519 note key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(parts[2], pub)
	if err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	if _, err := note.NewSigner(signerKey); err != nil {
		return "", fmt.Errorf("audit: signer key: %w", err)
	}
	return vkey, nil
}

// verifiers parses verifier keys.
func verifiers(keys []string) (note.Verifiers, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("audit: no verifier key given")
	}
	vs := make([]note.Verifier, 0, len(keys))
	for _, k := range keys {
		v, err := note.NewVerifier(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("audit: verifier key %q: %w", k, err)
		}
		vs = append(vs, v)
	}
	return note.VerifierList(vs...), nil
}

// ParseCheckpoint parses a signed checkpoint and checks that at least one of
// the given verifier keys signed it, and that its origin is that key's name.
func ParseCheckpoint(msg []byte, verifierKeys ...string) (*Checkpoint, error) {
	vs, err := verifiers(verifierKeys)
	if err != nil {
		return nil, err
	}
	n, err := note.Open(msg, vs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	c, err := parseCheckpointText(n.Text)
	if err != nil {
		return nil, err
	}
	named := false
	for _, s := range n.Sigs {
		named = named || s.Name == c.Origin
	}
	if !named {
		return nil, fmt.Errorf("%w: origin %q is not the name of a key that signed it", ErrCheckpoint, c.Origin)
	}
	c.Note = bytes.Clone(msg)
	return c, nil
}

// parseCheckpointText parses the body of a checkpoint without checking any
// signature.
func parseCheckpointText(text string) (*Checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 {
		return nil, fmt.Errorf("%w: want at least 3 lines", ErrCheckpoint)
	}
	if lines[0] == "" {
		return nil, fmt.Errorf("%w: empty origin", ErrCheckpoint)
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || (len(lines[1]) > 1 && lines[1][0] == '0') {
		return nil, fmt.Errorf("%w: size %q", ErrCheckpoint, lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return nil, fmt.Errorf("%w: root hash %q", ErrCheckpoint, lines[2])
	}
	c := &Checkpoint{Origin: lines[0], Size: size}
	copy(c.Root[:], root)
	return c, nil
}

// parseUnverified parses a signed checkpoint's body only; for the log's own
// files, where the writer has just produced them.
func parseUnverified(msg []byte) (*Checkpoint, error) {
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return nil, fmt.Errorf("%w: no signatures", ErrCheckpoint)
	}
	c, err := parseCheckpointText(string(msg[:i+1]))
	if err != nil {
		return nil, err
	}
	c.Note = bytes.Clone(msg)
	return c, nil
}

// MergeSignatures returns the signed note a with the signature lines of b
// added, when both are notes of the same text (a checkpoint and the same
// checkpoint with cosignatures, say); lines already in a are not repeated.
// It fails when the texts differ: their signatures sign different things.
func MergeSignatures(a, b []byte) ([]byte, error) {
	ta, sa, err := splitNote(a)
	if err != nil {
		return nil, err
	}
	tb, sb, err := splitNote(b)
	if err != nil {
		return nil, err
	}
	if ta != tb {
		return nil, fmt.Errorf("%w: the notes' texts differ; their signatures cannot be merged", ErrCheckpoint)
	}
	out := []byte(ta + "\n")
	seen := map[string]bool{}
	for _, l := range append(sa, sb...) {
		if !seen[l] {
			seen[l] = true
			out = append(out, l+"\n"...)
		}
	}
	return out, nil
}

// splitNote splits a signed note into its text (with its final newline)
// and its signature lines.
func splitNote(msg []byte) (string, []string, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 || len(msg) == 0 || msg[len(msg)-1] != '\n' {
		return "", nil, fmt.Errorf("%w: not a signed note", ErrCheckpoint)
	}
	sigs := strings.Split(strings.TrimSuffix(string(msg[i+2:]), "\n"), "\n")
	for _, s := range sigs {
		if !strings.HasPrefix(s, "— ") {
			return "", nil, fmt.Errorf("%w: signature line %q", ErrCheckpoint, s)
		}
	}
	return string(msg[:i+1]), sigs, nil
}
