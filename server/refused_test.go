package server

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/vouchml/vouch/server/oippb"
)

// syncBuffer is a bytes.Buffer safe for the alarm logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitMetric waits until the metric reads want (the server counts a
// refusal when the connection closes, which the client may see first).
func waitMetric(t *testing.T, url, name, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := metricValue(t, url, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %q, want %q", name, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Regression (issue 20): requests refused below the handler — a malformed
// HTTP request, headers past the limit, a connection over the limit, a
// gRPC message past its limit — left no record and no alarm. Each is now
// counted by protocol and reason and raises an alarm; requests that reach
// the handler are not counted.
func TestRefusedBelowHandler(t *testing.T) {
	var alarms syncBuffer
	s := New(Options{Logger: slogJSON(&alarms), MaxGRPCBytes: 1 << 12,
		HTTP: HTTPLimits{MaxConnsPerIP: 2, MaxHeaderBytes: 4 << 10}})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	metrics := httptest.NewServer(s.Handler())
	defer metrics.Close()
	const httpBad = `vouch_refused_below_handler_total{protocol="http",reason="bad_request"}`
	const connLimit = `vouch_refused_below_handler_total{protocol="conn",reason="connection_limit"}`
	const grpcBig = `vouch_refused_below_handler_total{protocol="grpc",reason="ResourceExhausted"}`
	waitMetric(t, metrics.URL, httpBad, "0") // present from the start

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.NewHTTPServer()
	go hs.Serve(s.Listener(ln))
	defer hs.Close()
	exchange := func(c net.Conn, req string) string {
		t.Helper()
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	// A good request and its connection closed, then a malformed one:
	// only the second is counted.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := exchange(c, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.Contains(got, "200") {
		t.Fatalf("health: %q", got)
	}
	c.Close()
	if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if got := exchange(c, "GARBAGE\r\n\r\n"); !strings.Contains(got, "400") {
		t.Fatalf("garbage: %q", got)
	}
	c.Close()
	waitMetric(t, metrics.URL, httpBad, "1")
	// Headers past MaxHeaderBytes: net/http answers 431 itself.
	c, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := exchange(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 8<<10)+"\r\n\r\n"); !strings.Contains(got, "431") {
		t.Fatalf("big header: %q", got)
	}
	c.Close()
	waitMetric(t, metrics.URL, httpBad, "2")

	// Two connections are held; the third from the address is closed on
	// accept.
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if got := exchange(c, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.Contains(got, "200") {
			t.Fatalf("held connection: %q", got)
		}
		held = append(held, c)
	}
	c, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"))
	if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Fatal("the connection over the limit was served")
	}
	c.Close()
	waitMetric(t, metrics.URL, connLimit, "1")
	for _, c := range held {
		c.Close()
	}
	waitMetric(t, metrics.URL, httpBad, "2") // the held ones were served

	// gRPC: a served call is not counted, one past the message limit is.
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := s.NewGRPCServer()
	go g.Serve(gl)
	defer g.Stop()
	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := oippb.NewGRPCInferenceServiceClient(conn)
	req := func(n int) *oippb.ModelInferRequest {
		return &oippb.ModelInferRequest{ModelName: "slow", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: "FP32", Shape: []int64{int64(n / 2), 2}, Contents: &oippb.InferTensorContents{Fp32Contents: make([]float32, n)}}}}
	}
	if _, err := gc.ModelInfer(context.Background(), req(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.ModelInfer(context.Background(), req(4000)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the message limit: %v", err)
	}
	waitMetric(t, metrics.URL, grpcBig, "1")

	for _, want := range []string{`"reason":"bad_request"`, `"reason":"connection_limit"`, `"reason":"ResourceExhausted"`, "no audit record"} {
		if !strings.Contains(alarms.String(), want) {
			t.Errorf("no alarm with %s:\n%s", want, alarms.String())
		}
	}
	// Nothing else was counted meanwhile: the held connections and the
	// served gRPC call were handled.
	for name, want := range map[string]string{httpBad: "2", connLimit: "1", grpcBig: "1"} {
		if got := metricValue(t, metrics.URL, name); got != want {
			t.Errorf("at the end %s = %s, want %s", name, got, want)
		}
	}
}
