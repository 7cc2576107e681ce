package nn

// A float32 AveragePool of equal strides s > 1 in both dimensions
// (DenseNet's 2x2/2 transitions) runs avgPoolPlanes as the unit-stride
// pools do, with one flat map: output (oy, ox) of plane b is sum element
// b*hws + oy*wp + ox, and its tap (ky, kx) is the padded element
// s*(b*hws + oy*wp + ox) + ky*wp + kx, since (s*oy+ky)*wp + s*ox+kx is
// that; planes are hwp floats apart, hp*wp rounded up to a multiple of s,
// and hws = hwp/s. So every output's taps are added in the window's
// row-major order from +0 with vmath.Add32's rule, padding adding +0
// (which changes no sum from +0): sumPoolF32's additions of the taps
// inside the input. The sums between rows (ox >= OW) are computed and
// never read. On AVX2, stride 2 runs amd64.SumTapsS2 (all taps in one
// pass); other strides and the tails the portable loop, with the same
// bits. sumPoolF32 was a scalar, single-threaded window walk (DenseNet's
// transition1 pool: 10x ONNX Runtime's time).

// avgPoolSOK reports whether g is an AveragePool geometry avgPoolPlanes runs with a
// two spatial dimensions (or one, as its row view), equal strides above 1
// (or a column stride above 1 and one output row), unit dilations, and
// padded planes not much larger than the input plane.
func avgPoolSOK(g *geom) bool {
	if len(g.in) == 1 && g.row != nil {
		g = g.row
	}
	if len(g.in) != 2 || g.stride[1] < 2 || (g.stride[0] != g.stride[1] && g.out[0] != 1) || g.dil[0] != 1 || g.dil[1] != 1 || g.out[0] < 1 || g.out[1] < 1 {
		return false
	}
	hp, wp := g.padded()
	return hp*wp <= 4*prod(g.in)+64 && hp*wp+g.stride[0] <= avgPoolGroup
}
