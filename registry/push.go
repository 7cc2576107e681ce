package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vouchml/vouch/bundle"
)

// PushOptions configure Push.
type PushOptions struct {
	// Principal is who pushes, for the index. Required.
	Principal string
	// Ref, when set, is the NAME@VERSION the caller expects; the push is
	// refused if the bundle's signed metadata says otherwise.
	Ref string
}

// PushFile pushes the bundle file at path; see Push.
func (r *Registry) PushFile(ctx context.Context, path string, opts PushOptions) (*Version, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	v, err := r.Push(ctx, f, opts)
	if err != nil {
		return nil, fmt.Errorf("%w (pushing %s)", err, path)
	}
	return v, nil
}

// Push stores the bundle read from src as the version its signed metadata
// names. The bundle must verify against the registry's trusted keys. A
// version that exists is refused with ErrVersionExists, even when the
// bundle is the same. On any error nothing is stored.
func (r *Registry) Push(ctx context.Context, src io.Reader, opts PushOptions) (v *Version, err error) {
	if opts.Principal == "" {
		return nil, errors.New("registry: Push: no principal")
	}
	tmp, err := os.CreateTemp(r.tmpDir(), "push-*")
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	}()
	h := sha256.New()
	lim := r.limits.MaxTotalSize
	if lim <= 0 {
		lim = bundle.DefaultMaxTotalSize
	}
	lim += 1 << 20 // headers and padding
	size, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(src, lim+1))
	if err != nil {
		return nil, fmt.Errorf("registry: receiving bundle: %w", err)
	}
	if size > lim {
		return nil, fmt.Errorf("registry: bundle larger than %d bytes", lim)
	}
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	b, err := bundle.Read(tmp, r.limits)
	if err != nil {
		return nil, fmt.Errorf("registry: refusing bundle %s: %w", digest, err)
	}
	prov, err := bundle.Verify(b, r.trusted)
	if err != nil {
		return nil, fmt.Errorf("registry: refusing bundle %s: %w", digest, err)
	}
	m := b.Metadata()
	ref := Ref{Name: m.Model.Name, Tag: m.Model.Version}
	if !nameRE.MatchString(ref.Name) || !versionRE.MatchString(ref.Tag) {
		return nil, fmt.Errorf("%w: the bundle's metadata names %s, which is not NAME@VERSION (a version starts with a digit)", ErrInvalidRef, ref)
	}
	if opts.Ref != "" && opts.Ref != ref.String() {
		return nil, fmt.Errorf("%w: expected %s, but the bundle's signed metadata says %s", ErrInvalidRef, opts.Ref, ref)
	}
	if err := os.Chmod(tmp.Name(), 0o444); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}

	tx, err := r.db.BeginTx(ctx, nil) // immediate: holds the write lock
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer tx.Rollback()
	if old, err := r.version(ctx, tx, ref.Name, ref.Tag); err == nil {
		same := ""
		if old.Digest == digest {
			same = "the same bundle; "
		}
		return nil, fmt.Errorf("%w: %s is already %s, pushed by %s at %s (%sversions are immutable: push a new version)",
			ErrVersionExists, ref, old.Digest, old.PushedBy, old.PushedAt.Format("2006-01-02T15:04:05Z07:00"), same)
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	now := r.timestamp()
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO blobs(digest, size, created_at) VALUES (?, ?, ?)`, digest, size, now); err != nil {
		return nil, fmt.Errorf("registry: recording %s: %w", digest, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO versions(name, version, digest, plan_digest, source_digest, signed_by, pushed_by, pushed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, ref.Name, ref.Tag, digest, m.Plan.Digest, m.Source.Digest,
		strings.Join(prov.SignedBy, ","), opts.Principal, now); err != nil {
		return nil, fmt.Errorf("registry: recording %s: %w", ref, err)
	}
	path := r.blobPath(digest)
	created := false
	// A blob already there is reused, unless it was damaged on disk.
	if d, err := fileDigest(path); err != nil || d != digest {
		if err := tmp.Close(); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return nil, fmt.Errorf("registry: storing %s: %w", digest, err)
		}
		created = true
		syncDir(r.blobDir())
	}
	if err := tx.Commit(); err != nil {
		if created {
			os.Remove(path)
		}
		return nil, fmt.Errorf("registry: recording %s: %w", ref, err)
	}
	return r.version(ctx, r.db, ref.Name, ref.Tag)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
