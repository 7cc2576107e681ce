package elementwise

import (
	"sync"

	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// Parallel float32 elementwise layers. Each output element is one IEEE
// operation (or one function of vmath, whose vector lanes and scalar tail
// are twins) of the input elements at its own offsets, so cutting the
// output into ranges changes who computes an element, never how: the bits
// are the one-thread ones at any number of workers. Ranges start at
// multiples of elemChunk (whole vectors and cache lines).

// elemChunk is the granule of a split: the pool hands out ranges of whole
// chunks.
const elemChunk = 1024

// rows2Job runs rowsRange2 on chunks of the output.
type rows2Job struct {
	p       bplan
	d, a, b []float32
	row     rowFn[float32, float32, float32]
}

var rows2Jobs = sync.Pool{New: func() any { return new(rows2Job) }}

func (j *rows2Job) Run(lo, hi int) {
	rowsRange2(&j.p, j.d, j.a, j.b, j.row, lo*elemChunk, min(hi*elemChunk, j.p.n))
}

// splits reports whether a float32 layer of n output elements is split
// across pool's workers.
func splits(pool *parallel.Pool, n int) bool { return pool.Workers() >= 2 && n >= 2*elemChunk }

// arithRow32 returns the float32 row kernel of Add, Sub, Mul or Div, as
// arithIntoT picks it, and its work an element in multiply-adds (nil for
// another op).
func arithRow32(v vmath.Vec, op string) (rowFn[float32, float32, float32], int) {
	switch op {
	case "Add":
		return rowsFor(v, addRow[float32], addRowVec[float32]), 1
	case "Sub":
		return subRow[float32], 1
	case "Mul":
		return mulRow[float32], 1
	case "Div":
		return rowsFor(v, divRow[float32], divRowVec[float32]), 4
	}
	return nil, 0
}

// rows2Par is rows2 for float32 with the output split in chunks across
// pool's workers; cost is the work an element in multiply-adds, for the
// pool's threshold. (Float32 only, and not generic: a generic row kernel
// stored in the job would be a closure allocated per call.)
func rows2Par(pool *parallel.Pool, p *bplan, d, a, b []float32, row rowFn[float32, float32, float32], cost int) {
	j := rows2Jobs.Get().(*rows2Job)
	j.p, j.d, j.a, j.b, j.row = *p, d, a, b, row
	pool.Run((p.n+elemChunk-1)/elemChunk, cost*p.n, j)
	j.d, j.a, j.b, j.row = nil, nil, nil, nil
	rows2Jobs.Put(j)
}

// rowsRange2 computes the output elements [lo, hi) of rows2: the rows
// they fall in, the first and last cut to the range.
func rowsRange2[A, B, R any](p *bplan, d []R, a []A, b []B, row rowFn[A, B, R], lo, hi int) {
	if lo >= hi || p.inner == 0 {
		return
	}
	q, e := lo/p.inner, lo%p.inner
	var idx [maxRank]int
	oa, ob := 0, 0
	for k, rest := p.nd-1, q; k >= 0; k-- { // row q's index and offsets
		idx[k] = rest % p.dims[k]
		rest /= p.dims[k]
		oa += idx[k] * p.st[k][0]
		ob += idx[k] * p.st[k][1]
	}
	for pos := lo; pos < hi; {
		end := min(hi, pos-e+p.inner)
		row(d[pos:end], a[oa+e*p.in[0]:], b[ob+e*p.in[1]:], p.in[0], p.in[1])
		pos, e = end, 0
		for k := p.nd - 1; k >= 0; k-- {
			idx[k]++
			oa += p.st[k][0]
			ob += p.st[k][1]
			if idx[k] < p.dims[k] {
				break
			}
			oa -= p.st[k][0] * p.dims[k]
			ob -= p.st[k][1] * p.dims[k]
			idx[k] = 0
		}
	}
}

// unaryJob runs apply32 on chunks of a unary layer's output.
type unaryJob struct {
	v    vmath.Vec
	fns  floatFns
	d, x []float32
}

var unaryJobs = sync.Pool{New: func() any { return new(unaryJob) }}

func (j *unaryJob) Run(lo, hi int) {
	a, b := lo*elemChunk, min(hi*elemChunk, len(j.x))
	apply32(j.v, j.fns, j.d[a:b], j.x[a:b])
}

// apply32Par is apply32 with the output split across pool's workers; cost
// is the work an element in multiply-adds.
func apply32Par(pool *parallel.Pool, v vmath.Vec, fns floatFns, d, x []float32, cost int) {
	if !splits(pool, len(x)) {
		apply32(v, fns, d, x)
		return
	}
	j := unaryJobs.Get().(*unaryJob)
	j.v, j.fns, j.d, j.x = v, fns, d, x
	pool.Run((len(x)+elemChunk-1)/elemChunk, cost*len(x), j)
	j.fns, j.d, j.x = floatFns{}, nil, nil
	unaryJobs.Put(j)
}
