package nn

import "github.com/vouchml/vouch/kernel/amd64"

// A grouped float32 convolution whose groups have fewer than 16 output
// channels (ResNeXt-50's 4 and 8, RegNetY's 8), on AVX-512, runs each
// output channel as one amd64.DwTapsZ over its group's input planes laid
// out as dwAny lays out a depthwise plane (zero-padded phase planes, one
// after another per input channel): the taps (c, ky, kx) in the im2col
// matrix's order, each one contiguous load at a fixed offset, so each
// output is the im2col GEMM's chain from +0 with the padding taps as
// FMA(0, w, acc), canon (NaN as 0x7fc00000) like the GEMM's store; the
// bias and the epilogue are convF32's, after. The per-group GEMM packed
// its im2col panels for only 4-8 rows of weights (20 GFLOP/s).

// groupTapsOK reports whether convF32 runs s through groupTaps on pool.
func groupTapsOK(pool machine, s *convSetup) bool {
	nd := len(s.g.in)
	return pool.z && s.G > 1 && s.Mg < 16 && !(s.Cg == 1 && s.Mg == 1) && (nd == 1 || nd == 2) &&
		prod(s.g.out) > 0 && s.Cg*prod(s.g.k) < 1<<16
}

// groupTaps computes the chains of s into y (groupTapsOK must hold).
func groupTaps(pool machine, s *convSetup, x, w, y []float32) {
	d := newDwAnyGeom(s.g)
	P, inSz, kn := prod(s.g.out), prod(s.g.in), len(d.offs)
	K, chs := s.Cg*kn, d.sh*d.sw*d.plane
	offs := make([]int32, K)
	for c := 0; c < s.Cg; c++ {
		for t, o := range d.offs {
			offs[c*kn+t] = int32(c*chs) + o
		}
	}
	bufLen := (s.Cg-1)*chs + d.bufLen
	pool.For(s.N*s.G, s.N*s.M*P*K, func(lo, hi int) {
		buf, out := getF32(bufLen), getF32(d.n16)
		clear((*buf)[:bufLen]) // the padding stays zero: only input elements are written
		for u := lo; u < hi; u++ {
			ni, gi := u/s.G, u%s.G
			for c := 0; c < s.Cg; c++ {
				ch := ni*s.C + gi*s.Cg + c
				d.fill((*buf)[c*chs:], x[ch*inSz:(ch+1)*inSz])
			}
			for m := gi * s.Mg; m < (gi+1)*s.Mg; m++ {
				amd64.DwTapsZ(d.n16, K, &offs[0], &w[m*K], &(*buf)[0], &(*out)[0])
				ym := y[(ni*s.M+m)*P : (ni*s.M+m+1)*P]
				for oy := 0; oy < d.OH; oy++ {
					copy(ym[oy*d.OW:(oy+1)*d.OW], (*out)[oy*d.Wq:])
				}
			}
		}
		putF32(out)
		putF32(buf)
	})
}
