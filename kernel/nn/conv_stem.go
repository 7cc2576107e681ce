package nn

import (
	"math"
	"sync"

	"github.com/vouchml/vouch/kernel/amd64"
)

// A dense float32 2-D convolution with few taps an output (C*kh*kw of at
// most stemMaxK) into at most stemMaxM output channels (the 3->16 3x3/2
// stems of MobileNetV3 and LRASPP) runs on AVX2+FMA without AVX-512 as
// groupTaps runs a group: the input planes laid out once per image as
// dwAny lays out a depthwise plane (zero-padded phase planes, one after
// another per input channel; groupTapsGeom), then each band of output rows
// of every output channel as amd64.DwTapsMA (four channels from each tap's
// loads; DwTapsA for the last ones), whose taps (c, ky, kx) are the im2col
// matrix's rows in order, each one contiguous load at a fixed offset: each
// output is the im2col GEMM's chain from +0 with the padding taps as
// FMA(0, w, acc), canon (NaN as 0x7fc00000) as the GEMM stores it. The
// band's outputs are then stored with the bias and the clamp
// (amd64.DwStoreA: canon(acc) + bias, then the clamp, convF32's addBias
// and ep.all's clamp), and the activation runs over the band while it is
// in cache; with a residual the whole epilogue runs over y after. The
// im2col GEMM (the portable twin, convGEMMF32) wrote a 27-row im2col
// matrix of the whole output plane and packed it; the bands run in
// parallel (see stemMaxM for where this wins).

// stemMaxK is the most taps an output (C*kh*kw) convStem takes.
const stemMaxK = 32

// stemMaxM is the most output channels convStem takes: on the AVX2 host,
// thread CPU time, one worker (BenchmarkConvStem3, medians of 4 runs
// alternating with the im2col GEMM), the 3->16 3x3/2 stem of the
// MobileNetV3s took 346 vs 433 us (0.80x), the 3->32 one of MobileNetV2,
// MnasNet and EfficientNet 649 vs 668 us (even: the GEMM's panels
// amortise better over 32 rows of weights), so those keep the GEMM.
const stemMaxM = 16

// stemOK reports whether convF32 runs s through convStem on pool.
func stemOK(pool machine, s *convSetup) bool {
	g := s.g
	return pool.fast && !pool.z && s.G == 1 && s.M >= 4 && s.M <= stemMaxM && len(g.in) == 2 && prod(g.out) > 0 && prod(g.in) > 0 &&
		prod(g.k) > 1 && s.C*prod(g.k) <= stemMaxK
}

// stemJob is one convStem call's work on one image: fill (units: input
// channels) or the bands (units: bands of t.rows output rows).
type stemJob struct {
	s             *convSetup
	t             *groupTapsGeom
	x, w, bias, y []float32 // the image's input and output planes
	buf           []float32 // its phase planes
	ep            epi       // at the image's output
	late          bool      // a residual: ep.all runs over y after
	fill          bool
}

var stemJobs = sync.Pool{New: func() any { return new(stemJob) }}

// convStem computes the convolution s (stemOK) of x into y with the bias
// (or none) and the epilogue ep.
func convStem(pool machine, s *convSetup, x, w, bias, y []float32, ep epi) {
	t := s.groupTapsGeom()
	d := t.d
	bands := (d.OH + t.rows - 1) / t.rows
	buf := getF32(t.bufLen)
	clear(*buf) // the padding stays zero: only input elements are written
	late := ep.on && ep.r != nil
	j := stemJobs.Get().(*stemJob)
	for ni := 0; ni < s.N; ni++ {
		*j = stemJob{s: s, t: t, x: x[ni*s.C*t.inSz : (ni+1)*s.C*t.inSz], w: w, bias: bias,
			y: y[ni*s.M*t.P : (ni+1)*s.M*t.P], buf: *buf, ep: ep.at(ni * s.M * t.P), late: late, fill: true}
		pool.Run(s.C, s.C*t.inSz, j)
		j.fill = false
		pool.Run(bands, s.M*t.P*t.K, j)
	}
	*j = stemJob{}
	stemJobs.Put(j)
	putF32(buf)
	if late {
		ep.all(y)
	}
}

func (j *stemJob) Run(lo, hi int) {
	s, t, d := j.s, j.t, j.t.d
	if j.fill {
		for c := lo; c < hi; c++ {
			d.fill(j.buf[c*t.chs:], j.x[c*t.inSz:(c+1)*t.inSz], false)
		}
		return
	}
	blo, bhi := float32(math.Inf(-1)), float32(math.Inf(1))
	if j.ep.on && !j.late {
		blo, bhi = j.ep.lo, j.ep.hi
	}
	ldo := (t.rows*d.Wq + 15) &^ 15 // the most outputs of a band
	out := getF32(4 * ldo)
	for u := lo; u < hi; u++ {
		// Output rows [r0, r1) of every channel: each output's chain is
		// the same whichever band, run of vectors or kernel computes it.
		r0 := u * t.rows
		r1 := min(d.OH, r0+t.rows)
		q0, n := r0*d.Wq, ((r1-r0)*d.Wq+15)&^15
		_ = j.buf[q0+n-1+int(t.offs[t.K-1])]
		for m := 0; m < s.M; {
			k := 4
			if m+4 <= s.M {
				amd64.DwTapsMA(n, t.K, &t.offs[0], &j.w[m*t.K], t.K, &j.buf[q0], &(*out)[0], ldo)
			} else {
				k = 1
				amd64.DwTapsA(n, t.K, &t.offs[0], &j.w[m*t.K], &j.buf[q0], &(*out)[0])
			}
			for c := 0; c < k; c++ {
				oc := (*out)[c*ldo:]
				yb := j.y[(m+c)*t.P+r0*d.OW : (m+c)*t.P+r1*d.OW]
				bv := negZero // y = acc + -0 is acc, bit for bit
				if j.bias != nil {
					bv = j.bias[m+c]
				}
				_ = oc[(r1-r0-1)*d.Wq+d.OW-1]
				amd64.DwStoreA(&oc[0], d.Wq, &yb[0], d.OW, r1-r0, d.OW, bv, blo, bhi)
				if !j.late {
					j.ep.activate(yb, len(yb), 1, len(yb))
				}
			}
			m += k
		}
	}
	putF32(out)
}
