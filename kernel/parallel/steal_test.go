package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// A worker that is busy elsewhere (or whose OS thread was descheduled)
// must not hold up a call: the caller takes the chunks the worker has not
// started. Before, the caller waited for the worker's whole half.
func TestRunDoesNotWaitForABusyWorker(t *testing.T) {
	p := New(2)
	defer p.Close()
	started, release := make(chan struct{}), make(chan struct{})
	r := p.regions.Get().(*region)
	r.gen++
	r.left.Store(1)
	r.slots[0].Store(uint64(r.gen) << 32)
	p.jobs <- job{r: r, t: Func(func(lo, hi int) { close(started); <-release }), n: 1, w: 1, chunks: 1, gen: r.gen}
	<-started // the only worker is stuck in that job
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		p.Run(1000, 1<<20, Func(func(lo, hi int) { n.Add(int64(hi - lo)) }))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run waited for a busy worker")
	}
	close(release)
	if n.Load() != 1000 {
		t.Fatalf("ran %d of 1000 items", n.Load())
	}
}

// The chunks' boundaries are a function of (n, workers) alone: whichever
// goroutine runs them, the ranges are the same every call.
func TestRunRangesFixed(t *testing.T) {
	for _, w := range []int{2, 3, 8} {
		p := New(w)
		for _, n := range []int{2, 3, 7, 100, 1001} {
			var first map[[2]int]bool
			for rep := 0; rep < 20; rep++ {
				got := make(chan [2]int, n)
				p.Run(n, 1<<20, Func(func(lo, hi int) { got <- [2]int{lo, hi} }))
				close(got)
				seen := map[[2]int]bool{}
				for r := range got {
					seen[r] = true
				}
				if first == nil {
					first = seen
					continue
				}
				if len(seen) != len(first) {
					t.Fatalf("workers %d, n %d: %d ranges, then %d", w, n, len(first), len(seen))
				}
				for r := range seen {
					if !first[r] {
						t.Fatalf("workers %d, n %d: range %v not in the first call's", w, n, r)
					}
				}
			}
		}
		p.Close()
	}
}

func TestHoldRelease(t *testing.T) {
	p := New(2)
	defer p.Close()
	p.Hold()
	p.Hold()
	if p.holds.Load() != 2 {
		t.Fatalf("holds %d after two Holds", p.holds.Load())
	}
	var n atomic.Int64
	p.Run(100, 1<<20, Func(func(lo, hi int) { n.Add(int64(hi - lo)) }))
	p.Release()
	p.Release()
	if p.holds.Load() != 0 || n.Load() != 100 {
		t.Fatalf("holds %d, ran %d of 100", p.holds.Load(), n.Load())
	}
	var nilPool *Pool
	nilPool.Hold()
	nilPool.Release()
}

var sink float64

func spinWork(n int) float64 {
	s := 0.0
	for i := 0; i < n; i++ {
		s += float64(i) * 1e-9
	}
	return s
}

// BenchmarkHandoff times one Run of two halves of a task of work
// iterations after the caller worked alone for gap (the workers poll for
// spin, then park), held or not: the cost of handing a range over, which
// sets MinWorth. ns/run is the call, ns/alone the task on one goroutine.
func BenchmarkHandoff(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, work := range []int{0, 10000} {
		for _, gap := range []time.Duration{0, 50 * time.Microsecond, 500 * time.Microsecond} {
			for _, hold := range []bool{false, true} {
				name := time.Duration(work).String() + "/gap=" + gap.String()
				if hold {
					name += "/held"
				}
				b.Run(name, func(b *testing.B) {
					p := New(2)
					defer p.Close()
					if hold {
						p.Hold()
						defer p.Release()
					}
					var d time.Duration
					for i := 0; i < b.N; i++ {
						for t := time.Now(); time.Since(t) < gap; {
						}
						t := time.Now()
						p.Run(2, 1<<20, Func(func(lo, hi int) { sink += spinWork(work / 2) }))
						d += time.Since(t)
					}
					b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "ns/run")
					t := time.Now()
					for i := 0; i < 100; i++ {
						sink += spinWork(work)
					}
					b.ReportMetric(float64(time.Since(t).Nanoseconds())/100, "ns/alone")
				})
			}
		}
	}
}
