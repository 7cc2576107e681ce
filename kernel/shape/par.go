package shape

import (
	"sync"

	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// Parallel float32 copies. A Transpose, Slice or Concat moves each element
// to one place whatever splits the work, so the workers' ranges change who
// copies, never what: the bits are those of the one-thread copy. At two
// threads a copy run on one core also reads the half of its input that
// the other core's layer wrote (from that core's cache), so a copy left
// on the caller ran slower at two threads than at one (shufflenet_v2's
// channel shuffles: 16 µs -> 19-22 µs); split, each half runs at the
// one-thread speed or better.
//
// The work is in elements: parallel.Pool.Run keeps a copy of fewer than
// its threshold (32K elements, ~10 µs) on the caller.

// copyChunk is the granule of a split flat copy: ranges start at
// multiples of it (whole cache lines, and few ranges to hand out).
const copyChunk = 2048

// stridedJob runs stridedF32 on a range of the output's first
// (simplified) dimension.
type stridedJob struct {
	d, s   []float32
	base   int
	inner  int // output elements per index of the first dimension
	sh, ss [maxRank]int
	r      int
}

var stridedJobs = sync.Pool{New: func() any { return new(stridedJob) }}

func (j *stridedJob) Run(lo, hi int) {
	sub := j.sh // a copy: each range has its own first dimension
	sub[0] = hi - lo
	stridedF32(j.d[lo*j.inner:hi*j.inner], j.s, sub[:j.r], j.ss[:j.r], j.base+lo*j.ss[0])
}

// stridedPar is stridedF32 with the output's first dimension (after
// simplify) split across pool's workers.
func stridedPar(pool *parallel.Pool, d, s []float32, shape, st []int, base int) {
	if pool.Workers() < 2 || len(d) < 2*copyChunk || len(shape) > maxRank {
		stridedF32(d, s, shape, st, base)
		return
	}
	j := stridedJobs.Get().(*stridedJob)
	j.r = simplify(shape, st, &j.sh, &j.ss)
	if j.r == 0 || j.sh[0] < 2 {
		stridedJobs.Put(j)
		stridedF32(d, s, shape, st, base)
		return
	}
	j.d, j.s, j.base = d, s, base
	j.inner = len(d) / j.sh[0]
	pool.Run(j.sh[0], len(d), j)
	j.d, j.s = nil, nil
	stridedJobs.Put(j)
}

// concatJob runs concatRange on chunks of the output.
type concatJob struct {
	d                  []float32
	in                 []*tensor.Tensor
	outer, inner, axis int
}

var concatJobs = sync.Pool{New: func() any { return new(concatJob) }}

func (j *concatJob) Run(lo, hi int) {
	concatRange(j.d, j.in, j.outer, j.inner, j.axis, lo*copyChunk, min(hi*copyChunk, len(j.d)))
}

// concatPar is concatT for float32 with the output split into chunks
// across pool's workers.
func concatPar(pool *parallel.Pool, d []float32, in []*tensor.Tensor, outer, inner, axis int) {
	if pool.Workers() < 2 || len(d) < 2*copyChunk {
		concatT(d, in, outer, inner, axis)
		return
	}
	j := concatJobs.Get().(*concatJob)
	j.d, j.in, j.outer, j.inner, j.axis = d, in, outer, inner, axis
	pool.Run((len(d)+copyChunk-1)/copyChunk, len(d), j)
	j.d, j.in = nil, nil
	concatJobs.Put(j)
}

// concatRange writes the output elements [lo, hi) of concatT: each
// input's block of each outer row, cut to the range.
func concatRange(d []float32, in []*tensor.Tensor, outer, inner, axis, lo, hi int) {
	if outer == 0 || lo >= hi {
		return
	}
	rowOut := len(d) / outer
	for o := lo / rowOut; o < outer && o*rowOut < hi; o++ {
		off := o * rowOut
		for _, x := range in {
			blk := x.Shape[axis] * inner
			a, b := max(off, lo), min(off+blk, hi)
			if a < b {
				s := x.Data.([]float32)
				src := o*blk + a - off
				copy(d[a:b], s[src:src+b-a])
			}
			off += blk
		}
	}
}
