package q8

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

// at returns the twins of level l.
func at(l kernel.ISA) twins { return twinsOf(&kernel.Ctx{ISA: l}) }

// best and portable are the twins of this CPU's best level and of the
// portable one.
var best, portableTwins = at(kernel.ISABest), at(kernel.ISAPortable)
