package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
)

// layerNormMinSplit is the element count from which layerNorm32Par splits
// its rows over the workers; a smaller layer (tiny_bert's 64x128) stays on
// the caller, where waking a worker costs more than half the rows save.
const layerNormMinSplit = 32 << 10

// layerNormJob runs layerNorm32 on groups of eight rows: range [lo, hi)
// is rows [8lo, 8hi), so every row's statistics run in the same group of
// eight (with the same operations) as in one call over all rows, whatever
// the workers. Each row reads only its own elements and the shared scale
// and bias, so an in-place LayerNorm splits as safely.
type layerNormJob struct {
	v            vmath.Vec
	x, sc, b     []float32
	si, bi       []int
	D, R         int
	eps          float32
	y, mean, inv []float32
}

var layerNormJobs = sync.Pool{New: func() any { return new(layerNormJob) }}

func (j *layerNormJob) Run(lo, hi int) {
	r0, r1 := 8*lo, min(8*hi, j.R)
	var m, iv []float32
	if j.mean != nil {
		m, iv = j.mean[r0:r1], j.inv[r0:r1]
	}
	layerNorm32(j.v, j.x[r0*j.D:r1*j.D], j.sc, j.b, j.si, j.bi, j.D, j.eps, j.y[r0*j.D:r1*j.D], m, iv)
}

// layerNorm32Par is layerNorm32 with the rows split across pool's workers
// in groups of eight when the layer holds at least layerNormMinSplit
// elements; the bits are layerNorm32's at any worker count. The work
// counted is six operations an element (the sum, the squared deviation's
// subtraction and FMA, the affine's subtraction, multiplications and
// addition).
func layerNorm32Par(pool *parallel.Pool, v vmath.Vec, x, scale, bias []float32, si, bi []int, D int, eps float32, y, mean, inv []float32) {
	R := len(x) / max(D, 1)
	if pool.Workers() < 2 || len(x) < layerNormMinSplit || R < 16 {
		layerNorm32(v, x, scale, bias, si, bi, D, eps, y, mean, inv)
		return
	}
	j := layerNormJobs.Get().(*layerNormJob)
	*j = layerNormJob{v: v, x: x, sc: scale, b: bias, si: si, bi: bi, D: D, R: R, eps: eps, y: y, mean: mean, inv: inv}
	pool.Run((R+7)/8, 6*len(x), j)
	*j = layerNormJob{}
	layerNormJobs.Put(j)
}
