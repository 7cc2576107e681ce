package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vouchml/vouch/bundle"
)

// Loaded is a verified bundle read from the registry.
type Loaded struct {
	Version    *Version
	Bundle     *bundle.Bundle
	Provenance *bundle.Provenance
}

// Load resolves ref, reads its bundle, checks it against its digest and
// verifies it against the trusted keys, and records the read for principal.
// It does not run bundle.Check: the engine that will run the plan does.
func (r *Registry) Load(ctx context.Context, ref, principal string) (*Loaded, error) {
	l, _, err := r.read(ctx, "load", ref, principal)
	return l, err
}

// Show is Load for people: it returns the version, its aliases and the
// verified provenance. It is recorded as a read.
func (r *Registry) Show(ctx context.Context, ref, principal string) (*Loaded, error) {
	l, _, err := r.read(ctx, "show", ref, principal)
	return l, err
}

// Pull verifies the bundle ref names, as Load does, and writes its exact
// bytes to dst atomically (a temporary file beside dst, then a rename).
func (r *Registry) Pull(ctx context.Context, ref, dst, principal string) (*Version, error) {
	l, data, err := r.read(ctx, "pull", ref, principal)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(dst, data); err != nil {
		return nil, err
	}
	return l.Version, nil
}

// read resolves, reads and verifies a bundle, and records the access.
func (r *Registry) read(ctx context.Context, action, ref, principal string) (l *Loaded, data []byte, err error) {
	if principal == "" {
		return nil, nil, fmt.Errorf("registry: %s %s: no principal", action, ref)
	}
	var v *Version
	defer func() {
		name, version, digest := "", "", ""
		if v != nil {
			name, version, digest = v.Name, v.Version, v.Digest
		} else if rf, perr := ParseRef(ref); perr == nil {
			name = rf.Name
		}
		outcome := "ok"
		if err != nil {
			outcome = err.Error()
		}
		if aerr := r.recordAccess(ctx, principal, action, ref, name, version, digest, outcome); aerr != nil && err == nil {
			// A read that cannot be recorded is not served.
			l, data, err = nil, nil, aerr
		}
	}()
	v, err = r.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	path := r.blobPath(v.Digest)
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s (%s): %v", ErrIntegrity, v.Ref(), v.Digest, err)
	}
	if got := sha256Digest(data); got != v.Digest {
		return nil, nil, fmt.Errorf("%w: %s is stored as %s but %s has digest %s", ErrIntegrity, v.Ref(), v.Digest, path, got)
	}
	b, err := bundle.Read(bytes.NewReader(data), r.limits)
	if err != nil {
		return nil, nil, fmt.Errorf("registry: %s: %w", v.Ref(), err)
	}
	prov, err := bundle.Verify(b, r.trusted)
	if err != nil {
		return nil, nil, fmt.Errorf("registry: %s: %w", v.Ref(), err)
	}
	return &Loaded{Version: v, Bundle: b, Provenance: prov}, data, nil
}

func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func writeAtomic(dst string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return fmt.Errorf("registry: writing %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("registry: writing %s: %w", dst, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("registry: writing %s: %w", dst, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("registry: writing %s: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("registry: writing %s: %w", dst, err)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("registry: writing %s: %w", dst, err)
	}
	return nil
}

// List returns the versions of the named model, or of every model when
// name is empty, ordered by name and push time. Listing reads only the
// index and is not recorded as a read.
func (r *Registry) List(ctx context.Context, name string) ([]*Version, error) {
	q := `SELECT name, version FROM versions`
	var args []any
	if name != "" {
		q += ` WHERE name = ?`
		args = append(args, name)
	}
	q += ` ORDER BY name, pushed_at, version`
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("registry: listing: %w", err)
	}
	var refs []Ref
	for rows.Next() {
		var rf Ref
		if err := rows.Scan(&rf.Name, &rf.Tag); err != nil {
			rows.Close()
			return nil, fmt.Errorf("registry: listing: %w", err)
		}
		refs = append(refs, rf)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("registry: listing: %w", err)
	}
	out := make([]*Version, 0, len(refs))
	for _, rf := range refs {
		v, err := r.version(ctx, r.db, rf.Name, rf.Tag)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Access is one recorded read.
type Access struct {
	At        time.Time
	Principal string
	Action    string // "load", "pull", "show"
	Ref       string // as asked
	Name      string
	Version   string // resolved; empty if it did not resolve
	Digest    string
	Outcome   string // "ok" or the error
}

// Accesses returns the recorded reads of the named model (all models when
// name is empty), oldest first.
func (r *Registry) Accesses(ctx context.Context, name string) ([]Access, error) {
	q := `SELECT at, principal, action, ref, name, version, digest, outcome FROM access`
	var args []any
	if name != "" {
		q += ` WHERE name = ?`
		args = append(args, name)
	}
	rows, err := r.db.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("registry: reading access log: %w", err)
	}
	defer rows.Close()
	var out []Access
	for rows.Next() {
		var a Access
		var at string
		if err := rows.Scan(&at, &a.Principal, &a.Action, &a.Ref, &a.Name, &a.Version, &a.Digest, &a.Outcome); err != nil {
			return nil, fmt.Errorf("registry: reading access log: %w", err)
		}
		a.At = parseTime(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

func (r *Registry) recordAccess(ctx context.Context, principal, action, ref, name, version, digest, outcome string) error {
	// Record even if the caller's context was cancelled mid-read.
	ctx = context.WithoutCancel(ctx)
	_, err := r.db.ExecContext(ctx, `INSERT INTO access(at, principal, action, ref, name, version, digest, outcome)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.timestamp(), principal, action, ref, name, version, digest, outcome)
	if err != nil {
		return fmt.Errorf("registry: recording access to %s: %w", ref, err)
	}
	return nil
}
