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
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// spin is how long an idle worker polls for the next range, and how long
// Run polls for its workers to finish, before blocking. Waking a parked
// goroutine costs tens of microseconds on a virtual machine (a futex round
// trip to an idle OS thread), as much as a small layer takes; layers run
// back to back, so a short poll catches the next range almost always. It
// changes who waits how, never what is computed.
const spin = 200 * time.Microsecond

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
	t       Task
	lo, hi  int
	wg      *sync.WaitGroup
	pending *atomic.Int32 // ranges of the call not yet finished
	failed  *atomic.Pointer[Panic]
	done    chan struct{}
}

// region is one Run call's completion state, reused across calls.
type region struct {
	wg      sync.WaitGroup
	pending atomic.Int32
	failed  atomic.Pointer[Panic]
	done    chan struct{} // a token once pending reaches 0 (buffered 1)
}

// Panic is what Run panics with when a task panicked on a worker: the
// worker's panic value and stack. Carried to Run's caller, it can be
// recovered there (exec turns it into the run's error) instead of killing
// the process from a goroutine no one can recover.
type Panic struct {
	Value any
	Stack []byte
}

func (p *Panic) String() string { return fmt.Sprintf("%v (on a worker)\n%s", p.Value, p.Stack) }

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
	p.wgs.New = func() any { return &region{done: make(chan struct{}, 1)} }
	for i := 1; i < n; i++ {
		go p.work()
	}
	return p
}

func (p *Pool) work() {
	for {
		j, ok := p.next()
		if !ok {
			return
		}
		runJob(j)
	}
}

func runJob(j job) {
	defer func() {
		if r := recover(); r != nil {
			j.failed.CompareAndSwap(nil, &Panic{Value: r, Stack: debug.Stack()})
		}
		// Done before the count: Run's caller, seeing the count reach
		// zero, finds the WaitGroup already done and never parks.
		j.wg.Done()
		if j.pending.Add(-1) == 0 {
			select { // wake a caller parked on done (a stale token is harmless)
			case j.done <- struct{}{}:
			default:
			}
		}
	}()
	j.t.Run(j.lo, j.hi)
}

// next returns the next range, polling for up to spin before blocking;
// ok is false once the pool is closed.
func (p *Pool) next() (job, bool) {
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case j, ok := <-p.jobs:
			return j, ok
		default:
		}
		if i&63 == 63 && time.Since(start) > spin {
			j, ok := <-p.jobs
			return j, ok
		}
		runtime.Gosched()
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
//
// Run may be called from inside a task (a fused layer whose rows run an
// operator that splits its own output): while its ranges are pending, the
// caller runs ranges from the pool's queue, its own or any other call's,
// so a worker waiting in a nested Run never waits on ranges that only it
// could run; a range that finds the queue full runs on the caller.
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
	r := p.wgs.Get().(*region)
	r.wg.Add(w - 1)
	r.pending.Store(int32(w - 1))
	for i := 1; i < w; i++ {
		j := job{t: t, lo: i * n / w, hi: (i + 1) * n / w, wg: &r.wg, pending: &r.pending, failed: &r.failed, done: r.done}
		select {
		case p.jobs <- j:
		default:
			runJob(j)
		}
	}
	t.Run(0, n/w)
	// Help with queued ranges while ours are pending: poll for a while,
	// then park until a range is queued or ours are done.
	start := time.Now()
	for i := 0; r.pending.Load() > 0; i++ {
		select {
		case j, ok := <-p.jobs:
			if ok {
				runJob(j)
			}
			continue
		default:
		}
		if i&63 == 63 && time.Since(start) > spin {
			select {
			case j, ok := <-p.jobs:
				if ok {
					runJob(j)
				}
			case <-r.done:
			}
			continue
		}
		runtime.Gosched()
	}
	r.wg.Wait()
	select { // a token left by the last range
	case <-r.done:
	default:
	}
	if f := r.failed.Swap(nil); f != nil {
		p.wgs.Put(r)
		panic(f)
	}
	p.wgs.Put(r)
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
