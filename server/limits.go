package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vouchml/vouch/audit"
)

// Bounds on what a client's request can put into its audit record. The log
// takes entries of at most 64 KiB (C2SP tlog-tiles), so a record must stay
// far below that whatever the client sent: every client-supplied string is
// cut to a bound, and the per-tensor digests to a count. The input digest
// always covers every tensor sent.
const (
	maxIDBytes      = 256  // request id, model name and version, traceparent, principal, source
	maxErrorBytes   = 1024 // error messages (they echo names the client chose)
	maxTargetBytes  = 1024 // an access record's target
	maxTensorName   = 128  // a tensor's name in the per-tensor digests
	maxRecordTensor = 32   // per-tensor digests kept in one record
)

// bound returns s as it may enter an audit record: valid UTF-8 of at most
// max bytes. A string that had to change keeps its first bytes (up to max,
// cut at a character boundary, invalid bytes replaced by U+FFFD) followed by
// the marker
//
//	…[cut N bytes sha256:HEX]
//
// giving the length and SHA-256 of the original, so that whoever holds the
// original can match it to the record.
func bound(s string, max int) string {
	if len(s) <= max && utf8.ValidString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	keep := strings.ToValidUTF8(s[:min(len(s), max)], "\uFFFD")
	for len(keep) > max {
		_, n := utf8.DecodeLastRuneInString(keep)
		keep = keep[:len(keep)-n]
	}
	for len(keep) > 0 {
		if r, n := utf8.DecodeLastRuneInString(keep); r != utf8.RuneError || n != 1 {
			break
		}
		keep = keep[:len(keep)-1]
	}
	return keep + "…[cut " + strconv.Itoa(len(s)) + " bytes sha256:" + hex.EncodeToString(sum[:]) + "]"
}

// clean reports whether s would pass bound unchanged.
func clean(s string, max int) bool { return len(s) <= max && utf8.ValidString(s) }

// bounded returns a copy of rec whose every client-supplied field is within
// its bound (see [bound]); the caller's record is left as it is.
func bounded(rec *audit.Record) *audit.Record {
	r := *rec
	for _, f := range []*string{&r.RequestID, &r.TraceParent, &r.Principal, &r.SourceAddr, &r.Model, &r.ModelVersion, &r.Profile} {
		*f = bound(*f, maxIDBytes)
	}
	r.Error = bound(r.Error, maxErrorBytes)
	r.Inputs = boundDigests(r.Inputs)
	r.Outputs = boundDigests(r.Outputs)
	if r.Access != nil {
		r.Access = &audit.Access{Action: bound(r.Access.Action, 64), Target: bound(r.Access.Target, maxTargetBytes)}
	}
	return &r
}

// boundDigests keeps at most maxRecordTensor per-tensor digests, their names
// bounded, still sorted by name and distinct (a cut name carries the digest
// of the whole name, so two cut names differ when the names did).
func boundDigests(ts []audit.TensorDigest) []audit.TensorDigest {
	if len(ts) == 0 {
		return ts
	}
	n := min(len(ts), maxRecordTensor)
	out := make([]audit.TensorDigest, 0, n)
	for _, t := range ts[:n] {
		t.Name = bound(t.Name, maxTensorName)
		if len(t.Shape) > 16 {
			t.Shape = t.Shape[:16]
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b audit.TensorDigest) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b audit.TensorDigest) bool { return a.Name == b.Name })
}

// minimal is the record kept when even the bounded record is refused by
// the log as malformed or too large: who, when, which model, the outcome
// and the input digest, nothing a client can grow.
func minimal(rec *audit.Record) *audit.Record {
	return &audit.Record{
		SchemaVersion: rec.SchemaVersion, Kind: rec.Kind, TraceID: rec.TraceID, Time: rec.Time,
		Principal: bound(rec.Principal, 64), SourceAddr: bound(rec.SourceAddr, 64),
		Model: bound(rec.Model, 64), ModelVersion: bound(rec.ModelVersion, 64),
		PlanDigest: rec.PlanDigest, BundleDigest: rec.BundleDigest, InputDigest: rec.InputDigest,
		OutputDigest: rec.OutputDigest, Rows: rec.Rows, DecisionsDigest: rec.DecisionsDigest,
		Precision: rec.Precision, Status: rec.Status, Code: rec.Code,
		Error: bound(rec.Error, 128), Access: rec.Access, LatencyMicros: rec.LatencyMicros,
	}
}

// recordRefused reports whether an append failed because of the record
// itself (too large, not encodable) rather than the log.
func recordRefused(err error) bool {
	return errors.Is(err, audit.ErrTooLarge) || errors.Is(err, audit.ErrRecord)
}
