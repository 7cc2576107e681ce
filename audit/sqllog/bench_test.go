package sqllog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/sqllog/sqltest"
)

// BenchmarkSharedAppend: three replicas' handles on one MariaDB log, each
// with 64 concurrent appenders (a server's request goroutines), append
// durable records; the figure is aggregate acknowledged records a second.
// index: each handle also writes its rows to the shared index (the
// default); noindex: the log alone.
func BenchmarkSharedAppend(b *testing.B) {
	b.Run("index", func(b *testing.B) { benchSharedAppend(b, false) })
	b.Run("noindex", func(b *testing.B) { benchSharedAppend(b, true) })
}

func benchSharedAppend(b *testing.B, noIndex bool) {
	dsn := sqltest.Start(b)
	ctx := context.Background()
	s := signer(b)
	var logs []*Log
	for range 3 {
		l, err := Open(ctx, Options{DSN: dsn, Signer: s, NoIndex: noIndex})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close(ctx)
		logs = append(logs, l)
	}
	var n atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := max(b.N/(3*64), 1)
	for r, l := range logs {
		for c := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					rec := &audit.Record{TraceID: fmt.Sprintf("%02d%02d%028x", r, c, i+1), Time: time.Now().UTC(), Model: "credit", ModelVersion: "3",
						InputDigest: "sha256:" + fmt.Sprintf("%064x", i), OutputDigest: "sha256:" + fmt.Sprintf("%064x", i+1), Code: 200}
					if _, _, err := l.Append(ctx, rec); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "records/s")
}
