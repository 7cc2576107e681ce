package nn

import (
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

// ctxAt returns a Ctx that runs at level l on pool p and, when f is not
// nil, forces f's choices: how the tests pick a twin, instead of package
// switches, so that they may run in parallel.
func ctxAt(p *parallel.Pool, l kernel.ISA, f *forced) *kernel.Ctx {
	c := &kernel.Ctx{Pool: p, ISA: l}
	if f != nil {
		c.Test = f
	}
	return c
}

// mach is the machine of ctxAt(p, l, f), for the package's internal
// functions.
func mach(p *parallel.Pool, l kernel.ISA, f *forced) machine { return machineOf(ctxAt(p, l, f)) }

// fastOK reports whether the CPU has the AVX2+FMA kernels.
func fastOK() bool { return machineOf(nil).fast }

// vectorLevels are the levels above portable that this CPU runs (AVX2,
// and AVX-512 where it has it): the vector twins a test compares.
func vectorLevels() []kernel.ISA { return kernel.ISAs()[1:] }
