// Package parallel is vouch's persistent worker pool: kernels split their
// outputs into contiguous ranges and run the ranges on long-lived workers,
// so that no goroutine is started per layer or per request.
//
// The pool decides only who computes a range, never what is computed: a
// kernel MUST produce each output with the same operations whatever range
// it falls in, so that results do not depend on the number of workers
// (DESIGN.md: threads partition outputs, never a reduction).
package parallel

import (
	"runtime"
	"sync"
)

// Task is a unit of divisible work: Run computes the items [lo, hi).
// Run MUST be safe to call concurrently on disjoint ranges.
type Task interface {
	Run(lo, hi int)
}

// Func adapts a function to Task.
type Func func(lo, hi int)

// Run implements Task.
func (f Func) Run(lo, hi int) { f(lo, hi) }

type job struct {
	t      Task
	lo, hi int
	wg     *sync.WaitGroup
}

// Pool is a fixed set of worker goroutines. The zero value is not usable;
// call New. A nil *Pool runs everything on the caller.
type Pool struct {
	workers int
	jobs    chan job
	wgs     sync.Pool
}

// New starts a pool that runs a task on up to n goroutines: the caller
// and n-1 workers. n < 1 means runtime.GOMAXPROCS(0).
func New(n int) *Pool {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{workers: n, jobs: make(chan job, 4*n)}
	p.wgs.New = func() any { return new(sync.WaitGroup) }
	for i := 1; i < n; i++ {
		go p.work()
	}
	return p
}

func (p *Pool) work() {
	for j := range p.jobs {
		j.t.Run(j.lo, j.hi)
		j.wg.Done()
	}
}

// Close stops the workers; the pool must not be used afterwards.
func (p *Pool) Close() {
	if p != nil && p.jobs != nil {
		close(p.jobs)
	}
}

// Workers returns how many goroutines a task may run on (1 for nil).
func (p *Pool) Workers() int {
	if p == nil {
		return 1
	}
	return p.workers
}

// Run splits [0, n) into at most Workers() contiguous ranges of nearly
// equal size and runs t on each, the first on the caller; it returns when
// all are done. Worth is the work in multiply-adds: below a threshold
// everything runs on the caller, where starting workers would cost more
// than it saves.
func (p *Pool) Run(n, worth int, t Task) {
	w := p.Workers()
	if n <= 0 {
		return
	}
	if w < 2 || n < 2 || worth < 1<<15 {
		t.Run(0, n)
		return
	}
	w = min(w, n)
	wg := p.wgs.Get().(*sync.WaitGroup)
	wg.Add(w - 1)
	for i := 1; i < w; i++ {
		p.jobs <- job{t: t, lo: i * n / w, hi: (i + 1) * n / w, wg: wg}
	}
	t.Run(0, n/w)
	wg.Wait()
	p.wgs.Put(wg)
}

var (
	defOnce sync.Once
	def     *Pool
)

// Default returns a process-wide pool of GOMAXPROCS (at first use)
// goroutines, for callers that were given no pool.
func Default() *Pool {
	defOnce.Do(func() { def = New(0) })
	return def
}
