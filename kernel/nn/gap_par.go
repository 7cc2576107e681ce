package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// gapJob runs globalAvgRows32 on groups of eight channels: range [lo, hi)
// is channels [8lo, 8hi).
type gapJob struct {
	v    vmath.Vec
	x, y []float32
	S    int
}

var gapJobs = sync.Pool{New: func() any { return new(gapJob) }}

func (j *gapJob) Run(lo, hi int) {
	c0, c1 := 8*lo, min(8*hi, len(j.y))
	globalAvgRows32(j.v, j.x[c0*j.S:c1*j.S], j.S, j.y[c0:c1])
}

// globalAvgRows32 sets y[c] to channel c's sequential sum divided by S, as
// globalPoolInto does: vmath's SumRows32 runs each channel's chain
// (s += v in element order, from 0) in its own vector lane, eight channels
// at a time, with the same additions in the same order.
func globalAvgRows32(v vmath.Vec, x []float32, S int, y []float32) {
	v.SumRows32(y, x, S)
	n := float32(S)
	for c := range y {
		y[c] /= n
	}
}

// globalPool32 is globalPoolInto for float32 under c: a GlobalAveragePool
// runs on c's vector level with its channels split over c's workers in
// groups of eight; the bits are globalPoolInto's (each channel's chain is
// the same whatever the split). GlobalMaxPool, and a pool over empty
// planes, run globalPoolInto.
func globalPool32(c *kernel.Ctx, x []float32, S int, isMax bool, y []float32) {
	if isMax || S == 0 {
		globalPoolInto(x, S, isMax, y)
		return
	}
	pool := c.Workers()
	if pool.Workers() < 2 || len(y) < 16 {
		globalAvgRows32(c.Vec(), x, S, y)
		return
	}
	j := gapJobs.Get().(*gapJob)
	*j = gapJob{v: c.Vec(), x: x, y: y, S: S}
	pool.Run((len(y)+7)/8, len(x), j)
	*j = gapJob{}
	gapJobs.Put(j)
}
