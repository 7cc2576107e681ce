package nn

import "math"

// convTransposeTiled computes a float32 ConvTranspose whose kernel tiles
// the output (stride equal to the kernel, dilation 1, no pads or output
// padding, one group: U-Net's 2x2/2 up-convolutions) as one GEMM per
// kernel tap: output (oy, ox) of tap (ky, kx) = (oy mod sh, ox mod sw)
// reads only input (oy div sh, ox div sw), so Y_t = W_t·X with W_t[m][c] =
// W[c][m][t], scattered into place. convGEMM's chain for that output runs
// over every (c, tap) of the zero-inserted columns; the taps of the other
// residues read +0, and FMA(+0, w, acc) is acc for a finite w and any acc
// a chain from +0 can hold (never -0 in round-to-nearest), so dropping
// them leaves the chain over c of the one live tap: the same bits. It
// reports false, computing nothing, when the geometry differs or a weight
// is not finite.
func convTransposeTiled(pool machine, s *convSetup, x, w, y []float32) bool {
	g := s.g
	if s.G != 1 || len(g.in) != 2 {
		return false
	}
	for i := 0; i < 2; i++ {
		if g.stride[i] != g.k[i] || g.dil[i] != 1 || g.padB[i] != 0 || g.padE[i] != 0 || g.out[i] != g.in[i]*g.k[i] {
			return false
		}
	}
	for _, v := range w {
		if math.IsInf(float64(v), 0) || v != v {
			return false
		}
	}
	H, W, KH, KW := g.in[0], g.in[1], g.k[0], g.k[1]
	P, kn, OW := H*W, KH*KW, g.out[1]
	wt := make([]float32, s.M*s.C)
	tmp := make([]float32, s.M*P)
	for t := 0; t < kn; t++ {
		ky, kx := t/KW, t%KW
		for c := 0; c < s.C; c++ {
			for m := 0; m < s.M; m++ {
				wt[m*s.C+c] = w[(c*s.M+m)*kn+t]
			}
		}
		for ni := 0; ni < s.N; ni++ {
			sgemmP(pool, s.M, P, s.C, wt, s.C, 1, x[ni*s.C*P:(ni+1)*s.C*P], P, 1, tmp, P)
			for m := 0; m < s.M; m++ {
				ym := y[(ni*s.M+m)*prod(g.out):]
				src := tmp[m*P : (m+1)*P]
				for iy := 0; iy < H; iy++ {
					row := ym[(iy*KH+ky)*OW+kx:]
					for ix, v := range src[iy*W : (iy+1)*W] {
						row[ix*KW] = v
					}
				}
			}
		}
	}
	return true
}
