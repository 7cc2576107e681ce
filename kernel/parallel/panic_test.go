package parallel

import (
	"sync/atomic"
	"testing"
)

// A task that panics on a worker panics in Run's caller, where it can be
// recovered (exec makes it the run's error), and the pool goes on working:
// a panic on a worker goroutine used to kill the process.
func TestWorkerPanicReachesCaller(t *testing.T) {
	p := New(2)
	defer p.Close()
	got := func() (v any) {
		defer func() { v = recover() }()
		p.Run(2, 1<<20, Func(func(lo, hi int) {
			if lo > 0 {
				var table []int
				_ = table[lo]
			}
		}))
		return nil
	}()
	pv, ok := got.(*Panic)
	if !ok || pv.Value == nil || len(pv.Stack) == 0 {
		t.Fatalf("recovered %v (%T), want a *Panic", got, got)
	}
	var n atomic.Int64
	p.Run(100, 1<<20, Func(func(lo, hi int) { n.Add(int64(hi - lo)) }))
	if n.Load() != 100 {
		t.Fatalf("after a panic the pool ran %d of 100", n.Load())
	}
}
