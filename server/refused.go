package server

import (
	"context"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// Requests refused below the handler never reach infer, so they get no
// audit record: a connection closed on accept at a connection limit, an
// HTTP request that net/http answers itself (a malformed request line or
// header, headers past MaxHeaderBytes, a request cut by the read
// timeouts), a TLS handshake that fails, a gRPC inference call refused
// before its handler (a message past MaxGRPCBytes, bytes that do not
// decode). A record for each would let anyone fill the log with noise, so
// each is counted instead, in vouch_refused_below_handler_total{protocol,
// reason}, and raises an alarm (Options.Logger) at most once a second per
// protocol and reason, with the count since the last one: such refusals
// are never silent.
//
// An HTTP refusal is seen as a request read (the connection went active)
// that no handler ran for. net/http marks a connection active only when
// it reads from the socket, so a malformed request that follows a served
// one on a kept-alive connection, already in net/http's buffer, is
// answered 400 without being counted; every first request of a
// connection, and every one read from the socket, is.

// Reasons of vouch_refused_below_handler_total.
const (
	refusedConnLimit = "connection_limit" // closed on accept
	refusedHTTP      = "bad_request"      // net/http answered (400, 431, a read timeout)
	refusedHTTPError = "http_error"       // net/http's error log: TLS handshakes, accept errors
)

// refusals rate-limits the alarms of requests refused below the handler.
type refusals struct {
	mu   sync.Mutex
	last map[string]time.Time
	n    map[string]int
}

// refused counts one request refused below the handler, and alarms.
func (s *Server) refused(protocol, reason, detail string) {
	s.m.refusedBelow.WithLabelValues(protocol, reason).Inc()
	key := protocol + " " + reason
	r := &s.refusals
	r.mu.Lock()
	if r.last == nil {
		r.last, r.n = map[string]time.Time{}, map[string]int{}
	}
	r.n[key]++
	now := time.Now()
	if now.Sub(r.last[key]) < time.Second {
		r.mu.Unlock()
		return
	}
	n := r.n[key]
	r.last[key], r.n[key] = now, 0
	r.mu.Unlock()
	s.alarm.Warn("requests refused before any handler: no audit record", "protocol", protocol, "reason", reason, "count", n, "last", detail)
}

// ConfigureHTTP sets an http.Server's timeouts and header limit from
// Options.HTTP and makes it count (and alarm on) the requests it refuses
// itself, before hs.Handler runs. Set hs.Handler first. NewHTTPServer
// returns a server configured so.
func (s *Server) ConfigureHTTP(hs *http.Server) {
	l := s.opt.HTTP.withDefaults()
	hs.ReadHeaderTimeout, hs.ReadTimeout, hs.IdleTimeout, hs.MaxHeaderBytes = l.ReadHeaderTimeout, l.ReadTimeout, l.IdleTimeout, l.MaxHeaderBytes
	var conns sync.Map // net.Conn -> *connSeen
	prevCtx, prevState := hs.ConnContext, hs.ConnState
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		cs := &connSeen{}
		conns.Store(c, cs)
		return context.WithValue(ctx, connSeenKey{}, cs)
	}
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		if prevState != nil {
			prevState(c, st)
		}
		v, ok := conns.Load(c)
		if !ok {
			return
		}
		cs := v.(*connSeen)
		switch st {
		case http.StateActive:
			cs.active.Add(1)
		case http.StateIdle, http.StateClosed:
			// A request was read (the connection went active) that no
			// handler saw: net/http refused it.
			if a, h, r := cs.active.Load(), cs.handled.Load(), cs.refused.Load(); a > h+r && cs.refused.CompareAndSwap(r, a-h) {
				s.refused("http", refusedHTTP, "from "+c.RemoteAddr().String())
			}
			if st == http.StateClosed {
				conns.Delete(c)
			}
		}
	}
	h := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cs, ok := r.Context().Value(connSeenKey{}).(*connSeen); ok {
			cs.handled.Add(1)
		}
		h.ServeHTTP(w, r)
	})
	if hs.ErrorLog == nil {
		hs.ErrorLog = log.New(httpErrorLog{s}, "", 0)
	}
}

type connSeenKey struct{}

// connSeen counts a connection's requests: read (active) and handled.
type connSeen struct {
	active, handled atomic.Int64
	refused         atomic.Int64 // counted already (Shutdown may close an idle connection from its own goroutine)
}

// httpErrorLog turns net/http's error log (TLS handshake errors, accept
// errors, panics it recovered) into counted alarms.
type httpErrorLog struct{ s *Server }

func (l httpErrorLog) Write(p []byte) (int, error) {
	l.s.refused("http", refusedHTTPError, strings.TrimSpace(string(p)))
	return len(p), nil
}

// grpcRefusals is the gRPC server's stats handler: an inference call that
// ends in an error without reaching the server's interceptor was refused
// by grpc-go itself (a message past the size limit, bytes that are not a
// request).
type grpcRefusals struct{ s *Server }

type grpcTagKey struct{}

type grpcTag struct {
	method  string
	reached atomic.Bool
}

func (g grpcRefusals) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, grpcTagKey{}, &grpcTag{method: info.FullMethodName})
}

func (g grpcRefusals) HandleRPC(ctx context.Context, st stats.RPCStats) {
	end, ok := st.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	t, ok := ctx.Value(grpcTagKey{}).(*grpcTag)
	if !ok || t.reached.Load() || !strings.HasPrefix(t.method, "/inference.GRPCInferenceService/") {
		return
	}
	g.s.refused("grpc", status.Code(end.Error).String(), t.method+": "+end.Error.Error())
}

func (g grpcRefusals) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (g grpcRefusals) HandleConn(context.Context, stats.ConnStats) {}

// grpcReached marks the call of ctx as having reached the server's
// interceptor (so its refusal, if any, is the server's, and recorded).
func grpcReached(ctx context.Context) {
	if t, ok := ctx.Value(grpcTagKey{}).(*grpcTag); ok {
		t.reached.Store(true)
	}
}
