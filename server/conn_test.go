package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestSlowClientsCannotHoldTheServer: 300 real clients on loopback that
// trickle a request body one byte every 100 ms (issue 20 B: 20,200 of them
// denied service) hold at most the per-address limit of connections, only
// until the read timeout, and a client from another address is served
// meanwhile.
func TestSlowClientsCannotHoldTheServer(t *testing.T) {
	s := New(Options{HTTP: HTTPLimits{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: time.Second,
		IdleTimeout: time.Second, MaxConns: 1000, MaxConnsPerIP: 100}})
	if err := s.AddModel(&slowRunner{}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.NewHTTPServer()
	go hs.Serve(s.Listener(ln))
	t.Cleanup(func() { hs.Close() })
	addr := ln.Addr().String()

	const slow = 300
	var wg sync.WaitGroup
	closedAfter := make(chan time.Duration, slow)
	start := time.Now()
	for range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			fmt.Fprintf(c, "POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
			go func() { io.Copy(io.Discard, c) }()
			for i := 0; i < 100; i++ {
				if _, err := c.Write([]byte{' '}); err != nil {
					closedAfter <- time.Since(start)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	held := value(s.m.connOpen)
	refused := value(s.m.connRefused)
	t.Logf("%d slow clients: %v connections held, %v refused on accept", slow, held, refused)
	if held > 100 || refused < slow-100 {
		t.Errorf("held %v connections (limit 100 per address), refused %v", held, refused)
	}

	// Another address is served while they trickle.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 5 * time.Second}
	t0 := time.Now()
	resp, err := client.Post("http://"+addr+"/v2/models/slow/infer", "application/json", strings.NewReader(inferBody))
	if err != nil {
		t.Fatalf("a client beside the slow ones: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a client beside the slow ones: %s", resp.Status)
	}
	t.Logf("a client from 127.0.0.2 served in %v", time.Since(t0).Round(time.Millisecond))

	wg.Wait()
	close(closedAfter)
	var last time.Duration
	n := 0
	for d := range closedAfter {
		n++
		last = max(last, d)
	}
	time.Sleep(100 * time.Millisecond)
	t.Logf("%d trickling connections cut, the last after %v; %v held at the end", n, last.Round(time.Millisecond), value(s.m.connOpen))
	if n != slow || last > 5*time.Second {
		t.Errorf("%d of %d trickling connections cut, the last after %v (read timeout 1s)", n, slow, last)
	}
	if v := value(s.m.connOpen); v > 1 {
		t.Errorf("%v connections still held", v)
	}
}

// value reads a gauge or a counter.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	c.Write(&m)
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}
