package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTP header names.
const (
	HeaderInferenceHeaderLength = "Inference-Header-Content-Length"
	HeaderTraceparent           = "Traceparent"
	HeaderTraceID               = "Vouch-Trace-Id"
	HeaderLogIndex              = "Vouch-Log-Index"
	HeaderLeafHash              = "Vouch-Leaf-Hash"
	HeaderRequestID             = "X-Request-Id"
)

// reqState travels in a request's context from the access-log middleware to
// the handler and back.
type reqState struct {
	trace     traceContext
	principal string
	model     string
}

type stateKey struct{}

// Handler returns the HTTP API: the Open Inference Protocol v2 REST
// endpoints, the model repository extension, and /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/health/live", s.live)
	mux.HandleFunc("GET /v2/health/ready", s.ready)
	mux.HandleFunc("GET /v2", s.serverMetadata)
	mux.HandleFunc("GET /v2/{$}", s.serverMetadata)
	mux.HandleFunc("GET /v2/models/{name}", s.modelMetadata)
	mux.HandleFunc("GET /v2/models/{name}/versions/{version}", s.modelMetadata)
	mux.HandleFunc("GET /v2/models/{name}/ready", s.modelReady)
	mux.HandleFunc("GET /v2/models/{name}/versions/{version}/ready", s.modelReady)
	mux.HandleFunc("POST /v2/models/{name}/infer", s.inferHTTP)
	mux.HandleFunc("POST /v2/models/{name}/versions/{version}/infer", s.inferHTTP)
	mux.HandleFunc("POST /v2/repository/index", s.repoIndex)
	mux.HandleFunc("POST /v2/repository/models/{name}/load", s.repoLoad)
	mux.HandleFunc("POST /v2/repository/models/{name}/unload", s.repoUnload)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	s.auditRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errf(404, "no endpoint %s %s", r.Method, r.URL.Path))
	})
	return s.middleware(mux)
}

// middleware sets up the trace context, echoes the request id and writes
// the access log line.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &reqState{trace: newTrace(r.Header.Get(HeaderTraceparent))}
		h := w.Header()
		h.Set(HeaderTraceparent, st.trace.Traceparent())
		h.Set(HeaderTraceID, st.trace.TraceID)
		if id := r.Header.Get(HeaderRequestID); id != "" && clean(id, maxIDBytes) {
			h.Set(HeaderRequestID, id)
		}
		rw := &statusWriter{ResponseWriter: w, code: 200}
		next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
		s.log.LogAttrs(r.Context(), levelFor(rw.code), "http",
			slogString("method", r.Method), slogString("path", r.URL.Path),
			slogInt("status", rw.code), slogInt("bytes", rw.n),
			slogFloat("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slogString("trace_id", st.trace.TraceID), slogString("principal", st.principal),
			slogString("model", st.model), slogString("remote", r.RemoteAddr))
		s.span(r.Context(), st, r.Method+" "+r.URL.Path, "http", start, strconv.Itoa(rw.code), rw.code >= 500, r.RemoteAddr)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
	n    int
}

func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += n
	return n, err
}

func state(r *http.Request) *reqState {
	if st, ok := r.Context().Value(stateKey{}).(*reqState); ok {
		return st
	}
	return &reqState{trace: newTrace("")}
}

// authHTTP authenticates a request and checks role; it answers the error
// itself and returns false when the caller may not proceed.
func (s *Server) authHTTP(w http.ResponseWriter, r *http.Request, role string) (authResult, bool) {
	a := s.authenticate(r).authorize(role)
	state(r).principal = a.name()
	if a.code != 0 {
		writeError(w, r, errf(a.code, "%s", a.msg))
		return a, false
	}
	return a, true
}

// authenticate identifies the caller of an HTTP request from its bearer
// token or its verified TLS client certificate.
func (s *Server) authenticate(r *http.Request) authResult {
	if r.TLS != nil {
		return s.credentialsFor(r.Header.Get("Authorization"), r.TLS.PeerCertificates)
	}
	return s.credentialsFor(r.Header.Get("Authorization"), nil)
}

func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]bool{"live": true})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ok := s.Ready()
	code := 200
	if !ok {
		code = 400 // the protocol: 4xx means false
	}
	writeJSON(w, code, map[string]bool{"ready": ok})
}

func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authHTTP(w, r, RoleInfer); !ok {
		return
	}
	writeJSON(w, 200, map[string]any{"name": s.opt.Name, "version": s.opt.Version, "extensions": Extensions})
}

type tensorMetaJSON struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func tensorMeta(specs []TensorSpec) []tensorMetaJSON {
	out := make([]tensorMetaJSON, len(specs))
	for i, s := range specs {
		shape := s.Shape
		if shape == nil {
			shape = []int64{}
		}
		out[i] = tensorMetaJSON{Name: s.Name, Datatype: oipType(s.DType), Shape: shape}
	}
	return out
}

func (s *Server) modelMetadata(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authHTTP(w, r, RoleInfer); !ok {
		return
	}
	e, aerr := s.lookup(r.PathValue("name"), r.PathValue("version"))
	if aerr != nil {
		writeError(w, r, aerr)
		return
	}
	writeJSON(w, 200, modelMetadataJSON(e.info, s.versions(e.info.Name)))
}

func modelMetadataJSON(info ModelInfo, versions []string) map[string]any {
	m := map[string]any{
		"name": info.Name, "versions": versions, "platform": info.Platform,
		"inputs": tensorMeta(info.Inputs), "outputs": tensorMeta(info.Outputs),
	}
	params := map[string]any{"plan_digest": info.PlanDigest, "precision": info.Precision}
	if info.BundleDigest != "" {
		params["bundle_digest"] = info.BundleDigest
	}
	if len(info.Labels) > 0 {
		params["labels"], params["label_output"] = info.Labels, info.LabelOutput
	}
	m["parameters"] = params
	return m
}

func (s *Server) modelReady(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authHTTP(w, r, RoleInfer); !ok {
		return
	}
	e, aerr := s.lookup(r.PathValue("name"), r.PathValue("version"))
	if aerr != nil {
		writeError(w, r, aerr)
		return
	}
	e.mu.Lock()
	ready := e.ready
	e.mu.Unlock()
	code := 200
	if !ready {
		code = 400
	}
	writeJSON(w, code, map[string]any{"name": e.info.Name, "ready": ready})
}

func (s *Server) inferHTTP(w http.ResponseWriter, r *http.Request) {
	st := state(r)
	a := s.authenticate(r).authorize(RoleInfer)
	st.principal = a.name()
	st.model = r.PathValue("name")
	c := &call{
		protocol: "http", trace: st.trace, auth: a, source: r.RemoteAddr,
		model: r.PathValue("name"), version: r.PathValue("version"),
		requestID: r.Header.Get(HeaderRequestID), start: time.Now(),
	}
	decode := func() (*inferRequest, *apiError) {
		headerLen := -1
		if v := r.Header.Get(HeaderInferenceHeaderLength); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, errf(400, "invalid %s %q", HeaderInferenceHeaderLength, v)
			}
			headerLen = n
		}
		limit := s.opt.MaxJSONBytes
		if headerLen >= 0 {
			if int64(headerLen) > s.opt.MaxJSONBytes {
				return nil, errf(413, "the JSON header of %d bytes exceeds %d bytes", headerLen, s.opt.MaxJSONBytes)
			}
			limit = s.opt.MaxBodyBytes
		}
		body, aerr := readBody(w, r, limit)
		if aerr != nil {
			return nil, aerr
		}
		req, err := decodeRequest(body, headerLen, s.opt.Limits)
		if errors.Is(err, errTooLarge) {
			return nil, errf(413, "%v", err)
		}
		if err != nil {
			return nil, errf(400, "%v", err)
		}
		return req, nil
	}
	out, aerr := s.infer(r.Context(), c, decode)
	if out.audited {
		w.Header().Set(HeaderLogIndex, strconv.FormatUint(out.index, 10))
		w.Header().Set(HeaderLeafHash, hex.EncodeToString(out.leaf[:]))
	}
	if aerr != nil {
		if aerr.code == 503 {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, r, aerr)
		return
	}
	writeInferResponse(w, st.trace.TraceID, out)
}

// writeInferResponse writes the OIP inference response, with binary
// outputs after the JSON header when any output was asked for in binary.
func writeInferResponse(w http.ResponseWriter, traceID string, out *outcome) {
	info := out.entry.info
	params := map[string]any{"trace_id": traceID}
	if out.audited {
		params["log_index"] = out.index
		params["leaf_hash"] = hex.EncodeToString(out.leaf[:])
	}
	if out.label != "" {
		params["output_label"] = out.label
		params["confidence"] = *out.confidence
	}
	decisionParams(params, out)
	pj, _ := json.Marshal(params)
	b := make([]byte, 0, 1024)
	b = append(b, `{"model_name":`...)
	b = appendQuoted(b, info.Name)
	b = append(b, `,"model_version":`...)
	b = appendQuoted(b, info.Version)
	if out.req.ID != "" {
		b = append(b, `,"id":`...)
		b = appendQuoted(b, out.req.ID)
	}
	b = append(b, `,"parameters":`...)
	b = append(b, pj...)
	b = append(b, `,"outputs":[`...)
	var bin [][]byte
	for i, o := range selectOutputs(info, out.req) {
		t := out.outs[o.Name]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendQuoted(b, o.Name)
		b = append(b, `,"datatype":`...)
		b = appendQuoted(b, oipType(t.DType))
		b = append(b, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(d), 10)
		}
		b = append(b, ']')
		if o.Binary {
			raw := rawBytes(t)
			bin = append(bin, raw)
			b = append(b, `,"parameters":{"binary_data_size":`...)
			b = strconv.AppendInt(b, int64(len(raw)), 10)
			b = append(b, `}}`...)
			continue
		}
		b = append(b, `,"data":`...)
		b = appendJSONData(b, t)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	h := w.Header()
	if len(bin) == 0 {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.Write(b)
		return
	}
	h.Set("Content-Type", "application/octet-stream")
	h.Set(HeaderInferenceHeaderLength, strconv.Itoa(len(b)))
	w.WriteHeader(200)
	w.Write(b)
	for _, raw := range bin {
		w.Write(raw)
	}
}

func appendQuoted(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

func (s *Server) repoIndex(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authHTTP(w, r, RoleAdmin); !ok {
		return
	}
	type entry struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		State   string `json:"state"`
		Reason  string `json:"reason"`
	}
	s.mu.RLock()
	var list []entry
	for name, vs := range s.models {
		for v, e := range vs {
			e.mu.Lock()
			st := "READY"
			if !e.ready {
				st = "UNAVAILABLE"
			}
			list = append(list, entry{Name: name, Version: v, State: st, Reason: e.why})
			e.mu.Unlock()
		}
	}
	s.mu.RUnlock()
	sortEntries(list, func(e entry) string { return e.Name + "\x00" + e.Version })
	if list == nil {
		list = []entry{}
	}
	writeJSON(w, 200, list)
}

func (s *Server) repoLoad(w http.ResponseWriter, r *http.Request)   { s.repoAction(w, r, true) }
func (s *Server) repoUnload(w http.ResponseWriter, r *http.Request) { s.repoAction(w, r, false) }

// repoAction loads or unloads every version of a model. Only models given
// at start can be loaded: the repository is the set the server was started
// with.
func (s *Server) repoAction(w http.ResponseWriter, r *http.Request, load bool) {
	if _, ok := s.authHTTP(w, r, RoleAdmin); !ok {
		return
	}
	name := r.PathValue("name")
	s.mu.RLock()
	vs, ok := s.models[name]
	var entries []*modelEntry
	for _, e := range vs {
		entries = append(entries, e)
	}
	draining := s.draining
	s.mu.RUnlock()
	if !ok {
		writeError(w, r, errf(404, "unknown model %q", name))
		return
	}
	if draining {
		writeError(w, r, errf(503, "server is shutting down"))
		return
	}
	for _, e := range entries {
		if load {
			if err := s.load(e); err != nil {
				writeError(w, r, errf(500, "%v", err))
				return
			}
		} else {
			s.unload(e)
		}
	}
	writeJSON(w, 200, map[string]any{})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = 500, []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// writeError writes the protocol's error body, {"error": message}, with the
// trace id beside it.
func writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	if e.code == 401 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="vouch"`)
	}
	writeJSON(w, httpCode(e.code), map[string]string{"error": bound(e.msg, maxErrorBytes), "trace_id": state(r).trace.TraceID})
}

// httpCode maps internal codes onto HTTP (499, client closed, is nginx's).
func httpCode(code int) int {
	if code < 100 || code > 599 {
		return 500
	}
	return code
}
