package server

import (
	"context"
	"time"
)

// Span describes one finished request for a tracing backend. Its ids are
// the ones the server propagated and recorded: TraceID is the audit
// record's trace id, SpanID the span id of the traceparent the server
// answered with, ParentSpanID the caller's span when the request came with
// a valid traceparent (the trace is continued), else empty.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Sampled                       bool
	Name                          string // "POST /v2/models/{name}/infer", or the gRPC method
	Protocol                      string // "http" or "grpc"
	Start, End                    time.Time
	Model, Principal, Remote      string
	// Code is the HTTP status, or for gRPC the status code's name.
	Code  string
	Error bool
}

// SpanSink receives a Span per request. ExportSpan MUST NOT block the
// request (queue and return) and MUST NOT retain ctx.
type SpanSink interface {
	ExportSpan(ctx context.Context, s Span)
}

// span reports a finished request to Options.Spans.
func (s *Server) span(ctx context.Context, st *reqState, name, proto string, start time.Time, code string, failed bool, remote string) {
	if s.opt.Spans == nil {
		return
	}
	sp := Span{TraceID: st.trace.TraceID, SpanID: st.trace.SpanID, Sampled: st.trace.Flags != "" && st.trace.Flags[1]&1 == 1,
		Name: name, Protocol: proto, Start: start, End: time.Now(), Model: st.model, Principal: st.principal,
		Remote: remote, Code: code, Error: failed}
	if in := st.trace.Incoming; len(in) >= 52 {
		sp.ParentSpanID = in[36:52]
	}
	s.opt.Spans.ExportSpan(ctx, sp)
}
