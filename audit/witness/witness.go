// Package witness is a client of C2SP tlog-witness witnesses: services
// that check that each new checkpoint of a log is consistent with every
// one they saw before, and cosign it (C2SP tlog-cosignature). A log whose
// checkpoints carry a quorum of cosignatures cannot show one history to
// some and another to others, nor rewrite its history and sign it again
// with its own key, without the witnesses refusing.
//
// A witness is named by its verifier key, a C2SP signed-note vkey of type
// 0x04 (Ed25519 cosignature/v1):
//
//	<name>+<key id, 8 hex digits>+<base64(0x04 || 32-byte Ed25519 public key)>
//
// whose key id is SHA-256(name || "\n" || 0x04 || public key)[:4]. A
// cosignature is a note signature line by that name over the checkpoint;
// its bytes are an 8-byte big-endian POSIX timestamp and an Ed25519
// signature of
//
//	cosignature/v1\n
//	time <timestamp>\n
//	<the checkpoint's text>
//
// [NewVerifier] checks them. [Client.AddCheckpoint] is the protocol's one
// call; [Cosigner] keeps each witness's view of the log and gathers
// cosignatures for a new checkpoint; [CheckQuorum] is what a verifier
// requires.
package witness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const algCosignatureV1 = 0x04

// cosigVerifier verifies Ed25519 cosignature/v1 signatures.
type cosigVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	vkey string
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.hash }

func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > 1<<63-1 {
		return false
	}
	m := make([]byte, 0, 40+len(msg))
	m = append(m, "cosignature/v1\ntime "...)
	m = strconv.AppendUint(m, t, 10)
	m = append(m, '\n')
	m = append(m, msg...)
	return ed25519.Verify(v.pub, m, sig[8:])
}

func keyID(name string, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{algCosignatureV1})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// NewVerifier returns the note verifier of a witness's cosignature/v1
// verifier key.
func NewVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	parts := strings.SplitN(vkey, "+", 3) // base64 may hold '+'

	if len(parts) != 3 || parts[0] == "" {
		return nil, fmt.Errorf("witness: key %q: want name+id+key", vkey)
	}
	id, err := hex.DecodeString(parts[1])
	raw, err2 := base64.StdEncoding.DecodeString(parts[2])
	switch {
	case err != nil || len(id) != 4:
		return nil, fmt.Errorf("witness: key %q: bad key id", vkey)
	case err2 != nil || len(raw) != 1+ed25519.PublicKeySize:
		return nil, fmt.Errorf("witness: key %q: bad public key", vkey)
	case raw[0] != algCosignatureV1:
		return nil, fmt.Errorf("witness: key %q: type 0x%02x, want 0x04 (Ed25519 cosignature/v1)", vkey, raw[0])
	}
	v := &cosigVerifier{name: parts[0], pub: ed25519.PublicKey(raw[1:]), vkey: vkey}
	v.hash = keyID(v.name, v.pub)
	if v.hash != binary.BigEndian.Uint32(id) {
		return nil, fmt.Errorf("witness: key %q: key id %s does not match the key (%08x)", vkey, parts[1], v.hash)
	}
	return v, nil
}

// A Witness is one witness: where to submit, and its key.
type Witness struct {
	URL      string // the submission prefix; add-checkpoint is below it
	Key      string // its verifier key
	Verifier note.Verifier
}

// Parse reads a witness given as URL=VERIFIERKEY.
func Parse(spec string) (Witness, error) {
	u, k, ok := strings.Cut(spec, "=")
	if !ok {
		return Witness{}, fmt.Errorf("witness: %q: want URL=VERIFIERKEY", spec)
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return Witness{}, fmt.Errorf("witness: %q: want an http(s) URL before '='", spec)
	}
	v, err := NewVerifier(k)
	if err != nil {
		return Witness{}, err
	}
	return Witness{URL: strings.TrimSuffix(u, "/"), Key: strings.TrimSpace(k), Verifier: v}, nil
}

// A ConflictError is a witness's answer that it knows the log at another
// size than the request said (409 with a size), or that it saw another
// tree of the same size: a different history.
type ConflictError struct {
	Witness string
	Known   uint64 // the size the witness holds; 0 with Fork
	Fork    bool   // same size, another root: the witness saw a different history
}

func (e *ConflictError) Error() string {
	if e.Fork {
		return fmt.Sprintf("witness: %s holds a checkpoint of the same size with another root hash: it saw a DIFFERENT HISTORY of this log", e.Witness)
	}
	return fmt.Sprintf("witness: %s knows the log at size %d", e.Witness, e.Known)
}

// ErrRefused is returned (wrapped, with the witness's words) when a witness
// will not cosign: unknown log (404), bad signature (403), bad consistency
// proof (422: the log is not an extension of what the witness saw).
var ErrRefused = errors.New("witness: checkpoint refused")

// A Client talks to witnesses over HTTP. The zero value uses
// http.DefaultClient.
type Client struct {
	HTTP *http.Client
}

// maxResponse bounds a witness's answer: a few signature lines.
const maxResponse = 64 << 10

// AddCheckpoint submits checkpoint cp with a consistency proof from
// oldSize and returns the witness's cosignature lines, each checked with
// the witness's key.
func (c *Client) AddCheckpoint(ctx context.Context, w Witness, oldSize uint64, proof tlog.TreeProof, cp []byte) ([]byte, error) {
	if len(proof) > 63 {
		return nil, fmt.Errorf("witness: consistency proof of %d hashes (at most 63)", len(proof))
	}
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", oldSize)
	for _, h := range proof {
		body.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	body.WriteString("\n")
	body.Write(cp)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+"/add-checkpoint", &body)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness: %s: %w", w.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("witness: %s: %w", w.URL, err)
	}
	switch {
	case resp.StatusCode == http.StatusConflict && resp.Header.Get("Content-Type") == "text/x.tlog.size":
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("witness: %s: 409 with size %q", w.URL, b)
		}
		return nil, &ConflictError{Witness: w.URL, Known: n}
	case resp.StatusCode == http.StatusConflict:
		return nil, &ConflictError{Witness: w.URL, Fork: true}
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w by %s: %s: %s", ErrRefused, w.URL, resp.Status, strings.TrimSpace(string(b)))
	}
	// The answer is signature lines; check them as the spec says: after
	// the checkpoint, with the witness's key only.
	n, err := note.Open(append(append([]byte(nil), cp...), b...), note.VerifierList(w.Verifier))
	if err != nil {
		return nil, fmt.Errorf("witness: %s: its cosignature does not verify: %w", w.URL, err)
	}
	var out []byte
	for _, s := range n.Sigs {
		line, err := sigLine(s)
		if err != nil {
			return nil, err
		}
		out = append(out, line...)
	}
	return out, nil
}

func sigLine(s note.Signature) ([]byte, error) {
	return []byte("— " + s.Name + " " + s.Base64 + "\n"), nil
}

// A Prover returns the consistency proof of the log's tree from size old
// to the size of the checkpoint being cosigned.
type Prover func(old uint64) (tlog.TreeProof, error)

// A Cosigner gathers cosignatures from a set of witnesses, remembering the
// size each one last cosigned so that it sends the right proof. It is safe
// for concurrent use.
type Cosigner struct {
	Client    Client
	Witnesses []Witness

	mu    sync.Mutex
	known map[string]uint64
}

// Cosign submits cp (a signed checkpoint) to every witness at once and
// returns cp with the cosignatures gathered, and the error of each witness
// that did not cosign (nil entries for those that did).
func (c *Cosigner) Cosign(ctx context.Context, cp []byte, size uint64, prove Prover) ([]byte, []error) {
	errs := make([]error, len(c.Witnesses))
	sigs := make([][]byte, len(c.Witnesses))
	var wg sync.WaitGroup
	for i, w := range c.Witnesses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sigs[i], errs[i] = c.one(ctx, w, cp, size, prove)
		}()
	}
	wg.Wait()
	out := append([]byte(nil), cp...)
	for _, s := range sigs {
		out = append(out, s...)
	}
	return out, errs
}

func (c *Cosigner) one(ctx context.Context, w Witness, cp []byte, size uint64, prove Prover) ([]byte, error) {
	c.mu.Lock()
	if c.known == nil {
		c.known = map[string]uint64{}
	}
	old := c.known[w.URL]
	c.mu.Unlock()
	for try := 0; ; try++ {
		if old > size {
			return nil, fmt.Errorf("witness: %s has cosigned %d entries, more than this checkpoint's %d: it saw a DIFFERENT HISTORY of this log (or the log lost entries)", w.URL, old, size)
		}
		var proof tlog.TreeProof
		if old > 0 && old < size {
			p, err := prove(old)
			if err != nil {
				return nil, fmt.Errorf("witness: proof from %d to %d: %w", old, size, err)
			}
			proof = p
		}
		sig, err := c.Client.AddCheckpoint(ctx, w, old, proof, cp)
		var ce *ConflictError
		if errors.As(err, &ce) && !ce.Fork && try == 0 {
			old = ce.Known
			continue
		}
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.known[w.URL] = size
		c.mu.Unlock()
		return sig, nil
	}
}

// CheckQuorum checks that the signed note cp carries valid cosignatures by
// at least quorum of the witnesses whose verifier keys are given (every
// one when quorum is 0), and returns the names of those that cosigned. A
// cosignature that does not verify is an error, not merely absent.
func CheckQuorum(cp []byte, witnessKeys []string, quorum int) ([]string, error) {
	if quorum <= 0 {
		quorum = len(witnessKeys)
	}
	if quorum > len(witnessKeys) {
		return nil, fmt.Errorf("witness: quorum %d of %d witnesses", quorum, len(witnessKeys))
	}
	var names []string
	for _, k := range witnessKeys {
		v, err := NewVerifier(k)
		if err != nil {
			return nil, err
		}
		if !hasSig(cp, v) {
			continue
		}
		n, err := note.Open(cp, note.VerifierList(v))
		if err != nil {
			return names, fmt.Errorf("witness: the cosignature of %s does not verify: %w", v.Name(), err)
		}
		if len(n.Sigs) > 0 {
			names = append(names, v.Name())
		}
	}
	if len(names) < quorum {
		return names, fmt.Errorf("witness: the checkpoint carries %d of the %d witness cosignatures required (%s)", len(names), quorum, strings.Join(names, ", "))
	}
	return names, nil
}

// hasSig reports whether cp has a signature line with v's name and key id.
func hasSig(cp []byte, v note.Verifier) bool {
	sc := bufio.NewScanner(bytes.NewReader(cp))
	for sc.Scan() {
		name, sig, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "— "), " ")
		if !ok || name != v.Name() {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && len(b) >= 4 && binary.BigEndian.Uint32(b) == v.KeyHash() {
			return true
		}
	}
	return false
}
