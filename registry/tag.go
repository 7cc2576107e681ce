package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// AliasEvent is one move of an alias.
type AliasEvent struct {
	Name     string
	Alias    string
	Version  string // the version the alias names from then on
	Previous string // the version it named before; empty when new
	SetBy    string
	SetAt    time.Time
}

// Tag points NAME@alias at the version ref names (ref may itself be an
// alias: Tag(ctx, "m@staging", "prod", who) promotes staging), and records
// the move in the alias's history. Tagging an alias with the version it
// already names changes nothing and returns a nil event.
func (r *Registry) Tag(ctx context.Context, ref, alias, principal string) (*AliasEvent, error) {
	if principal == "" {
		return nil, errors.New("registry: Tag: no principal")
	}
	if !aliasRE.MatchString(alias) || versionRE.MatchString(alias) {
		return nil, fmt.Errorf("%w: alias %q must start with a letter and must not look like a version (%s)", ErrInvalidRef, alias, aliasRE)
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer tx.Rollback()
	v, err := r.resolve(ctx, tx, ref)
	if err != nil {
		return nil, err
	}
	var prev string
	err = tx.QueryRowContext(ctx, `SELECT version FROM aliases WHERE name = ? AND alias = ?`, v.Name, alias).Scan(&prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("registry: reading %s@%s: %w", v.Name, alias, err)
	}
	if prev == v.Version {
		return nil, nil
	}
	now := r.timestamp()
	if _, err := tx.ExecContext(ctx, `INSERT INTO aliases(name, alias, version, set_by, set_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(name, alias) DO UPDATE SET version = excluded.version, set_by = excluded.set_by, set_at = excluded.set_at`,
		v.Name, alias, v.Version, principal, now); err != nil {
		return nil, fmt.Errorf("registry: tagging %s@%s: %w", v.Name, alias, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO alias_history(name, alias, version, previous, set_by, set_at) VALUES (?, ?, ?, ?, ?, ?)`,
		v.Name, alias, v.Version, prev, principal, now); err != nil {
		return nil, fmt.Errorf("registry: tagging %s@%s: %w", v.Name, alias, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("registry: tagging %s@%s: %w", v.Name, alias, err)
	}
	return &AliasEvent{Name: v.Name, Alias: alias, Version: v.Version, Previous: prev, SetBy: principal, SetAt: parseTime(now)}, nil
}

// AliasHistory returns every move of NAME@alias, oldest first; with an
// empty alias, the moves of all the model's aliases.
func (r *Registry) AliasHistory(ctx context.Context, name, alias string) ([]AliasEvent, error) {
	q := `SELECT name, alias, version, previous, set_by, set_at FROM alias_history WHERE name = ?`
	args := []any{name}
	if alias != "" {
		q += ` AND alias = ?`
		args = append(args, alias)
	}
	rows, err := r.db.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("registry: reading alias history of %s: %w", name, err)
	}
	defer rows.Close()
	var out []AliasEvent
	for rows.Next() {
		var e AliasEvent
		var at string
		if err := rows.Scan(&e.Name, &e.Alias, &e.Version, &e.Previous, &e.SetBy, &at); err != nil {
			return nil, fmt.Errorf("registry: reading alias history of %s: %w", name, err)
		}
		e.SetAt = parseTime(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
