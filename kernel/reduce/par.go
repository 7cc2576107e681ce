package reduce

import (
	"sync"

	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// softmaxJob runs softmaxLines32 on groups of four lines: range [lo, hi)
// is lines [4lo, 4hi), so each line is computed in the same group of four
// (with the same operations) as in one call over all lines, whatever the
// workers. Each line reads only its own elements, so an in-place Softmax
// splits as safely.
type softmaxJob struct {
	v          vmath.Vec
	k          smKind
	x, y       []float32
	size, rows int
}

var softmaxJobs = sync.Pool{New: func() any { return new(softmaxJob) }}

func (j *softmaxJob) Run(lo, hi int) {
	softmaxLines32(j.v, j.k, j.x, j.y, j.size, 4*lo, min(4*hi, j.rows))
}

// softmaxPar is softmaxFloat for float32 over the last axis with the lines
// split across pool's workers (an attention block's Softmax over
// heads×queries lines of keys). The work counted is ten operations an
// element (exp's polynomial, the max, the sum and the division).
func softmaxPar(pool *parallel.Pool, v vmath.Vec, k smKind, x, y []float32, g geom) {
	if pool.Workers() < 2 || g.inner != 1 || k == hardmaxKind || g.outer < 8 {
		softmaxFloat(v, k, x, y, g, f32)
		return
	}
	j := softmaxJobs.Get().(*softmaxJob)
	*j = softmaxJob{v: v, k: k, x: x, y: y, size: g.size, rows: g.outer}
	pool.Run((g.outer+3)/4, 10*g.outer*g.size, j)
	*j = softmaxJob{}
	softmaxJobs.Put(j)
}
