package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// SchemaVersion is the version of the record schema that this package
// encodes. [Parse] also reads version 1 records (they verify and replay as
// they always did, and re-encode to their own bytes); any other
// schema_version is rejected.
//
// Version 2 adds, for an inference record: rows (the batch size),
// decisions (every row's label and confidence, and the principal reasons
// behind it, for the first [MaxDecisions] rows), decisions_digest (over
// every row's decision) and explanation (how the reasons were computed, and
// the digest of every row's full contribution vector). Version 1 recorded
// output_label and confidence of row 0 only; version 2 keeps those two
// members, as row 0's, so that indexes and queries by label read both.
const SchemaVersion = 2

// Record kinds.
const (
	KindInference = "inference" // one inference request, served or refused
	KindAccess    = "access"    // one read of audit data (show, query, export, replay)
)

// Record statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// A Record is one entry of the audit log, schema version 2 (or 1, for a
// record parsed from an entry of that version).
//
// Its wire form is the canonical JSON written by [Record.MarshalCanonical];
// that byte string is the log entry, and its RFC 6962 leaf hash
// (SHA-256 of 0x00 followed by the bytes) is the record's leaf hash.
//
// The JSON member names, in the order in which they are encoded, are
//
//	access          object  Access, only for kind "access"
//	backend         string  execution backend ("go", "amd64", "cuda-exact", "cuda-fast")
//	bundle_digest   string  "sha256:" + hex of the signed bundle
//	code            integer HTTP status code of the response
//	confidence      number  confidence of output_label, when declared
//	decisions       array   v2: [Decision]s of the first MaxDecisions rows, in row order
//	decisions_digest string v2: [DecisionsDigest] over every row's decision
//	device          string  device the plan ran on
//	error           string  error message for status "error"
//	explanation     object  v2: [Explanation], when the reasons were computed
//	input_digest    string  "sha256:" + hex, see [InputDigest]
//	inputs          array   per-tensor [TensorDigest]s, sorted by name
//	kind            string  "inference" or "access"
//	latency_us      integer request latency in microseconds
//	model           string  model name
//	model_version   string  model version
//	output_digest   string  "sha256:" + hex, see [InputDigest] (same encoding over the outputs)
//	output_label    string  label of row 0's top class, when declared
//	outputs         array   per-tensor [TensorDigest]s, sorted by name
//	plan_digest     string  "sha256:" + hex of the engine plan
//	precision       string  the plan's label, computed from its layers (and a GPU plan's placement): "fp32", "fp16", "bf16", "int8", "mixed"
//	principal       string  authenticated caller
//	profile         string  build profile
//	request_id      string  the request's "id" as sent by the client
//	rows            integer v2: rows in the request's batch (dimension 0)
//	schema_version  integer 2 (1 in records written before version 2)
//	source_addr     string  client address, "host:port"
//	status          string  "ok" or "error"
//	time            string  RFC 3339 in UTC, fractional seconds without trailing zeros
//	trace_id        string  W3C trace id, 32 lowercase hex digits
//	traceparent     string  the W3C traceparent header as received or generated
//
// Members whose value is empty (the empty string, zero, an empty array, an
// absent object) are omitted, except kind, schema_version, status, time and
// trace_id, which are always present.
type Record struct {
	// SchemaVersion is the schema the record is encoded in: 0 for the
	// current one (SchemaVersion), or an earlier version that a parsed
	// record had, so that it re-encodes to its own bytes.
	SchemaVersion int
	Kind          string    // KindInference when empty
	TraceID       string    // required
	RequestID     string    // optional
	TraceParent   string    // optional
	Time          time.Time // required; encoded in UTC
	Principal     string
	SourceAddr    string
	Model         string
	ModelVersion  string
	BundleDigest  string
	PlanDigest    string
	Precision     string
	Profile       string
	Backend       string
	Device        string
	InputDigest   string
	Inputs        []TensorDigest
	OutputDigest  string
	Outputs       []TensorDigest
	OutputLabel   string
	Confidence    *float64 // nil when the model declares none
	// Version 2: the batch size, each row's decision (the first
	// MaxDecisions rows), the digest of every row's decision, and how the
	// reasons were computed.
	Rows            int
	Decisions       []Decision
	DecisionsDigest string
	Explanation     *Explanation
	LatencyMicros   int64
	Status          string // StatusOK or StatusError; StatusOK when empty
	Code            int    // HTTP status code
	Error           string
	Access          *Access // kind "access" only
}

// Access describes one read of audit data. Its JSON members, in order, are
// action (string: "show", "query", "export", "replay"), target (string: a
// trace id or a query in the form the reader gave it).
type Access struct {
	Action string
	Target string
}

// TensorDigest names one tensor and the SHA-256 of its canonical encoding
// ([TensorDigestOf]). Its JSON members, in order, are digest (string,
// "sha256:" + hex), dtype (string, as tensor.DType.String), name (string)
// and shape (array of integers).
type TensorDigest struct {
	Name   string
	DType  string
	Shape  []int64
	Digest string
}

// Errors returned when decoding records. Each is wrapped with the detail.
var (
	ErrRecord       = errors.New("audit: invalid record")
	ErrNotCanonical = fmt.Errorf("%w: not in canonical form", ErrRecord)
)

// MarshalCanonical returns the canonical JSON encoding of r, in its schema
// version (2 unless r was parsed from a version 1 entry):
//
//   - one JSON object, members in ascending byte order of their names, no
//     insignificant whitespace, no trailing newline;
//   - strings are valid UTF-8; '"' and '\\' are escaped with a backslash,
//     the control characters U+0000–U+001F as \b \t \n \f \r or \u00xx
//     (lowercase hex), and '<', '>', '&', U+2028 and U+2029 as \u003c,
//     \u003e, \u0026, \u2028 and \u2029; everything else is written as is.
//     This is how Go's encoding/json writes strings, so the bytes pass
//     through any HTML-safe JSON encoder (json.RawMessage) unchanged;
//   - integers in decimal without sign for non-negative values, no leading
//     zeros, no exponent;
//   - the only non-integers (confidence, and in version 2 a decision's
//     confidence, a reason's contribution and value) are written as ECMAScript's
//     Number.prototype.toString writes it (shortest round-trip digits,
//     exponent form below 1e-6 and from 1e21), as RFC 8785 (JCS) does;
//     NaN and infinities are rejected. Apart from the escaping of <, >, &,
//     U+2028 and U+2029, the encoding is RFC 8785 canonical JSON;
//   - the one boolean, an explanation's estimate, is written true or
//     omitted; nested objects follow the same rules, members in byte order.
//
// MarshalCanonical fails on a record that [Record.Check] rejects.
func (r *Record) MarshalCanonical() ([]byte, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	w := &canonWriter{buf: make([]byte, 0, 512)}
	w.open('{')
	if r.Access != nil {
		w.key("access")
		w.open('{')
		w.optString("action", r.Access.Action)
		w.optString("target", r.Access.Target)
		w.close('}')
	}
	w.optString("backend", r.Backend)
	w.optString("bundle_digest", r.BundleDigest)
	if r.Code != 0 {
		w.key("code")
		w.int(int64(r.Code))
	}
	if r.Confidence != nil {
		w.key("confidence")
		w.float(*r.Confidence)
	}
	w.decisions(r.Decisions)
	w.optString("decisions_digest", r.DecisionsDigest)
	w.optString("device", r.Device)
	w.optString("error", r.Error)
	w.explanation(r.Explanation)
	w.optString("input_digest", r.InputDigest)
	w.tensors("inputs", r.Inputs)
	w.key("kind")
	w.string(r.kind())
	if r.LatencyMicros != 0 {
		w.key("latency_us")
		w.int(r.LatencyMicros)
	}
	w.optString("model", r.Model)
	w.optString("model_version", r.ModelVersion)
	w.optString("output_digest", r.OutputDigest)
	w.optString("output_label", r.OutputLabel)
	w.tensors("outputs", r.Outputs)
	w.optString("plan_digest", r.PlanDigest)
	w.optString("precision", r.Precision)
	w.optString("principal", r.Principal)
	w.optString("profile", r.Profile)
	w.optString("request_id", r.RequestID)
	if r.Rows != 0 {
		w.key("rows")
		w.int(int64(r.Rows))
	}
	w.key("schema_version")
	w.int(int64(r.version()))
	w.optString("source_addr", r.SourceAddr)
	w.key("status")
	w.string(r.status())
	w.key("time")
	w.string(formatTime(r.Time))
	w.key("trace_id")
	w.string(r.TraceID)
	w.optString("traceparent", r.TraceParent)
	w.close('}')
	if w.err != nil {
		return nil, w.err
	}
	return w.buf, nil
}

func (r *Record) kind() string {
	if r.Kind == "" {
		return KindInference
	}
	return r.Kind
}

func (r *Record) version() int {
	if r.SchemaVersion == 0 {
		return SchemaVersion
	}
	return r.SchemaVersion
}

func (r *Record) status() string {
	if r.Status == "" {
		return StatusOK
	}
	return r.Status
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Check reports whether r can be encoded: a trace id, a time, a known kind
// and status, an access object exactly for kind "access", a finite
// confidence, and inputs and outputs sorted by name without duplicates.
func (r *Record) Check() error {
	switch {
	case r.TraceID == "":
		return fmt.Errorf("%w: empty trace_id", ErrRecord)
	case r.Time.IsZero():
		return fmt.Errorf("%w: trace %s: zero time", ErrRecord, r.TraceID)
	case r.Time.UTC().Year() < 1 || r.Time.UTC().Year() > 9999:
		return fmt.Errorf("%w: trace %s: time %v out of range", ErrRecord, r.TraceID, r.Time)
	}
	switch k := r.kind(); k {
	case KindInference:
		if r.Access != nil {
			return fmt.Errorf("%w: trace %s: access object on kind %q", ErrRecord, r.TraceID, k)
		}
	case KindAccess:
		if r.Access == nil {
			return fmt.Errorf("%w: trace %s: kind %q without access object", ErrRecord, r.TraceID, k)
		}
	default:
		return fmt.Errorf("%w: trace %s: unknown kind %q", ErrRecord, r.TraceID, k)
	}
	if s := r.status(); s != StatusOK && s != StatusError {
		return fmt.Errorf("%w: trace %s: unknown status %q", ErrRecord, r.TraceID, s)
	}
	if c := r.Confidence; c != nil && (math.IsNaN(*c) || math.IsInf(*c, 0)) {
		return fmt.Errorf("%w: trace %s: confidence %v is not finite", ErrRecord, r.TraceID, *c)
	}
	for _, l := range [][]TensorDigest{r.Inputs, r.Outputs} {
		for i := 1; i < len(l); i++ {
			if l[i-1].Name >= l[i].Name {
				return fmt.Errorf("%w: trace %s: tensors %q and %q not sorted by name", ErrRecord, r.TraceID, l[i-1].Name, l[i].Name)
			}
		}
	}
	return r.checkV2()
}

// Parse decodes a record from its canonical encoding. It rejects anything
// that [Record.MarshalCanonical] would not have written byte for byte:
// unknown members, another schema_version, whitespace, other escapes or
// member order. So a record has exactly one encoding, and one leaf hash.
// Records of schema version 1 and 2 are read; a version 1 record keeps its
// SchemaVersion and re-encodes to its own bytes.
func Parse(data []byte) (*Record, error) {
	var w struct {
		Access *struct {
			Action string `json:"action"`
			Target string `json:"target"`
		} `json:"access"`
		Backend       string           `json:"backend"`
		BundleDigest  string           `json:"bundle_digest"`
		Code          int              `json:"code"`
		Confidence    *float64         `json:"confidence"`
		Decisions     []wireDecision   `json:"decisions"`
		DecisionsDig  string           `json:"decisions_digest"`
		Device        string           `json:"device"`
		Error         string           `json:"error"`
		Explanation   *wireExplanation `json:"explanation"`
		InputDigest   string           `json:"input_digest"`
		Inputs        []wireTensor     `json:"inputs"`
		Kind          string           `json:"kind"`
		LatencyMicros int64            `json:"latency_us"`
		Model         string           `json:"model"`
		ModelVersion  string           `json:"model_version"`
		OutputDigest  string           `json:"output_digest"`
		OutputLabel   string           `json:"output_label"`
		Outputs       []wireTensor     `json:"outputs"`
		PlanDigest    string           `json:"plan_digest"`
		Precision     string           `json:"precision"`
		Principal     string           `json:"principal"`
		Profile       string           `json:"profile"`
		RequestID     string           `json:"request_id"`
		Rows          int              `json:"rows"`
		SchemaVersion *int             `json:"schema_version"`
		SourceAddr    string           `json:"source_addr"`
		Status        string           `json:"status"`
		Time          string           `json:"time"`
		TraceID       string           `json:"trace_id"`
		TraceParent   string           `json:"traceparent"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecord, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the record", ErrRecord)
	}
	if w.SchemaVersion == nil {
		return nil, fmt.Errorf("%w: no schema_version", ErrRecord)
	}
	if v := *w.SchemaVersion; v != SchemaVersion && v != 1 {
		return nil, fmt.Errorf("%w: unsupported schema_version %d (want 1 or %d)", ErrRecord, v, SchemaVersion)
	}
	t, err := time.Parse(time.RFC3339Nano, w.Time)
	if err != nil {
		return nil, fmt.Errorf("%w: time: %w", ErrRecord, err)
	}
	r := &Record{
		SchemaVersion: *w.SchemaVersion,
		Kind:          w.Kind, TraceID: w.TraceID, RequestID: w.RequestID, TraceParent: w.TraceParent,
		Time: t.UTC(), Principal: w.Principal, SourceAddr: w.SourceAddr,
		Model: w.Model, ModelVersion: w.ModelVersion, BundleDigest: w.BundleDigest,
		PlanDigest: w.PlanDigest, Precision: w.Precision, Profile: w.Profile,
		Backend: w.Backend, Device: w.Device, InputDigest: w.InputDigest,
		Inputs: fromWire(w.Inputs), OutputDigest: w.OutputDigest, Outputs: fromWire(w.Outputs),
		OutputLabel: w.OutputLabel, Confidence: w.Confidence, LatencyMicros: w.LatencyMicros,
		Status: w.Status, Code: w.Code, Error: w.Error,
		Rows: w.Rows, Decisions: fromWireDecisions(w.Decisions), DecisionsDigest: w.DecisionsDig,
		Explanation: fromWireExplanation(w.Explanation),
	}
	if w.Access != nil {
		r.Access = &Access{Action: w.Access.Action, Target: w.Access.Target}
	}
	again, err := r.MarshalCanonical()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, data) {
		return nil, fmt.Errorf("%w (trace %s)", ErrNotCanonical, r.TraceID)
	}
	return r, nil
}

type wireTensor struct {
	Digest string  `json:"digest"`
	DType  string  `json:"dtype"`
	Name   string  `json:"name"`
	Shape  []int64 `json:"shape"`
}

func fromWire(w []wireTensor) []TensorDigest {
	if len(w) == 0 {
		return nil
	}
	out := make([]TensorDigest, len(w))
	for i, t := range w {
		out[i] = TensorDigest{Name: t.Name, DType: t.DType, Shape: t.Shape, Digest: t.Digest}
	}
	return out
}

// canonWriter appends canonical JSON; the first error sticks.
type canonWriter struct {
	buf   []byte
	comma bool // a member was written in the current object or array
	err   error
}

func (w *canonWriter) open(c byte) {
	w.sep()
	w.buf = append(w.buf, c)
	w.comma = false
}

func (w *canonWriter) close(c byte) {
	w.buf = append(w.buf, c)
	w.comma = true
}

func (w *canonWriter) sep() {
	if w.comma {
		w.buf = append(w.buf, ',')
	}
}

// key writes a member name and its colon; the value follows without sep.
func (w *canonWriter) key(k string) {
	w.sep()
	w.appendString(k)
	w.buf = append(w.buf, ':')
	w.comma = false
}

func (w *canonWriter) optString(k, v string) {
	if v != "" {
		w.key(k)
		w.string(v)
	}
}

func (w *canonWriter) string(s string) {
	w.sep()
	w.appendString(s)
	w.comma = true
}

func (w *canonWriter) int(v int64) {
	w.sep()
	w.buf = strconv.AppendInt(w.buf, v, 10)
	w.comma = true
}

func (w *canonWriter) float(f float64) {
	w.sep()
	w.buf = appendES6Number(w.buf, f)
	w.comma = true
}

func (w *canonWriter) tensors(k string, ts []TensorDigest) {
	if len(ts) == 0 {
		return
	}
	w.key(k)
	w.open('[')
	for _, t := range ts {
		w.open('{')
		w.optString("digest", t.Digest)
		w.optString("dtype", t.DType)
		w.key("name")
		w.string(t.Name)
		if len(t.Shape) > 0 {
			w.key("shape")
			w.open('[')
			for _, d := range t.Shape {
				w.int(d)
			}
			w.close(']')
		}
		w.close('}')
	}
	w.close(']')
}

const hexDigits = "0123456789abcdef"

func (w *canonWriter) appendString(s string) {
	if !utf8.ValidString(s) {
		if w.err == nil {
			w.err = fmt.Errorf("%w: string %q is not valid UTF-8", ErrRecord, s)
		}
		return
	}
	b := append(w.buf, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9):
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xf])
			i += 2
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	w.buf = append(b, '"')
}

// appendES6Number formats f as ECMAScript's Number.prototype.toString does
// (and so as RFC 8785 requires); f must be finite.
func appendES6Number(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0') // also for -0, as ECMAScript does
	}
	abs := math.Abs(f)
	if abs < 1e21 && abs >= 1e-6 {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'e', -1, 64)
	// Go writes e-07 and e+21; ECMAScript writes e-7 and e+21.
	if m := len(b); m-n >= 4 && b[m-4] == 'e' && b[m-2] == '0' {
		b[m-2] = b[m-1]
		b = b[:m-1]
	}
	return b
}

// sortTensorDigests sorts ts by name, as records require.
func sortTensorDigests(ts []TensorDigest) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
}
