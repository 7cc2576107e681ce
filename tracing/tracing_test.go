package tracing

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/vouchml/vouch/server"
)

// collector is an OTLP/gRPC trace receiver (the collector's TraceService,
// from the OTLP protocol's own definitions).
type collector struct {
	collpb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   []string
}

func (c *collector) Export(_ context.Context, r *collpb.ExportTraceServiceRequest) (*collpb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range r.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				c.svc = append(c.svc, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	return &collpb.ExportTraceServiceResponse{}, nil
}

// TestSpansContinueTheCallersTrace: requests to a real server, one with a
// caller's traceparent and one without, reach the OTLP collector as server
// spans whose ids are the ones the server answered with (and records): the
// caller's trace and parent span continued, or a new trace.
func TestSpansContinueTheCallersTrace(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	g := grpc.NewServer()
	collpb.RegisterTraceServiceServer(g, col)
	go g.Serve(l)
	defer g.Stop()

	exp, err := New(context.Background(), Options{Endpoint: l.Addr().String(), Insecure: true, Version: "test", BatchTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(server.Options{Spans: exp}).Handler())
	defer srv.Close()

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest("GET", srv.URL+"/v2/health/ready", nil)
	req.Header.Set("traceparent", caller)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	answered := resp.Header.Get("traceparent")
	resp2, err := http.Get(srv.URL + "/v2/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	fresh := resp2.Header.Get("traceparent")
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) != 2 || len(col.svc) == 0 || col.svc[0] != "vouch" {
		t.Fatalf("collector got %d spans, services %v", len(col.spans), col.svc)
	}
	byTrace := map[string]*tracepb.Span{}
	for _, s := range col.spans {
		byTrace[hex.EncodeToString(s.TraceId)] = s
	}
	check := func(tp string, parent string, wantErr bool) {
		t.Helper()
		parts := strings.Split(tp, "-")
		s := byTrace[parts[1]]
		if s == nil {
			t.Fatalf("no span in trace %s", parts[1])
		}
		if got := hex.EncodeToString(s.SpanId); got != parts[2] {
			t.Errorf("span id %s, the server answered %s", got, parts[2])
		}
		if got := hex.EncodeToString(s.ParentSpanId); got != parent {
			t.Errorf("parent span %q, want %q", got, parent)
		}
		if s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.EndTimeUnixNano < s.StartTimeUnixNano {
			t.Errorf("span kind %v, times %d..%d", s.Kind, s.StartTimeUnixNano, s.EndTimeUnixNano)
		}
		if (s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR) != wantErr {
			t.Errorf("span status %v", s.GetStatus())
		}
	}
	if !strings.HasPrefix(answered, "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
		t.Fatalf("the server did not continue the caller's trace: %s", answered)
	}
	check(answered, "00f067aa0ba902b7", false)
	check(fresh, "", false) // a 404 is the client's error, not the server's
}
