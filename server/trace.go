package server

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// traceContext is a request's W3C trace context (traceparent, version 00).
type traceContext struct {
	TraceID  string // 32 lowercase hex digits
	SpanID   string // this server's span, 16 lowercase hex digits
	Flags    string // 2 hex digits
	Incoming string // the traceparent as received, when valid
}

// newTrace continues the trace of a valid incoming traceparent header, or
// starts a new one (sampled) when it is absent or malformed. Either way the
// server's own span gets a fresh id.
func newTrace(header string) traceContext {
	tc := traceContext{SpanID: randomHex(8), Flags: "01"}
	if id, flags, ok := parseTraceparent(header); ok {
		tc.TraceID, tc.Flags, tc.Incoming = id, flags, header
		return tc
	}
	tc.TraceID = randomHex(16)
	return tc
}

// Traceparent is the header value to propagate: the trace id with this
// server's span as the parent.
func (t traceContext) Traceparent() string {
	return "00-" + t.TraceID + "-" + t.SpanID + "-" + t.Flags
}

// recorded is the traceparent an audit record keeps: as received, or as
// generated.
func (t traceContext) recorded() string {
	if t.Incoming != "" {
		return t.Incoming
	}
	return t.Traceparent()
}

// parseTraceparent checks a traceparent header (W3C Trace Context level 1):
// version-traceid-parentid-flags, lowercase hex, ids not all zero, version
// not ff; a future version may append fields after a '-'.
func parseTraceparent(h string) (traceID, flags string, ok bool) {
	h = strings.TrimSpace(h)
	// The recorded traceparent is the client's: a future version's tail
	// may not grow the audit record or carry bytes a record cannot hold.
	if len(h) > maxIDBytes || !printableASCII(h) {
		return "", "", false
	}
	if len(h) < 55 || (len(h) > 55 && (h[:2] == "00" || h[55] != '-')) {
		return "", "", false
	}
	if h[2] != '-' || h[35] != '-' || h[52] != '-' || h[:2] == "ff" {
		return "", "", false
	}
	ver, id, parent, fl := h[:2], h[3:35], h[36:52], h[53:55]
	if !isLowerHex(ver) || !isLowerHex(id) || !isLowerHex(parent) || !isLowerHex(fl) {
		return "", "", false
	}
	if strings.Trim(id, "0") == "" || strings.Trim(parent, "0") == "" {
		return "", "", false
	}
	return id, fl, true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
