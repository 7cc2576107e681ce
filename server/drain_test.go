package server

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Graceful shutdown: requests in flight when shutdown begins are answered
// and audited; readiness turns false; new requests are refused.
func TestGracefulShutdownDrains(t *testing.T) {
	r := &slowRunner{release: make(chan struct{}), started: make(chan struct{}, 4)}
	audit := &memAppender{}
	s := New(Options{Appender: audit, Pool: PoolOptions{Workers: 1, Queue: 8}})
	close(r.release) // let warm-up through
	if err := s.AddModel(r); err != nil {
		t.Fatal(err)
	}
	r.release = make(chan struct{})
	<-r.started // warm-up's signal
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler()}
	go hs.Serve(lis)
	url := "http://" + lis.Addr().String()
	codes := make(chan int, 3)
	for range 3 {
		go func() {
			resp, err := http.Post(url+"/v2/models/slow/infer", "application/json",
				strings.NewReader(`{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`))
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	<-r.started
	time.Sleep(50 * time.Millisecond) // the other two are queued
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := hs.Shutdown(ctx)
		if derr := s.Drain(ctx); err == nil {
			err = derr
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if s.Ready() {
		// Drain runs after Shutdown, which waits for handlers; readiness
		// flips then. Check the listener refuses instead.
		if _, err := http.Get(url + "/v2/health/live"); err == nil {
			t.Error("listener still accepting during shutdown")
		}
	}
	close(r.release)
	for range 3 {
		if c := <-codes; c != 200 {
			t.Errorf("in-flight request answered %d, want 200", c)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if audit.len() != 3 {
		t.Errorf("%d records for 3 drained requests", audit.len())
	}
	if s.Ready() {
		t.Error("ready after drain")
	}
}
