// Package registry implements vouch's local model registry: a
// content-addressed store of signed bundles under a data directory, with
// immutable versions, moving aliases whose history is kept, an SQLite
// index, and an access log of every read.
//
// # References
//
// A reference is NAME@TAG. NAME is the model name from the bundle's signed
// metadata ([A-Za-z0-9][A-Za-z0-9._-]*, at most 128 bytes). TAG is either a
// version, which starts with a digit or with "v" and a digit ("2.1.0",
// "v3"), or an alias, which starts with a letter and is not shaped like a
// version ("prod", "staging"). A version names one bundle forever: pushing a
// version that exists is refused, even with the same bundle. An alias names
// a version of the same model and moves when tagged again; every move is
// kept in its history.
//
// # Layout of the data directory, version 1
//
//	DIR/index.db                      SQLite index (schema below)
//	DIR/blobs/sha256/<64 hex digits>  bundle files, named by SHA-256, mode 0444
//	DIR/tmp/                          files being written
//
// A bundle file is written to DIR/tmp, synced, verified, then renamed into
// blobs/ inside the index transaction that records it, so a failed push
// leaves neither a blob nor a row behind. Blobs are never rewritten; two
// versions with identical bundles share one blob.
//
// # Index schema, version 1 (PRAGMA user_version = 1)
//
//	blobs(digest PRIMARY KEY, size, created_at)
//	versions(name, version, digest → blobs, plan_digest, source_digest,
//	         signed_by, pushed_by, pushed_at; PRIMARY KEY(name, version))
//	aliases(name, alias, version, set_by, set_at; PRIMARY KEY(name, alias))
//	alias_history(id, name, alias, version, previous, set_by, set_at)
//	access(id, at, principal, action, ref, name, version, digest, outcome)
//
// Times are RFC 3339 in UTC with nanoseconds. signed_by is the
// comma-separated list of trusted key IDs whose signatures verified.
//
// # Verification
//
// Push verifies a bundle against the registry's trusted keys before it is
// stored; Load, Pull and Show verify it again when it is read (its SHA-256
// against its address, then its signatures and file digests), so a blob
// altered on disk is refused. Each of those reads, refused or not, appends a
// row to the access table: who (the principal the caller names), what (the
// reference, resolved version and digest, and the action) and when, with the
// outcome ("ok", or the error).
package registry
