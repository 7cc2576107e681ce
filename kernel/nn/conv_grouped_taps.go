package nn

import (
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// A grouped float32 convolution whose groups have fewer than 16 output
// channels (ResNeXt-50's 4 and 8, RegNetY's 8), on AVX-512 or AVX2+FMA,
// runs each output channel as one amd64.DwTapsZ (AVX2: DwTapsMA, four
// channels from each tap's loads, and DwTapsA for the rest; the same
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
	rows              int // output rows a band
}

// groupTapsBand is about how many outputs (flat, Wq a row) a band of
// groupTaps computes for every output channel of its group before the
// next band: the band's taps over the group's Cg input planes (for
// RegNetY's 8, about 20 KiB) stay in L1 across the Mg channels, where
// whole planes (100 KiB at 56x56) were read again from L2 for each.
const groupTapsBand = 512

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
	// 16 more: a band's run of outputs, rounded up to whole vectors
	// from its own start, may pass n16 by up to 15.
	t.bufLen = (s.Cg-1)*t.chs + d.bufLen + 16
	t.rows = max(1, groupTapsBand/d.Wq)
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
	ldo := (t.rows*d.Wq + 15) &^ 15 // the most outputs of a band
	buf, out := getF32(t.bufLen), getF32(4*ldo)
	clear((*buf)[:t.bufLen]) // the padding stays zero: only input elements are written
	for u := lo; u < hi; u++ {
		ni, gi := u/s.G, u%s.G
		for c := 0; c < s.Cg; c++ {
			ch := ni*s.C + gi*s.Cg + c
			d.fill((*buf)[c*t.chs:], j.x[ch*t.inSz:(ch+1)*t.inSz], j.z)
		}
		// Output rows [r0, r1) of every channel of the group, then the
		// next band: each output's chain is the same whichever band,
		// run of vectors or kernel computes it.
		for r0 := 0; r0 < d.OH; r0 += t.rows {
			r1 := min(d.OH, r0+t.rows)
			q0, n := r0*d.Wq, ((r1-r0)*d.Wq+15)&^15
			_ = (*buf)[q0+n-1]
			for m := gi * s.Mg; m < (gi+1)*s.Mg; {
				k := 1 // channels computed
				switch {
				case j.z:
					amd64.DwTapsZ(n, t.K, &t.offs[0], &j.w[m*t.K], &(*buf)[q0], &(*out)[0])
				case m+4 <= (gi+1)*s.Mg:
					// AVX2: four channels from each tap's loads.
					amd64.DwTapsMA(n, t.K, &t.offs[0], &j.w[m*t.K], t.K, &(*buf)[q0], &(*out)[0], ldo)
					k = 4
				default:
					amd64.DwTapsA(n, t.K, &t.offs[0], &j.w[m*t.K], &(*buf)[q0], &(*out)[0])
				}
				for c := 0; c < k; c++ {
					ym := j.y[(ni*s.M+m+c)*t.P : (ni*s.M+m+c+1)*t.P]
					oc := (*out)[c*ldo:]
					if j.z {
						for oy := r0; oy < r1; oy++ {
							copy(ym[oy*d.OW:(oy+1)*d.OW], oc[(oy-r0)*d.Wq:])
						}
						continue
					}
					// AVX2: the band's rows in one call (its stores past
					// a row fall on the next rows, stored after).
					yb := ym[r0*d.OW : r1*d.OW]
					_ = oc[(r1-r0-1)*d.Wq+d.OW-1]
					amd64.CopyRowsA(&oc[0], d.OW, r1-r0, d.Wq, &yb[0], d.OW)
				}
				m += k
			}
		}
	}
	putF32(out)
	putF32(buf)
}
