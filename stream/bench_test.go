package stream

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/vouchml/vouch/audit"
)

// BenchmarkExportLag appends records at 1,000 a second for two seconds
// (the log in durable mode, as a server writes it) and reports the
// delivery lag of every record: from its append to the sink's
// acknowledgement, p50 and p99, per sink. The log batches entries into its
// tree every 250 ms (its default), which is most of the lag.
func BenchmarkExportLag(b *testing.B) {
	sinks := map[string]func(b *testing.B) Sink{
		"cloudevents": func(b *testing.B) Sink {
			rc := &ceReceiver{t: &testing.T{}, events: map[string]ceEvent{}}
			srv := httptest.NewServer(rc)
			b.Cleanup(srv.Close)
			return &CloudEventsSink{URL: srv.URL, Source: testOrigin, Client: srv.Client()}
		},
		"kafka": func(b *testing.B) Sink {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "a"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close)
			s, err := NewKafkaSink(c.ListenAddrs(), "a")
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"nats": func(b *testing.B) Sink {
			s := startNATS(&testing.T{}, -1, b.TempDir())
			b.Cleanup(s.Shutdown)
			sk, err := NewNATSSink(context.Background(), NATSOptions{URL: "nats://" + s.Addr().String(), Subject: "a", Stream: "A", Origin: testOrigin})
			if err != nil {
				b.Fatal(err)
			}
			return sk
		},
	}
	for _, name := range []string{"cloudevents", "kafka", "nats"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				p50, p99, n := exportLag(b, sinks[name](b), 1000, 2*time.Second)
				b.ReportMetric(float64(p50.Microseconds())/1e3, "p50-ms")
				b.ReportMetric(float64(p99.Microseconds())/1e3, "p99-ms")
				b.ReportMetric(float64(n), "records")
			}
		})
	}
}

func exportLag(b *testing.B, sink Sink, rate int, d time.Duration) (p50, p99 time.Duration, n int) {
	l := testLogOpts(b, audit.Options{}) // a server's defaults: durable, 250 ms batches, 1 s checkpoints
	var mu sync.Mutex
	appended := map[string]time.Time{}
	var lags []time.Duration
	e, err := New(l, sink, Options{Name: "bench", CursorPath: filepath.Join(b.TempDir(), "c"), Poll: 10 * time.Millisecond,
		OnDelivered: func(evs []Event, at time.Time) {
			mu.Lock()
			for _, ev := range evs {
				lags = append(lags, at.Sub(appended[ev.TraceID]))
			}
			mu.Unlock()
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	total := int(d.Seconds() * float64(rate))
	tick := time.NewTicker(time.Second / time.Duration(rate))
	var wg sync.WaitGroup
	for i := range total {
		<-tick.C
		r := &audit.Record{TraceID: fmt.Sprintf("%032x", i+1), Time: time.Now().UTC(), Model: "m", Code: 200}
		mu.Lock()
		appended[r.TraceID] = time.Now()
		mu.Unlock()
		wg.Add(1)
		go func() { // a server appends from many goroutines at once
			defer wg.Done()
			if _, _, err := l.Append(ctx, r); err != nil {
				b.Error(err)
			}
		}()
	}
	tick.Stop()
	wg.Wait()
	for deadline := time.Now().Add(30 * time.Second); e.Cursor() < uint64(total); {
		if time.Now().After(deadline) {
			b.Fatalf("cursor %d of %d: %v", e.Cursor(), total, e.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lags)
	return lags[len(lags)/2], lags[len(lags)*99/100], len(lags)
}
