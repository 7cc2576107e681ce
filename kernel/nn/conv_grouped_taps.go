package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// A grouped float32 convolution whose groups have fewer than 16 output
// channels (ResNeXt-50's 4 and 8, RegNetY's 8), on AVX-512 or AVX2+FMA,
// runs each output channel as one amd64.DwTapsZ (AVX2: DwTapsA, the same
// chains) over its group's input planes laid out as dwAny lays out a
// depthwise plane (zero-padded phase planes, one after another per input
// channel): the taps (c, ky, kx) in the im2col
// matrix's order, each one contiguous load at a fixed offset, so each
// output is the im2col GEMM's chain from +0 with the padding taps as
// FMA(0, w, acc), canon (NaN as 0x7fc00000) like the GEMM's store; the
// bias and the epilogue are convF32's, after. The per-group GEMM packed
// its im2col panels for only 4-8 rows of weights (20 GFLOP/s on
// AVX-512; 6-13 GFLOP/s on AVX2, regnet_y_400mf's b.0 layers).

// groupTapsOK reports whether convF32 runs s through groupTaps on pool.
func groupTapsOK(pool machine, s *convSetup) bool {
	nd := len(s.g.in)
	return (pool.z || pool.fast) && s.G > 1 && s.Mg < 16 && !(s.Cg == 1 && s.Mg == 1) && (nd == 1 || nd == 2) &&
		prod(s.g.out) > 0 && s.Cg*prod(s.g.k) < 1<<16
}

// groupTapsGeom is groupTaps' layout of one convolution: built once per
// setup (kept in it), so that a bound plan's calls allocate nothing.
type groupTapsGeom struct {
	d                 *dwAnyGeom
	offs              []int32 // the K taps' offsets into the group's planes
	K, chs, bufLen, P int
	inSz              int
}

func (s *convSetup) groupTapsGeom() *groupTapsGeom {
	if t := s.taps.Load(); t != nil {
		return t
	}
	d := newDwAnyGeom(s.g)
	kn := len(d.offs)
	t := &groupTapsGeom{d: d, K: s.Cg * kn, chs: d.sh * d.sw * d.plane, P: prod(s.g.out), inSz: prod(s.g.in)}
	t.offs = make([]int32, t.K)
	for c := 0; c < s.Cg; c++ {
		for i, o := range d.offs {
			t.offs[c*kn+i] = int32(c*t.chs) + o
		}
	}
	t.bufLen = (s.Cg-1)*t.chs + d.bufLen
	s.taps.CompareAndSwap(nil, t)
	return s.taps.Load()
}

// groupTapsJob is one call's work: units (image, group) pairs.
type groupTapsJob struct {
	s       *convSetup
	t       *groupTapsGeom
	x, w, y []float32
	z       bool // AVX-512 (DwTapsZ); else AVX2 (DwTapsA)
}

var groupTapsJobs = sync.Pool{New: func() any { return new(groupTapsJob) }}

// groupTaps computes the chains of s into y (groupTapsOK must hold).
func groupTaps(pool machine, s *convSetup, x, w, y []float32) {
	t := s.groupTapsGeom()
	j := groupTapsJobs.Get().(*groupTapsJob)
	*j = groupTapsJob{s: s, t: t, x: x, w: w, y: y, z: pool.z}
	pool.Run(s.N*s.G, s.N*s.M*t.P*t.K, j)
	*j = groupTapsJob{}
	groupTapsJobs.Put(j)
}

func (j *groupTapsJob) Run(lo, hi int) {
	s, t, d := j.s, j.t, j.t.d
	buf, out := getF32(t.bufLen), getF32(d.n16)
	clear((*buf)[:t.bufLen]) // the padding stays zero: only input elements are written
	for u := lo; u < hi; u++ {
		ni, gi := u/s.G, u%s.G
		for c := 0; c < s.Cg; c++ {
			ch := ni*s.C + gi*s.Cg + c
			d.fill((*buf)[c*t.chs:], j.x[ch*t.inSz:(ch+1)*t.inSz], j.z)
		}
		for m := gi * s.Mg; m < (gi+1)*s.Mg; m++ {
			if j.z {
				amd64.DwTapsZ(d.n16, t.K, &t.offs[0], &j.w[m*t.K], &(*buf)[0], &(*out)[0])
			} else {
				amd64.DwTapsA(d.n16, t.K, &t.offs[0], &j.w[m*t.K], &(*buf)[0], &(*out)[0])
			}
			ym := j.y[(ni*s.M+m)*t.P : (ni*s.M+m+1)*t.P]
			for oy := 0; oy < d.OH; oy++ {
				copy(ym[oy*d.OW:(oy+1)*d.OW], (*out)[oy*d.Wq:])
			}
		}
	}
	putF32(out)
	putF32(buf)
}
