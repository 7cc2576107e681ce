package audit

import (
	"context"
	"flag"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var verifyN = flag.Int("verify-n", 100_000, "entries in the log BenchmarkVerify checks")

// benchAppend appends b.N records from par goroutines per CPU and reports
// records/s and latency percentiles.
func benchAppend(b *testing.B, d Durability, par int) {
	ctx := context.Background()
	l := openTest(b, b.TempDir(), Options{Durability: d})
	recs := make([]*Record, 1024)
	for i := range recs {
		recs[i] = testRecord(i)
	}
	var n atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism(par)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := n.Add(1)
			t0 := time.Now()
			if _, _, err := l.Append(ctx, recs[i%1024]); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	if err := l.Sync(ctx); err != nil { // sustained: until in the tree and checkpointed
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	if err := l.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppend: sustained throughput with many concurrent appenders
// (as a loaded server has), durable and async.
func BenchmarkAppend(b *testing.B) {
	b.Run("durable/conc=64", func(b *testing.B) { benchAppend(b, Durable, 32) })
	b.Run("async/conc=64", func(b *testing.B) { benchAppend(b, Async, 32) })
}

// BenchmarkAppendLatency: one request at a time, paced at 500/s, as the
// issue's latency target is stated; ns/op includes the pacing. The log runs
// with the server's settings (openTest's 100ms checkpoints would sign and
// sync ten times as often as a server does). Compare with
// BenchmarkSyncFloor, the same pacing with nothing but a write and an
// fdatasync: on a shared machine most of the tail is the device's.
func BenchmarkAppendLatency(b *testing.B) {
	ctx := context.Background()
	l := openTest(b, b.TempDir(), Options{CheckpointInterval: time.Second})
	defer l.Close(ctx)
	lat := make([]time.Duration, 0, b.N)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		t0 := time.Now()
		if _, _, err := l.Append(ctx, testRecord(i)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkSyncFloor: what one durable write costs on this disk at 500/s,
// without the log: a frame-sized write into a preallocated file and an
// fdatasync. The floor under BenchmarkAppendLatency.
func BenchmarkSyncFloor(b *testing.B) {
	f, err := os.Create(b.TempDir() + "/floor")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 8<<20)); err != nil || f.Sync() != nil {
		b.Fatal(err)
	}
	frame, _ := testRecord(0).MarshalCanonical()
	lat := make([]time.Duration, 0, b.N)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		t0 := time.Now()
		if _, err := f.WriteAt(frame, int64(i*len(frame))%(8<<20-int64(len(frame)))); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkVerify verifies a log of -verify-n entries (built once, async).
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	l := openTest(b, dir, Options{Durability: Async, NoIndex: true})
	appendN(b, l, 0, *verifyN, 8)
	if err := l.Close(ctx); err != nil {
		b.Fatal(err)
	}
	_, vkey := keys(b)
	b.ResetTimer()
	for range b.N {
		rep, err := Verify(ctx, os.DirFS(dir), VerifyOptions{VerifierKeys: []string{vkey}})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Checkpoint.Size != uint64(*verifyN) {
			b.Fatalf("verified %d entries", rep.Checkpoint.Size)
		}
	}
	b.ReportMetric(float64(*verifyN)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
