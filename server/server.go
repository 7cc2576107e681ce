package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/tensor"
)

// Options configure a Server. The zero value serves without auth, without
// an audit hook, with one worker per model.
type Options struct {
	Name    string // server metadata name; default "vouch"
	Version string // server metadata version

	// Appender receives one record per inference request, and one access
	// record per read of audit data. Nil turns the audit hook off
	// (responses still carry a trace id).
	Appender Appender
	// AuditFailOpen serves requests whose record cannot be appended (the
	// log is failing), counting them in vouch_audit_failures_total and
	// raising vouch_audit_alarm; the default, fail closed, refuses them
	// with 503 so that nothing is served unaudited.
	AuditFailOpen bool
	// Audit, when set, serves the audit API under /v1/audit (role audit;
	// every read leaves an access record through Appender) and the log's
	// checkpoint and tiles under /log/ (no auth).
	Audit AuditStore
	// PublicLog, when set and Audit is not, serves a log's checkpoint and
	// tiles under /log/ (entry bundles to the audit role, as with Audit):
	// the shared log of several replicas (package audit/sqllog), which has
	// no local index for the audit API.
	PublicLog http.Handler
	// Capture, when set, keeps the inputs of every served request
	// (encrypted, keyed by input digest and model). A failure to capture
	// is treated as an audit failure (AuditFailOpen decides).
	Capture Capturer
	// Logger receives alarms and errors; nil means AccessLog, or
	// slog.Default() when that is nil too, so that an alarm is never lost.
	Logger *slog.Logger
	// Credentials turn authentication on; nil lets every caller in as
	// "anonymous" with AnonymousRoles (default: infer only).
	Credentials    *Credentials
	AnonymousRoles []string

	Pool PoolOptions
	// MaxBodyBytes bounds an HTTP body with binary tensor data (default
	// 64 MiB), MaxJSONBytes a JSON body and the JSON header of a binary
	// one (default MaxBodyBytes), MaxGRPCBytes a gRPC message (default
	// MaxBodyBytes); larger requests get 413 (gRPC ResourceExhausted).
	MaxBodyBytes, MaxJSONBytes, MaxGRPCBytes int64
	// Limits bound the tensors of one request (the memory budget).
	Limits Limits
	// HTTP bounds connections: timeouts and connection limits.
	HTTP HTTPLimits
	// Journal, when set, receives the record of each accepted inference
	// request before the engine runs it (see Journal), so that a process
	// that dies during a run leaves that request's record behind. A
	// request whose entry cannot be written is refused (503), unless
	// AuditFailOpen.
	Journal *Journal

	// RequestTimeout bounds an inference request from its arrival to its
	// answer (0: none). A request past it is answered 504 and recorded,
	// even when the engine is still busy with it (a hung kernel).
	RequestTimeout time.Duration

	// AccessLog receives one line per HTTP request and gRPC call (JSON
	// through slog in the command); nil discards.
	AccessLog *slog.Logger

	// Spans, when set, receives one span per HTTP request and gRPC call,
	// with the trace ids the server propagates (OpenTelemetry, OTLP).
	Spans SpanSink

	// Collectors are more Prometheus metrics served on /metrics beside
	// the server's own (the audit exporters' lag, package stream).
	Collectors []prometheus.Collector
}

// Server serves models over the Open Inference Protocol. Create it with
// New, add models, then mount Handler (HTTP) and RegisterGRPC.
type Server struct {
	opt     Options
	m       *metrics
	log     *slog.Logger
	alarm   *slog.Logger
	inflght sync.WaitGroup
	// refusals rate-limits the alarms of requests refused below the
	// handler (refused.go).
	refusals refusals

	mu       sync.RWMutex
	models   map[string]map[string]*modelEntry // name → version → entry
	latest   map[string]string                 // name → version served when none is named
	draining bool
}

type modelEntry struct {
	r    Runner
	info ModelInfo

	mu    sync.Mutex // guards pool and ready transitions
	pool  *pool
	ready bool
	why   string // reason when not ready
}

// New returns a Server with no models.
func New(o Options) *Server {
	if o.Name == "" {
		o.Name = "vouch"
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 20
	}
	if o.MaxJSONBytes <= 0 {
		o.MaxJSONBytes = o.MaxBodyBytes
	}
	if o.MaxGRPCBytes <= 0 {
		o.MaxGRPCBytes = o.MaxBodyBytes
	}
	o.Limits = o.Limits.withDefaults()
	log := o.AccessLog
	if log == nil {
		log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	alarm := o.Logger
	if alarm == nil && o.AccessLog != nil {
		alarm = o.AccessLog
	}
	if alarm == nil {
		// An alarm is never discarded: without any logger it goes to the
		// process's default one (standard error).
		alarm = slog.Default()
	}
	m := newMetrics()
	m.reg.MustRegister(buildInfo(o.Version))
	m.reg.MustRegister(o.Collectors...)
	return &Server{opt: o, m: m, log: log, alarm: alarm, models: map[string]map[string]*modelEntry{}, latest: map[string]string{}}
}

// Extensions lists the protocol extensions served.
var Extensions = []string{"binary_tensor_data", "model_repository", "vouch_audit"}

// AddModel adds a model and loads it (warm-up, then ready). The last
// version added under a name is the one served when a request names none.
func (s *Server) AddModel(r Runner) error {
	info := r.Info()
	if info.Name == "" || info.Version == "" {
		return fmt.Errorf("server: model needs a name and a version")
	}
	s.mu.Lock()
	if s.models[info.Name] == nil {
		s.models[info.Name] = map[string]*modelEntry{}
	}
	if _, dup := s.models[info.Name][info.Version]; dup {
		s.mu.Unlock()
		return fmt.Errorf("server: model %s version %s added twice", info.Name, info.Version)
	}
	e := &modelEntry{r: r, info: info}
	s.models[info.Name][info.Version] = e
	s.latest[info.Name] = info.Version
	s.mu.Unlock()
	return s.load(e)
}

// load warms a model up and opens its pool; the model is ready after.
func (s *Server) load(e *modelEntry) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ready {
		return nil
	}
	if in := warmupInputs(e.info); in != nil {
		if _, err := e.r.Check(in); err == nil {
			if _, err := e.r.Run(context.Background(), in); err != nil {
				e.why = "warm-up failed: " + err.Error()
				return fmt.Errorf("server: model %s version %s: warm-up: %w", e.info.Name, e.info.Version, err)
			}
		}
	}
	name := e.info.Name
	e.pool = newPool(e.r, s.opt.Pool, func(rows int) { s.m.batch.WithLabelValues(name).Observe(float64(rows)) })
	e.ready, e.why = true, ""
	return nil
}

// unload stops a model taking requests and drains what it has queued.
func (s *Server) unload(e *modelEntry) {
	e.mu.Lock()
	p := e.pool
	e.pool, e.ready, e.why = nil, false, "unloaded"
	e.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// Ready reports whether the server takes requests: not draining and every
// model loaded.
func (s *Server) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.draining {
		return false
	}
	for _, vs := range s.models {
		for _, e := range vs {
			e.mu.Lock()
			r := e.ready
			e.mu.Unlock()
			if !r {
				return false
			}
		}
	}
	return true
}

// Drain marks the server not ready (readiness probes fail, new requests get
// 503) and waits until every request in flight has been answered and
// audited, or ctx ends; then it closes the model pools. Call it after the
// listeners stopped accepting (http.Server.Shutdown, grpc GracefulStop).
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	var entries []*modelEntry
	for _, vs := range s.models {
		for _, e := range vs {
			entries = append(entries, e)
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.inflght.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("server: drain: %w", ctx.Err())
	}
	for _, e := range entries {
		s.unload(e)
	}
	return err
}

// lookup finds a model; version "" means the latest.
func (s *Server) lookup(name, version string) (*modelEntry, *apiError) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	vs, ok := s.models[name]
	if !ok {
		return nil, errf(404, "unknown model %q", name)
	}
	v := version
	if v == "" {
		v = s.latest[name]
	}
	e, ok := vs[v]
	if !ok {
		return nil, errf(404, "unknown version %q of model %q", version, name)
	}
	return e, nil
}

// versions lists a model's versions in order.
func (s *Server) versions(name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for v := range s.models[name] {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// apiError is an error answered to the client: an HTTP status code (the
// gRPC code is derived from it) and a message.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errf(code int, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// call is what the transport knows about an inference request before the
// model sees it.
type call struct {
	protocol  string // "http" or "grpc"
	trace     traceContext
	auth      authResult
	source    string
	model     string
	version   string
	requestID string // from the transport, when the body cannot be read
	start     time.Time
}

// outcome is a served (or refused) inference request.
type outcome struct {
	entry      *modelEntry
	req        *inferRequest
	outs       map[string]*tensor.Tensor
	label      string
	confidence *float64
	decided    *explain.Outcome // every row's decision and reasons
	audited    bool
	index      uint64
	leaf       [32]byte
	// journaled marks the request's in-flight journal entry done.
	journaled func()
}

// infer serves one inference request, whichever protocol carried it, and
// leaves its audit record, success or error. decode reads the request; it
// runs only once the caller is authorized and the model found.
func (s *Server) infer(ctx context.Context, c *call, decode func() (*inferRequest, *apiError)) (*outcome, *apiError) {
	s.mu.RLock()
	draining := s.draining
	if !draining {
		s.inflght.Add(1)
	}
	s.mu.RUnlock()
	if !draining {
		defer s.inflght.Done()
	}
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()
	rec := &audit.Record{
		Kind: audit.KindInference, TraceID: c.trace.TraceID, TraceParent: c.trace.recorded(),
		Time: c.start.UTC(), Principal: c.auth.name(), SourceAddr: c.source,
		Model: c.model, ModelVersion: c.version, RequestID: c.requestID,
	}
	out := &outcome{}
	aerr := s.serve(ctx, c, rec, out, draining, decode)
	if done := out.journaled; done != nil {
		defer done() // once the outcome's record is appended (or refused)
	}
	if aerr == nil && s.opt.Capture != nil && out.req != nil {
		if err := s.opt.Capture.Put(rec.Model, rec.InputDigest, out.req.Inputs); err != nil {
			s.m.captureErrs.Inc()
			if s.auditFailed(rec, fmt.Errorf("input capture: %w", err)) {
				s.alarm.Error("input capture failed; served without its captured input", "trace_id", rec.TraceID, "err", err.Error())
			} else {
				out, aerr = &outcome{entry: out.entry, req: out.req}, errf(503, "input capture failed; request refused so that it can be replayed")
				rec.OutputDigest, rec.Outputs, rec.OutputLabel, rec.Confidence = "", nil, "", nil
				rec.Rows, rec.Decisions, rec.DecisionsDigest, rec.Explanation = 0, nil, "", nil
			}
		}
	}
	label := "_unknown"
	if out.entry != nil {
		label = out.entry.info.Name
	}
	lat := time.Since(c.start)
	rec.LatencyMicros = lat.Microseconds()
	rec.Status, rec.Code = audit.StatusOK, 200
	if aerr != nil {
		rec.Status, rec.Code, rec.Error = audit.StatusError, aerr.code, aerr.msg
	}
	if s.opt.Appender != nil {
		s.m.auditDepth.Inc()
		t := time.Now()
		idx, leaf, err := s.appendRecord(context.WithoutCancel(ctx), rec)
		s.m.audit.Observe(time.Since(t).Seconds())
		s.m.auditDepth.Dec()
		if err != nil {
			if !s.auditFailed(rec, err) {
				out, aerr = &outcome{entry: out.entry, req: out.req}, errf(503, "audit log unavailable; request refused so that nothing is served unaudited")
			}
		} else {
			s.m.auditAlarm.Set(0)
			out.audited, out.index, out.leaf = true, idx, leaf
		}
	}
	code := 200
	if aerr != nil {
		code = aerr.code
	}
	codeLabel := fmt.Sprint(httpCode(code))
	if c.protocol == "grpc" {
		codeLabel = grpcCode(code).String()
	}
	s.m.requests.WithLabelValues(label, c.protocol, codeLabel).Inc()
	s.m.latency.WithLabelValues(label, c.protocol).Observe(lat.Seconds())
	return out, aerr
}

// appendRecord appends rec to the audit log, bounded (see [bounded]) so
// that nothing a client sends can make its record too large or not
// encodable. Should the log still refuse the record itself, its minimal form
// is appended instead: a request is never left unrecorded because of what
// it carried.
func (s *Server) appendRecord(ctx context.Context, rec *audit.Record) (uint64, [32]byte, error) {
	b := bounded(rec)
	idx, leaf, err := s.opt.Appender.Append(ctx, b)
	if err != nil && recordRefused(err) {
		s.alarm.Warn("audit record refused by the log; appending its minimal form", "trace_id", rec.TraceID, "kind", rec.Kind, "err", err.Error())
		idx, leaf, err = s.opt.Appender.Append(ctx, minimal(b))
	}
	return idx, leaf, err
}

// serve does the work of infer up to the audit record.
func (s *Server) serve(ctx context.Context, c *call, rec *audit.Record, out *outcome, draining bool, decode func() (*inferRequest, *apiError)) *apiError {
	if c.auth.code != 0 {
		return errf(c.auth.code, "%s", c.auth.msg)
	}
	if !clean(c.requestID, maxIDBytes) {
		return errf(400, "request id must be valid UTF-8 of at most %d bytes (got %d bytes)", maxIDBytes, len(c.requestID))
	}
	if draining {
		return errf(503, "server is shutting down")
	}
	e, aerr := s.lookup(c.model, c.version)
	if aerr != nil {
		return aerr
	}
	out.entry = e
	info := e.info
	rec.Model, rec.ModelVersion = info.Name, info.Version
	rec.PlanDigest, rec.BundleDigest, rec.Precision = info.PlanDigest, info.BundleDigest, info.Precision
	rec.Backend, rec.Device = info.Backend, info.Device
	e.mu.Lock()
	p, ready, why := e.pool, e.ready, e.why
	e.mu.Unlock()
	if !ready {
		return errf(503, "model %s version %s is not ready (%s)", info.Name, info.Version, why)
	}
	req, aerr := decode()
	if aerr != nil {
		return aerr
	}
	out.req = req
	if req.ID != "" {
		rec.RequestID = req.ID
		if !clean(req.ID, maxIDBytes) {
			return errf(400, "request id must be valid UTF-8 of at most %d bytes (got %d bytes)", maxIDBytes, len(req.ID))
		}
	}
	var err error
	if rec.InputDigest, rec.Inputs, err = audit.InputDigest(req.Inputs); err != nil {
		return errf(400, "%v", err)
	}
	profile, err := e.r.Check(req.Inputs)
	if err != nil {
		return errf(400, "%v", err)
	}
	rec.Profile = profile
	for _, o := range req.Outputs {
		if !slices.ContainsFunc(info.Outputs, func(t TensorSpec) bool { return t.Name == o.Name }) {
			return errf(400, "unknown output %q of model %s", o.Name, info.Name)
		}
	}
	s.m.queueDepth.WithLabelValues(info.Name).Set(float64(p.depth()))
	if d := s.opt.RequestTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, c.start.Add(d), errRequestTimeout)
		defer cancel()
	}
	if j := s.opt.Journal; j != nil {
		// The accepted record, before the risky part: see Journal.
		done, err := j.Accept(bounded(rec))
		if err != nil {
			if !s.auditFailed(rec, err) {
				return errf(503, "in-flight journal unavailable; request refused so that a crash during its run cannot leave it unrecorded")
			}
		} else {
			out.journaled = done
		}
	}
	res := p.submit(ctx, req.Inputs)
	if res.err == nil || res.queue > 0 {
		s.m.queue.WithLabelValues(info.Name).Observe(res.queue.Seconds())
		s.m.compute.WithLabelValues(info.Name).Observe(res.compute.Seconds())
	}
	switch {
	case res.err == nil:
	case errors.Is(res.err, ErrQueueFull):
		return errf(503, "model %s: queue full (%d waiting); retry later", info.Name, s.opt.Pool.withDefaults().Queue)
	case errors.Is(res.err, ErrClosed):
		return errf(503, "model %s is unloading", info.Name)
	case errors.Is(res.err, ErrInput):
		return errf(400, "%v", res.err)
	case errors.Is(res.err, errRequestTimeout),
		errors.Is(res.err, context.DeadlineExceeded) && errors.Is(context.Cause(ctx), errRequestTimeout):
		return errf(504, "model %s: no answer within the request timeout of %v", info.Name, s.opt.RequestTimeout)
	case errors.Is(res.err, context.Canceled), errors.Is(res.err, context.DeadlineExceeded):
		return errf(499, "client gave up: %v", res.err)
	case engineFault(res.err):
		s.alarm.Error("engine failure", "trace_id", rec.TraceID, "model", info.Name, "err", res.err.Error())
		msg, _, _ := strings.Cut(res.err.Error(), "\n") // not the stack
		return errf(500, "model %s: %s", info.Name, msg)
	default:
		// A plan is a pure function of its inputs: an error it returns for
		// inputs that passed Check (an index out of a table's range, a
		// sequence longer than the positions) is the inputs' doing.
		return errf(400, "model %s cannot run these inputs: %v", info.Name, res.err)
	}
	out.outs = res.outs
	if rec.OutputDigest, rec.Outputs, err = audit.InputDigest(res.outs); err != nil {
		return errf(500, "model %s: %v", info.Name, err)
	}
	if err := decide(ctx, e.r, req.Inputs, rec, out); err != nil {
		return errf(500, "model %s: %v", info.Name, err)
	}
	return nil
}

// errRequestTimeout is the cause of a request's context ending at
// Options.RequestTimeout.
var errRequestTimeout = errors.New("server: request timeout")

// engineFault reports whether a run failed through no fault of its inputs:
// a kernel that panicked.
func engineFault(err error) bool {
	return strings.Contains(err.Error(), "kernel panicked")
}

// selectOutputs returns the outputs to answer with, in the model's order
// (or the order requested), with their binary flags.
func selectOutputs(info ModelInfo, req *inferRequest) []outputRequest {
	if len(req.Outputs) > 0 {
		return req.Outputs
	}
	out := make([]outputRequest, len(info.Outputs))
	for i, o := range info.Outputs {
		out[i] = outputRequest{Name: o.Name, Binary: req.BinaryOutput}
	}
	return out
}
