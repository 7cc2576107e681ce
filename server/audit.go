package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/index"
	"github.com/vouchml/vouch/tensor"
)

// AuditStore is what the audit endpoints read: the transparency log
// (*audit.Log satisfies it).
type AuditStore interface {
	// Show returns the first record with a trace id, with its index, an
	// inclusion proof and the signed checkpoint (audit.ErrNotFound when
	// there is none).
	Show(ctx context.Context, trace string) (*audit.Inclusion, error)
	// Query calls fn for each indexed entry that f selects, in log order.
	Query(ctx context.Context, f index.Filter, fn func(index.Row) error) error
	// Entry returns the canonical record at index i.
	Entry(i uint64) ([]byte, error)
	// Export writes the selected records with proofs (audit.VerifyExport).
	Export(ctx context.Context, w io.Writer, f index.Filter) (int, error)
	// Handler serves the log's checkpoint and tiles read-only.
	Handler() http.Handler
}

// Capturer keeps a request's input tensors (package audit/capture), keyed
// by their input digest, encrypted with a key of the model's.
type Capturer interface {
	Put(model, inputDigest string, inputs map[string]*tensor.Tensor) error
}

// auditRoutes mounts the audit API and the public log.
//
//	GET  /v1/audit/records/{trace}   role audit: the record with its index, inclusion proof and signed checkpoint (audit.Inclusion)
//	GET  /v1/audit/records?FILTER    role audit: JSON lines {"index":N,"record":{…}}
//	GET  /v1/audit/export?FILTER     role audit: an export file (audit.VerifyExport)
//	POST /v1/audit/access            role audit: {"action","target"}: record a read done elsewhere
//	GET  /log/checkpoint, /log/tile/…  no auth: the C2SP tlog-tiles log
//
// FILTER is model, version, principal, status, kind, label, since and
// until (RFC 3339), limit.
func (s *Server) auditRoutes(mux *http.ServeMux) {
	if s.opt.Audit == nil {
		if s.opt.PublicLog != nil {
			mux.Handle("GET /log/", s.logHandler())
		}
		return
	}
	mux.HandleFunc("GET /v1/audit/records/{trace}", s.auditShow)
	mux.HandleFunc("GET /v1/audit/records", s.auditQuery)
	mux.HandleFunc("GET /v1/audit/export", s.auditExport)
	mux.HandleFunc("POST /v1/audit/access", s.auditAccess)
	mux.Handle("GET /log/", s.logHandler())
}

// recordAccess appends the access record of a read of audit data before
// any of it is sent; it answers the error itself and returns false when
// the read must not proceed. A caller without the audit role is refused,
// and the refusal recorded too.
func (s *Server) recordAccess(w http.ResponseWriter, r *http.Request, action, target string) (uint64, [32]byte, bool) {
	st := state(r)
	a := s.authenticate(r).authorize(RoleAudit)
	st.principal = a.name()
	rec := &audit.Record{Kind: audit.KindAccess, TraceID: st.trace.TraceID, TraceParent: st.trace.recorded(),
		Time: time.Now().UTC(), Principal: a.name(), SourceAddr: r.RemoteAddr, RequestID: r.Header.Get(HeaderRequestID),
		Status: audit.StatusOK, Access: &audit.Access{Action: action, Target: target}}
	if a.code != 0 {
		rec.Status, rec.Code, rec.Error = audit.StatusError, a.code, a.msg
	}
	var idx uint64
	var leaf [32]byte
	if s.opt.Appender != nil {
		var err error
		idx, leaf, err = s.appendRecord(context.WithoutCancel(r.Context()), rec)
		if err != nil {
			if !s.auditFailed(rec, err) && a.code == 0 {
				w.Header().Set("Retry-After", "1")
				writeError(w, r, errf(503, "audit log unavailable; the read is refused so that it cannot go unrecorded"))
				return 0, leaf, false
			}
		} else {
			s.m.auditAlarm.Set(0)
			w.Header().Set(HeaderLogIndex, strconv.FormatUint(idx, 10))
			w.Header().Set(HeaderLeafHash, hex.EncodeToString(leaf[:]))
		}
	}
	if a.code != 0 {
		writeError(w, r, errf(a.code, "%s", a.msg))
		return 0, leaf, false
	}
	return idx, leaf, true
}

// auditFailed counts a failed append, raises the alarm, and reports
// whether the server fails open (serves anyway).
func (s *Server) auditFailed(rec *audit.Record, err error) bool {
	s.m.auditErrs.Inc()
	s.m.auditAlarm.Set(1)
	if s.opt.AuditFailOpen {
		s.m.auditFailures.WithLabelValues("served").Inc()
		s.alarm.Error("AUDIT ALARM: the audit log cannot take records; serving unaudited (--audit-failure=open)",
			"alarm", "audit_unavailable", "trace_id", rec.TraceID, "kind", rec.Kind, "err", err.Error())
		return true
	}
	s.m.auditFailures.WithLabelValues("refused").Inc()
	s.alarm.Error("audit append failed; request refused", "alarm", "audit_unavailable", "trace_id", rec.TraceID, "kind", rec.Kind, "err", err.Error())
	return false
}

func (s *Server) auditShow(w http.ResponseWriter, r *http.Request) {
	trace := r.PathValue("trace")
	if _, _, ok := s.recordAccess(w, r, "show", trace); !ok {
		return
	}
	inc, err := s.opt.Audit.Show(r.Context(), trace)
	if err != nil {
		writeError(w, r, auditError(err))
		return
	}
	writeJSON(w, 200, inc)
}

func auditError(err error) *apiError {
	switch {
	case errors.Is(err, audit.ErrNotFound):
		return errf(404, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errf(503, "%v", err)
	}
	return errf(500, "%v", err)
}

// ParseFilter reads an index filter from URL query parameters.
func ParseFilter(q url.Values) (index.Filter, error) {
	f := index.Filter{Model: q.Get("model"), Version: q.Get("version"), Principal: q.Get("principal"),
		Status: q.Get("status"), Kind: q.Get("kind"), Label: q.Get("label"), TraceID: q.Get("trace_id")}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, fmt.Errorf("%s: want RFC 3339 time: %w", p.name, err)
			}
			*p.t = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, fmt.Errorf("limit %q: want a non-negative integer", v)
		}
		f.Limit = n
	}
	return f, nil
}

// FilterQuery is the inverse of ParseFilter: the canonical query string of
// a filter, also the target of its access record.
func FilterQuery(f index.Filter) string {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("model", f.Model)
	set("version", f.Version)
	set("principal", f.Principal)
	set("status", f.Status)
	set("kind", f.Kind)
	set("label", f.Label)
	set("trace_id", f.TraceID)
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q.Encode()
}

// QueryLine is one line of the query endpoint's answer.
type QueryLine struct {
	Index  uint64          `json:"index"`
	Record json.RawMessage `json:"record"`
}

func (s *Server) auditQuery(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		if _, _, ok := s.recordAccess(w, r, "query", r.URL.RawQuery); ok {
			writeError(w, r, errf(400, "%v", err))
		}
		return
	}
	if _, _, ok := s.recordAccess(w, r, "query", FilterQuery(f)); !ok {
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	started := false
	err = s.opt.Audit.Query(r.Context(), f, func(row index.Row) error {
		b, err := s.opt.Audit.Entry(row.Index)
		if err != nil {
			return err
		}
		started = true
		return enc.Encode(QueryLine{Index: row.Index, Record: b})
	})
	if err != nil && !started {
		writeError(w, r, auditError(err))
	} else if err != nil {
		fmt.Fprintf(w, "{\"error\":%q}\n", err.Error()) // too late for a status code
	}
}

func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		if _, _, ok := s.recordAccess(w, r, "export", r.URL.RawQuery); ok {
			writeError(w, r, errf(400, "%v", err))
		}
		return
	}
	if _, _, ok := s.recordAccess(w, r, "export", FilterQuery(f)); !ok {
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	if _, err := s.opt.Audit.Export(r.Context(), w, f); err != nil {
		fmt.Fprintf(w, "{\"error\":%q}\n", err.Error()) // makes the file fail verification
	}
}

// AccessRequest is the body of POST /v1/audit/access: a read of audit data
// done outside the server (the command line reading the log's files while
// the server holds it, a replay), to be recorded under the caller's name.
type AccessRequest struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// AccessResponse answers POST /v1/audit/access.
type AccessResponse struct {
	TraceID  string `json:"trace_id"`
	LogIndex uint64 `json:"log_index"`
	LeafHash string `json:"leaf_hash"`
}

func (s *Server) auditAccess(w http.ResponseWriter, r *http.Request) {
	var req AccessRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil && (req.Action == "" || strings.ContainsAny(req.Action, " \t\n")) {
		err = fmt.Errorf("action: want one word such as show, query, export, replay")
	}
	if err != nil {
		writeError(w, r, errf(400, "access record: %v", err))
		return
	}
	if s.opt.Appender == nil {
		writeError(w, r, errf(503, "this server keeps no audit log"))
		return
	}
	idx, leaf, ok := s.recordAccess(w, r, req.Action, req.Target)
	if !ok {
		return
	}
	if w.Header().Get(HeaderLogIndex) == "" {
		writeError(w, r, errf(503, "audit log unavailable; the access was not recorded"))
		return
	}
	writeJSON(w, 200, AccessResponse{TraceID: state(r).trace.TraceID, LogIndex: idx, LeafHash: hex.EncodeToString(leaf[:])})
}
