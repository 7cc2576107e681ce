package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/vouchml/vouch/bundle"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Errors callers may test for with errors.Is.
var (
	ErrNotFound      = errors.New("registry: not found")
	ErrVersionExists = errors.New("registry: version exists")
	ErrInvalidRef    = errors.New("registry: invalid reference")
	ErrIntegrity     = errors.New("registry: stored bundle does not match its digest")
)

// schemaVersion is the index schema this package writes (PRAGMA user_version).
const schemaVersion = 1

const schema = `
CREATE TABLE IF NOT EXISTS blobs (
	digest     TEXT PRIMARY KEY,
	size       INTEGER NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
	name          TEXT NOT NULL,
	version       TEXT NOT NULL,
	digest        TEXT NOT NULL REFERENCES blobs(digest),
	plan_digest   TEXT NOT NULL,
	source_digest TEXT NOT NULL,
	signed_by     TEXT NOT NULL,
	pushed_by     TEXT NOT NULL,
	pushed_at     TEXT NOT NULL,
	PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS aliases (
	name    TEXT NOT NULL,
	alias   TEXT NOT NULL,
	version TEXT NOT NULL,
	set_by  TEXT NOT NULL,
	set_at  TEXT NOT NULL,
	PRIMARY KEY (name, alias),
	FOREIGN KEY (name, version) REFERENCES versions(name, version)
);
CREATE TABLE IF NOT EXISTS alias_history (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	name     TEXT NOT NULL,
	alias    TEXT NOT NULL,
	version  TEXT NOT NULL,
	previous TEXT NOT NULL,
	set_by   TEXT NOT NULL,
	set_at   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS access (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	at        TEXT NOT NULL,
	principal TEXT NOT NULL,
	action    TEXT NOT NULL,
	ref       TEXT NOT NULL,
	name      TEXT NOT NULL,
	version   TEXT NOT NULL,
	digest    TEXT NOT NULL,
	outcome   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS access_name ON access(name, id);
`

// Options configure a Registry.
type Options struct {
	// Dir is the data directory; it is created if missing. Required.
	Dir string
	// TrustedKeys verify bundles on push and on every read. Required.
	TrustedKeys []*bundle.PublicKey
	// Limits bound the bundles accepted; the zero value means the defaults.
	Limits bundle.Limits
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

func (o *Options) valid() error {
	if o.Dir == "" {
		return errors.New("registry: Options.Dir is empty")
	}
	if len(o.TrustedKeys) == 0 {
		return errors.New("registry: Options.TrustedKeys is empty; a registry verifies every bundle")
	}
	return nil
}

// Registry is an open registry. Its methods are safe for concurrent use,
// and several processes may share one data directory.
type Registry struct {
	dir     string
	db      *sql.DB
	trusted []*bundle.PublicKey
	limits  bundle.Limits
	now     func() time.Time
}

// Open opens (creating if needed) the registry in opts.Dir.
func Open(opts Options) (*Registry, error) {
	if err := opts.valid(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, d := range []string{opts.Dir, filepath.Join(opts.Dir, "blobs", "sha256"), filepath.Join(opts.Dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
	}
	dsn := "file:" + filepath.ToSlash(filepath.Join(opts.Dir, "index.db")) + "?" + url.Values{
		"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(FULL)"},
		"_txlock": {"immediate"},
	}.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("registry: opening index: %w", err)
	}
	r := &Registry{dir: opts.Dir, db: db, trusted: opts.TrustedKeys, limits: opts.Limits, now: opts.Now}
	if err := r.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

func (r *Registry) migrate() error {
	var v int
	if err := r.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("registry: reading index schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("registry: index %s has schema version %d; this vouch knows version %d", filepath.Join(r.dir, "index.db"), v, schemaVersion)
	}
	tx, err := r.db.Begin()
	if err != nil {
		return fmt.Errorf("registry: creating index: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(schema); err != nil {
		return fmt.Errorf("registry: creating index: %w", err)
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("registry: creating index: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("registry: creating index: %w", err)
	}
	return nil
}

// Close closes the index.
func (r *Registry) Close() error { return r.db.Close() }

func (r *Registry) blobPath(digest string) string {
	return filepath.Join(r.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func (r *Registry) timestamp() string { return r.now().UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Ref is a parsed reference NAME@TAG.
type Ref struct {
	Name string
	Tag  string // a version or an alias
}

func (r Ref) String() string { return r.Name + "@" + r.Tag }

// IsVersion reports whether the tag is a version rather than an alias.
func (r Ref) IsVersion() bool { return versionRE.MatchString(r.Tag) }

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	versionRE = regexp.MustCompile(`^v?[0-9][0-9A-Za-z.+_-]{0,127}$`)
	aliasRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,63}$`)
)

// ParseRef parses NAME@TAG.
func ParseRef(s string) (Ref, error) {
	name, tag, ok := strings.Cut(s, "@")
	if !ok || tag == "" {
		return Ref{}, fmt.Errorf("%w %q: want NAME@VERSION or NAME@ALIAS", ErrInvalidRef, s)
	}
	if !nameRE.MatchString(name) {
		return Ref{}, fmt.Errorf("%w %q: model name %q must match %s", ErrInvalidRef, s, name, nameRE)
	}
	if !versionRE.MatchString(tag) && !aliasRE.MatchString(tag) {
		return Ref{}, fmt.Errorf("%w %q: %q is neither a version (2.1.0) nor an alias (prod)", ErrInvalidRef, s, tag)
	}
	return Ref{Name: name, Tag: tag}, nil
}

// Version is one immutable version in the index.
type Version struct {
	Name         string
	Version      string
	Digest       string // the bundle file's SHA-256, "sha256:…"
	Size         int64
	PlanDigest   string
	SourceDigest string
	SignedBy     []string
	PushedBy     string
	PushedAt     time.Time
	Aliases      []string // aliases that name this version now
}

// Ref returns NAME@VERSION.
func (v *Version) Ref() Ref { return Ref{v.Name, v.Version} }

func (r *Registry) version(ctx context.Context, q querier, name, version string) (*Version, error) {
	v := &Version{Name: name, Version: version}
	var signed, at string
	err := q.QueryRowContext(ctx, `SELECT v.digest, b.size, v.plan_digest, v.source_digest, v.signed_by, v.pushed_by, v.pushed_at
		FROM versions v JOIN blobs b ON b.digest = v.digest WHERE v.name = ? AND v.version = ?`, name, version).
		Scan(&v.Digest, &v.Size, &v.PlanDigest, &v.SourceDigest, &signed, &v.PushedBy, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no version %s@%s", ErrNotFound, name, version)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: reading %s@%s: %w", name, version, err)
	}
	v.SignedBy = splitList(signed)
	v.PushedAt = parseTime(at)
	rows, err := q.QueryContext(ctx, `SELECT alias FROM aliases WHERE name = ? AND version = ? ORDER BY alias`, name, version)
	if err != nil {
		return nil, fmt.Errorf("registry: reading aliases of %s@%s: %w", name, version, err)
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, fmt.Errorf("registry: reading aliases of %s@%s: %w", name, version, err)
		}
		v.Aliases = append(v.Aliases, a)
	}
	return v, rows.Err()
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Resolve returns the version a reference names.
func (r *Registry) Resolve(ctx context.Context, ref string) (*Version, error) {
	return r.resolve(ctx, r.db, ref)
}

func (r *Registry) resolve(ctx context.Context, q querier, ref string) (*Version, error) {
	rf, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if rf.IsVersion() {
		return r.version(ctx, q, rf.Name, rf.Tag)
	}
	var version string
	err = q.QueryRowContext(ctx, `SELECT version FROM aliases WHERE name = ? AND alias = ?`, rf.Name, rf.Tag).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no alias %s", ErrNotFound, rf)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: resolving %s: %w", rf, err)
	}
	return r.version(ctx, q, rf.Name, version)
}

func (r *Registry) tmpDir() string  { return filepath.Join(r.dir, "tmp") }
func (r *Registry) blobDir() string { return filepath.Join(r.dir, "blobs", "sha256") }
