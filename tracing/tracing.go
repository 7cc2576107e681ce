// Package tracing exports the server's request spans over OTLP/gRPC
// (OpenTelemetry), so a bank's tracing backend sees each inference as a
// span of the caller's trace. The spans carry exactly the ids the server
// propagated and wrote into the audit record: the trace id of the
// record, the span id of the traceparent the server answered with, and
// the caller's span as parent when the request continued a trace. An
// auditor can therefore go from a record to its trace and back.
package tracing

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/vouchml/vouch/server"
)

// Options configures an Exporter.
type Options struct {
	Endpoint string // OTLP/gRPC collector, HOST:PORT
	Insecure bool   // plaintext (a collector on loopback or in the pod)
	Service  string // service.name; default "vouch"
	Version  string // service.version
	// BatchTimeout bounds how long a span waits before it is sent
	// (default 1 s).
	BatchTimeout time.Duration
}

// Exporter implements server.SpanSink. Spans are queued and sent in
// batches; a slow or absent collector drops spans, never slows requests.
type Exporter struct {
	tp *sdktrace.TracerProvider
	tr trace.Tracer
}

// New connects (lazily: the first batch dials) to the collector.
func New(ctx context.Context, o Options) (*Exporter, error) {
	if o.Endpoint == "" {
		return nil, fmt.Errorf("tracing: no OTLP endpoint")
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint)}
	if o.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if o.Service == "" {
		o.Service = "vouch"
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = time.Second
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(o.Service), semconv.ServiceVersion(o.Version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(o.BatchTimeout)),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(givenIDs{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
	return &Exporter{tp: tp, tr: tp.Tracer("github.com/vouchml/vouch/server")}, nil
}

// ExportSpan implements server.SpanSink.
func (e *Exporter) ExportSpan(_ context.Context, s server.Span) {
	tid, err1 := trace.TraceIDFromHex(s.TraceID)
	sid, err2 := trace.SpanIDFromHex(s.SpanID)
	if err1 != nil || err2 != nil {
		return
	}
	ctx := context.WithValue(context.Background(), idsKey{}, ids{tid, sid})
	if s.ParentSpanID != "" {
		if pid, err := trace.SpanIDFromHex(s.ParentSpanID); err == nil {
			flags := trace.TraceFlags(0)
			if s.Sampled {
				flags = trace.FlagsSampled
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: pid, TraceFlags: flags, Remote: true,
			}))
		}
	}
	attrs := []attribute.KeyValue{
		attribute.String("rpc.system", s.Protocol),
		attribute.String("vouch.trace_id", s.TraceID),
		attribute.String("vouch.code", s.Code),
	}
	if s.Model != "" {
		attrs = append(attrs, attribute.String("vouch.model", s.Model))
	}
	if s.Principal != "" {
		attrs = append(attrs, attribute.String("enduser.id", s.Principal))
	}
	if s.Remote != "" {
		attrs = append(attrs, attribute.String("client.address", s.Remote))
	}
	_, sp := e.tr.Start(ctx, s.Name, trace.WithTimestamp(s.Start), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if s.Error {
		sp.SetStatus(codes.Error, s.Code)
	}
	sp.End(trace.WithTimestamp(s.End))
}

// Shutdown sends the queued spans and closes the connection.
func (e *Exporter) Shutdown(ctx context.Context) error { return e.tp.Shutdown(ctx) }

type idsKey struct{}

type ids struct {
	t trace.TraceID
	s trace.SpanID
}

// givenIDs gives a span the ids the server already propagated (carried in
// the context by ExportSpan), and random ones to any other span.
type givenIDs struct{}

func (givenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.t, v.s
	}
	var t trace.TraceID
	rand.Read(t[:])
	return t, randomSpan()
}

func (givenIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.s
	}
	return randomSpan()
}

func randomSpan() trace.SpanID {
	var s trace.SpanID
	rand.Read(s[:])
	return s
}
