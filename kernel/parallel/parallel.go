// Package parallel is vouch's persistent worker pool: kernels split their
// outputs into contiguous ranges and run the ranges on long-lived workers,
// so that no goroutine is started per layer or per request.
//
// The pool decides only who computes a range, never what is computed: a
// kernel MUST produce each output with the same operations whatever range
// it falls in, so that results do not depend on the number of workers
// (DESIGN.md: threads partition outputs, never a reduction). Where a
// range's boundaries fall is a function of (n, Workers()) alone, never of
// timing; which goroutine runs it is decided at run time.
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
// Run polls for its ranges to finish, before blocking. Waking a parked
// goroutine costs tens of microseconds on a virtual machine (a futex round
// trip to an idle OS thread: 28-47 µs for a 10 µs task on the 2-core VM,
// BenchmarkHandoff), as much as a small layer takes; layers run back to
// back, so a short poll catches the next range almost always. holdSpin is
// the poll while a caller holds the pool (Hold: a plan's run is under way),
// long enough to span the layers a plan runs on one thread between two
// split ones. Both change who waits how, never what is computed.
const (
	spin     = 200 * time.Microsecond
	holdSpin = 2 * time.Millisecond
)

// chunksPer is how many chunks each of a call's shares is cut into: a
// worker that finishes its share takes the chunks another has not started
// (one whose OS thread was descheduled on a shared machine, or that was
// still waking), so a late worker delays a call by at most one chunk.
const chunksPer = 4

// Task is a unit of divisible work: Run computes the items [lo, hi).
// Run MUST be safe to call concurrently on disjoint ranges.
type Task interface {
	Run(lo, hi int)
}

// Func adapts a function to Task.
type Func func(lo, hi int)

// Run implements Task.
func (f Func) Run(lo, hi int) { f(lo, hi) }

// job invites a worker to a Run call: work on share first, then on the
// others' chunks. It carries the call's parameters itself, and gen, the
// call's generation of r: a job taken after its call ended finds r's slots
// at another generation and does nothing.
type job struct {
	r            *region
	t            Task
	n, w, chunks int
	gen          uint32
	share        int
}

// region is one Run call's completion state, reused across calls (gen
// tells them apart). Share i covers chunks [i*chunks/w, (i+1)*chunks/w);
// its slot holds gen<<32 | the next unclaimed chunk of the share.
type region struct {
	gen    uint32 // the last call's generation (read and written by its caller only)
	slots  []atomic.Uint64
	left   atomic.Int32 // chunks of the call not yet finished
	failed atomic.Pointer[Panic]
	done   chan struct{} // a token once left reaches 0 (buffered 1)
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
	regions sync.Pool
	holds   atomic.Int32  // Hold calls not yet released
	wake    chan struct{} // Hold's nudge to parked workers
}

// New starts a pool that runs a task on up to n goroutines: the caller
// and n-1 workers. n < 1 means runtime.GOMAXPROCS(0).
func New(n int) *Pool {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{workers: n, jobs: make(chan job, 4*n), wake: make(chan struct{}, n)}
	p.regions.New = func() any {
		return &region{done: make(chan struct{}, 1), slots: make([]atomic.Uint64, n)}
	}
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
		j.help()
	}
}

// help runs chunks of j's call, its own share first and then the
// others', until none is left unclaimed.
func (j *job) help() {
	r := j.r
	for k := 0; k < j.w; k++ {
		i := (j.share + k) % j.w
		end := uint64(j.gen)<<32 | uint64((i+1)*j.chunks/j.w)
		for {
			s := r.slots[i].Load()
			if s>>32 != uint64(j.gen) || s >= end {
				break
			}
			if r.slots[i].CompareAndSwap(s, s+1) {
				c := int(uint32(s))
				r.run(j.t, c*j.n/j.chunks, (c+1)*j.n/j.chunks)
			}
		}
	}
}

// run runs one claimed chunk and counts it done; the region cannot be
// reused before this returns (its call waits for left to reach 0).
func (r *region) run(t Task, lo, hi int) {
	defer func() {
		if v := recover(); v != nil {
			pv, ok := v.(*Panic) // a nested Run's worker panic keeps its stack
			if !ok {
				pv = &Panic{Value: v, Stack: debug.Stack()}
			}
			r.failed.CompareAndSwap(nil, pv)
		}
		if r.left.Add(-1) == 0 {
			select { // wake a caller parked on done (a stale token is harmless)
			case r.done <- struct{}{}:
			default:
			}
		}
	}()
	t.Run(lo, hi)
}

// next returns the next job, polling for up to spin (holdSpin while the
// pool is held) before blocking; ok is false once the pool is closed.
func (p *Pool) next() (job, bool) {
	start := time.Now()
	polite := false
	for i := 0; ; i++ {
		select {
		case j, ok := <-p.jobs:
			return j, ok
		default:
		}
		if i&63 == 63 {
			since := time.Since(start)
			held := p.holds.Load() > 0
			if since > holdSpin || since > spin && !held {
				select {
				case j, ok := <-p.jobs:
					return j, ok
				case <-p.wake:
					start, i = time.Now(), 0
					continue
				}
			}
			// Past spin (held), poll between OS yields: on a machine whose
			// cores are all busy, a polling worker must not take a core
			// from the caller or from other processes.
			polite = since > spin
		}
		if polite {
			osYield()
		} else {
			runtime.Gosched()
		}
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

// Hold tells the pool that calls to Run are coming (a plan's run has
// started): parked workers are woken now, so that their wake-up overlaps
// the caller's work instead of delaying the first split layer, and idle
// workers keep polling for up to holdSpin instead of spin until every
// Hold is released. Each Hold MUST be followed by one Release. It changes
// who waits how, never what is computed.
func (p *Pool) Hold() {
	if p == nil || p.workers < 2 {
		return
	}
	if p.holds.Add(1) == 1 {
		for i := 1; i < p.workers; i++ {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
}

// Release ends a Hold.
func (p *Pool) Release() {
	if p == nil || p.workers < 2 {
		return
	}
	p.holds.Add(-1)
}

// MinWorth is the work (in multiply-adds, or the kernel's own unit of
// comparable cost) below which Run runs a task on its caller: handing a
// range to a polling worker costs about a microsecond, a parked one tens.
const MinWorth = 1 << 15

// Run splits [0, n) into Workers() shares of nearly equal size, each cut
// into chunks, and runs t on every chunk: the caller starts on the first
// share and each worker on its own, and whoever finishes its share takes
// the chunks not yet started in the others. It returns when all are done.
// The chunks' boundaries depend only on n and Workers(). Worth is the work
// in multiply-adds: below MinWorth everything runs on the caller, where
// starting workers would cost more than it saves.
//
// Run may be called from inside a task (a fused layer whose rows run an
// operator that splits its own output): while its chunks are pending, the
// caller runs jobs from the pool's queue, its own call's or any other's,
// so a worker waiting in a nested Run never waits on work that only it
// could run; a job that finds the queue full is left to the caller.
func (p *Pool) Run(n, worth int, t Task) {
	w := p.Workers()
	if n <= 0 {
		return
	}
	if w < 2 || n < 2 || worth < MinWorth {
		t.Run(0, n)
		return
	}
	w = min(w, n)
	r := p.regions.Get().(*region)
	r.gen++
	chunks := min(n, w*chunksPer)
	r.left.Store(int32(chunks))
	for i := 0; i < w; i++ {
		r.slots[i].Store(uint64(r.gen)<<32 | uint64(i*chunks/w))
	}
	own := job{r: r, t: t, n: n, w: w, chunks: chunks, gen: r.gen}
	for i := 1; i < w; i++ {
		j := own
		j.share = i
		select {
		case p.jobs <- j:
		default:
		}
	}
	own.help()
	// Help with queued jobs while chunks are pending (a worker may be in
	// the middle of one): poll for a while, then park until a job is
	// queued or the chunks are done.
	start := time.Now()
	for i := 0; r.left.Load() > 0; i++ {
		select {
		case j, ok := <-p.jobs:
			if ok {
				j.help()
			}
			continue
		default:
		}
		if i&63 == 63 && time.Since(start) > spin {
			select {
			case j, ok := <-p.jobs:
				if ok {
					j.help()
				}
			case <-r.done:
			}
			continue
		}
		runtime.Gosched()
	}
	select { // a token left by the last chunk
	case <-r.done:
	default:
	}
	f := r.failed.Swap(nil)
	p.regions.Put(r)
	if f != nil {
		panic(f)
	}
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
