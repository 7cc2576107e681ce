package bundle

import (
	"errors"
	"fmt"
	"strings"
)

// Errors that callers may test for with errors.Is. Every error returned by
// this package wraps at most one of them and names the evidence.
var (
	// ErrFormat: the bytes are not a well-formed bundle (truncated, links,
	// path traversal, duplicate or oversized entries, bad JSON…).
	ErrFormat = errors.New("bundle: malformed bundle")
	// ErrUnsigned: the bundle has no provenance.json or no signature.
	ErrUnsigned = errors.New("bundle: not signed")
	// ErrUntrusted: no signature was made by a trusted key.
	ErrUntrusted = errors.New("bundle: not signed by a trusted key")
	// ErrBadSignature: a signature claims a trusted key but does not verify.
	ErrBadSignature = errors.New("bundle: invalid signature")
	// ErrTampered: a file differs from the digest the signed statement
	// gives for it, or is missing from, or not covered by, the statement.
	ErrTampered = errors.New("bundle: contents do not match the signed provenance")
	// ErrIncompatible: the bundle cannot run on this engine or machine.
	ErrIncompatible = errors.New("bundle: incompatible with this engine")
)

// formatError reports a malformed bundle; it wraps ErrFormat.
type formatError struct{ msg string }

func (e *formatError) Error() string { return "bundle: " + e.msg }
func (e *formatError) Unwrap() error { return ErrFormat }

func errFormat(format string, args ...any) error {
	return &formatError{fmt.Sprintf(format, args...)}
}

// DigestMismatchError reports a file whose digest is not the signed one.
type DigestMismatchError struct {
	Name   string // file in the bundle
	Got    string // digest of the file as found
	Signed string // digest in the signed statement
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("bundle: %s has digest %s, but the signed provenance says %s", e.Name, e.Got, e.Signed)
}

func (e *DigestMismatchError) Unwrap() error { return ErrTampered }

// UntrustedError reports an envelope none of whose signatures was made by a
// trusted key.
type UntrustedError struct {
	KeyIDs []string // the keyids the signatures name ("" when one names none)
}

func (e *UntrustedError) Error() string {
	ids := make([]string, len(e.KeyIDs))
	for i, id := range e.KeyIDs {
		if id == "" {
			id = "an unnamed key"
		}
		ids[i] = id
	}
	verb := "which is not"
	if len(ids) > 1 {
		verb = "none of which is"
	}
	return fmt.Sprintf("bundle: provenance.json is signed by %s, %s trusted", strings.Join(ids, ", "), verb)
}

func (e *UntrustedError) Unwrap() error { return ErrUntrusted }

// IncompatibleError reports a load-time requirement that this engine or
// machine does not meet.
type IncompatibleError struct {
	What   string // "plan format version", "CPU features", "vouch version"
	Bundle string // what the bundle requires
	Here   string // what this engine or machine has
	Hint   string // what the user can do, if anything
}

func (e *IncompatibleError) Error() string {
	s := fmt.Sprintf("bundle: %s differs: the bundle needs %s, this engine has %s", e.What, e.Bundle, e.Here)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *IncompatibleError) Unwrap() error { return ErrIncompatible }
