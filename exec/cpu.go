package exec

import (
	"fmt"
	"sync"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

// CPU is how the CPU backend runs kernels: the instruction set they may
// use and the workers they split their outputs over. Like every run
// option it never changes an output's bits (each vectorised kernel has a
// portable twin with the same operations, and threads split outputs,
// never a reduction); it is a speed and test knob, and the way to prove
// that a plan replays on a CPU without AVX2 or AVX-512 (ISA:
// kernel.ISAPortable). The zero value runs at the CPU's best level on a
// process-wide pool of GOMAXPROCS workers. A device backend (exec/backend*)
// has its own options beside it; CPU is what the kernels of kernel/...
// receive, through kernel.Ctx, wherever they run.
type CPU struct {
	// ISA caps the instruction set (kernel.ISABest, the zero value: the
	// CPU's best). A level above the CPU's runs at the CPU's.
	ISA kernel.ISA
	// Threads is how many goroutines one kernel may use: 0 means
	// GOMAXPROCS (the process-wide pool), 1 runs every kernel on the
	// caller. Ignored when Pool is set.
	Threads int
	// Pool, when set, is the worker pool (shared with other engines);
	// the caller owns and closes it.
	Pool *parallel.Pool
}

func (c CPU) valid() error {
	if c.ISA > kernel.ISAAVX512 {
		return fmt.Errorf("exec: unknown instruction set %v", c.ISA)
	}
	if c.Threads < 0 {
		return fmt.Errorf("exec: negative thread count %d", c.Threads)
	}
	return nil
}

// SetCPU sets how the executor's kernels run (see CPU). It must not be
// called while the executor runs; Bounds bound before keep their CPU.
func (e *Executor) SetCPU(c CPU) error {
	if err := c.valid(); err != nil {
		return err
	}
	e.cpu = c
	return nil
}

// CPU returns the executor's CPU options.
func (e *Executor) CPU() CPU { return e.cpu }

// kernelCtx returns the kernel context of e's CPU options.
func (e *Executor) kernelCtx() kernel.Ctx {
	return kernel.Ctx{ISA: e.cpu.ISA, Pool: e.cpu.pool()}
}

// pool returns the worker pool for c: its Pool, none for one thread, or
// the shared pool of that many workers.
func (c CPU) pool() *parallel.Pool {
	switch {
	case c.Pool != nil:
		return c.Pool
	case c.Threads == 1:
		return nil
	case c.Threads == 0:
		return parallel.Default()
	}
	return sharedPool(c.Threads)
}

// sharedPools holds one pool per thread count asked for, started on first
// use and kept for the process's life (as parallel.Default is): engines
// have no Close, and a pool per engine would leak its workers.
var sharedPools sync.Map // int -> *parallel.Pool

func sharedPool(n int) *parallel.Pool {
	if p, ok := sharedPools.Load(n); ok {
		return p.(*parallel.Pool)
	}
	p := parallel.New(n)
	if old, loaded := sharedPools.LoadOrStore(n, p); loaded {
		p.Close()
		return old.(*parallel.Pool)
	}
	return p
}
