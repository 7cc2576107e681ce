package tree

import (
	"sync"

	"github.com/vouchml/vouch/tensor"
)

// job computes blocks of lanes rows; each block's rows are computed with
// the same operations whichever worker runs it, and a row's result does
// not depend on the other rows of its block.
type job struct {
	e      *Ensemble
	c      *compiled // nil: the reference walk
	x      *tensor.Tensor
	stride int
	rows   int
	dbl    bool // compare and sum in float64
	label  *tensor.Tensor
	scores *tensor.Tensor
	mu     sync.Mutex
	err    error
}

func (j *job) firstErr() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// scratch is one block's working memory.
type scratch struct {
	x32    []float32
	x64    []float64
	keys   []int32
	leaves []int32
	acc32  []float32
	acc64  []float64
	z32    []float32
	z64    []float64
	has    []bool
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (j *job) Run(lo, hi int) {
	e := j.e
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)
	nf, nt := e.nfeat, e.Trees()
	s.leaves = grow(s.leaves, lanes*nt)
	s.has = grow(s.has, e.ntargets)
	for b := lo; b < hi; b++ {
		r0 := b * lanes
		nr := min(lanes, j.rows-r0)
		if j.dbl {
			j.walk(s, r0, nr)
			s.acc64 = grow(s.acc64, e.ntargets)
			s.z64 = grow(s.z64, e.ntargets)
			for r := 0; r < nr; r++ {
				finishRow(j, e.wv, s.leaves[r*nt:(r+1)*nt], s.acc64, s.has, s.z64, r0+r)
			}
			continue
		}
		if j.c != nil {
			c := j.c
			kf := c.nfeat // nf, or 1 for an ensemble of leaves only
			s.x32 = grow(s.x32, lanes*kf)
			s.keys = grow(s.keys, lanes*4*kf)
			clear(s.x32)
			for r := 0; r < nr; r++ {
				rowFloat32(j.x, (r0+r)*j.stride, s.x32[r*kf:r*kf+nf])
			}
			if nr == 1 {
				c.keys(s.x32[:kf], s.keys, 1)
			} else {
				for r := 0; r < lanes; r++ { // spare lanes repeat the last row
					c.keys(s.x32[min(r, nr-1)*kf:], s.keys[r:], lanes)
				}
			}
			if nr > 1 && e.single >= 0 {
				// One weight per leaf, all on one target: sum while walking.
				s.acc32 = grow(s.acc32, lanes*e.ntargets)
				s.z32 = grow(s.z32, e.ntargets)
				var sums [lanes]float32
				c.sumRows(e, s.keys, &sums)
				for r := 0; r < nr; r++ {
					acc := s.acc32[r*e.ntargets : (r+1)*e.ntargets]
					clear(acc)
					clear(s.has)
					acc[e.single], s.has[e.single] = sums[r], true
					finishSums(j, acc, s.has, s.z32, r0+r)
				}
				continue
			}
			if nr == 1 {
				c.leavesRow(e, s.keys, s.leaves)
			} else {
				c.leavesRows(e, s.keys, nr, s.leaves)
			}
		} else {
			j.walk(s, r0, nr)
		}
		s.acc32 = grow(s.acc32, e.ntargets)
		s.z32 = grow(s.z32, e.ntargets)
		for r := 0; r < nr; r++ {
			finishRow(j, e.wv32, s.leaves[r*nt:(r+1)*nt], s.acc32, s.has, s.z32, r0+r)
		}
	}
}

// walk reads rows r0 to r0+nr into s.x64 in the ensemble's precision and
// walks them the reference way, into s.leaves.
func (j *job) walk(s *scratch, r0, nr int) {
	e := j.e
	nf, nt := e.nfeat, e.Trees()
	s.x64 = grow(s.x64, nf)
	for r := 0; r < nr; r++ {
		rowFloat64(j.x, (r0+r)*j.stride, s.x64, j.dbl)
		for t := 0; t < nt; t++ {
			s.leaves[r*nt+t] = e.leafOf(t, s.x64)
		}
	}
}

// rowFloat32 reads the first len(dst) features of the row at offset off as
// float32 (integers rounded to nearest, as ONNX Runtime casts them).
func rowFloat32(x *tensor.Tensor, off int, dst []float32) {
	switch d := x.Data.(type) {
	case []float32:
		copy(dst, d[off:off+len(dst)])
	case []tensor.Half:
		for f := range dst {
			dst[f] = d[off+f].Float32()
		}
	case []int64:
		for f := range dst {
			dst[f] = float32(d[off+f])
		}
	case []int32:
		for f := range dst {
			dst[f] = float32(d[off+f])
		}
	case []float64:
		for f := range dst {
			dst[f] = float32(d[off+f])
		}
	}
}

// rowFloat64 reads a row in the ensemble's precision: doubles as they are
// when dbl, every other type as its float32 value.
func rowFloat64(x *tensor.Tensor, off int, dst []float64, dbl bool) {
	switch d := x.Data.(type) {
	case []float64:
		for f := range dst {
			dst[f] = d[off+f]
		}
		return
	case []int64:
		if dbl {
			for f := range dst {
				dst[f] = float64(d[off+f])
			}
			return
		}
	case []int32:
		if dbl {
			for f := range dst {
				dst[f] = float64(d[off+f])
			}
			return
		}
	}
	var buf [64]float32
	for f0 := 0; f0 < len(dst); f0 += len(buf) {
		n := min(len(buf), len(dst)-f0)
		rowFloat32(x, off+f0, buf[:n])
		for f := 0; f < n; f++ {
			dst[f0+f] = float64(buf[f])
		}
	}
}

// finishRow aggregates one row's leaves and writes its outputs.
func finishRow[A float32 | float64](j *job, w []A, leaves []int32, acc []A, has []bool, z []A, row int) {
	accumulate(j.e, w, leaves, acc, has)
	finishSums(j, acc, has, z, row)
}

// finishSums writes one row's outputs from its aggregated sums.
func finishSums[A float32 | float64](j *job, acc []A, has []bool, z []A, row int) {
	e := j.e
	finishAgg(e, acc)
	nt := e.ntargets
	if e.classifier {
		k := finishClass(e, acc, has, z)
		if j.label != nil {
			switch l := j.label.Data.(type) {
			case []int64:
				if e.labelsInt != nil {
					l[row] = e.labelsInt[k]
				} else {
					l[row] = int64(k)
				}
			case []string:
				l[row] = e.labelsStr[k]
			}
		}
	} else {
		copy(z, acc)
		transform(e.post, z)
	}
	if j.scores == nil {
		return
	}
	switch o := j.scores.Data.(type) {
	case []float32:
		for t, v := range z[:nt] {
			o[row*nt+t] = float32(v)
		}
	case []float64:
		for t, v := range z[:nt] {
			o[row*nt+t] = float64(v)
		}
	case []tensor.Half:
		for t, v := range z[:nt] {
			o[row*nt+t] = tensor.ToHalf(float32(v))
		}
	}
}
