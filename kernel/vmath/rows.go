package vmath

import "math"

import "github.com/vouchml/vouch/kernel/vmath/internal/vecasm"

// Row statistics for normalizations. x holds consecutive rows of D floats;
// each output is one row's sequential chain in element order, exactly as
// the scalar loop in each function's comment. The vector twins take 8 rows
// at a time and transpose 8×8 blocks in registers, so that each lane runs
// one row's chain with the same operations in the same order (VADDPS is
// the float32 addition, VFMADD231PS is FMA32); the last D%8 columns and the
// last len(dst)%8 rows run the scalar loop. Both give the same bits.

// SumRows32 sets sum[r], for r < len(sum), to the sequential sum of row r:
//
//	var s float32; for _, v := range x[r*D:(r+1)*D] { s += v }
func (v Vec) SumRows32(sum, x []float32, D int) {
	R := len(sum)
	_ = x[:R*D]
	r := 0
	if n := D &^ 7; v.fast && n > 0 {
		for ; r+8 <= R; r += 8 {
			var s [8]float32
			vecasm.SumRows8(&x[r*D], D, n, &s)
			for l := range 8 {
				v := s[l]
				for _, e := range x[(r+l)*D+n : (r+l+1)*D] {
					v += e
				}
				sum[r+l] = v
			}
		}
	}
	for ; r < R; r++ {
		var s float32
		for _, v := range x[r*D : (r+1)*D] {
			s += v
		}
		sum[r] = s
	}
}

// SqDevRows32 sets q[r], for r < len(q), to the FMA chain of squared
// deviations of row r from mean[r]:
//
//	var s float32; for _, v := range row { s = FMA32(v-m, v-m, s) }
func (v Vec) SqDevRows32(q, x []float32, D int, mean []float32) {
	R := len(q)
	_ = x[:R*D]
	_ = mean[:R]
	r := 0
	if n := D &^ 7; v.fast && n > 0 {
		for ; r+8 <= R; r += 8 {
			var m, s [8]float32
			copy(m[:], mean[r:r+8])
			vecasm.SqDevRows8(&x[r*D], D, n, &m, &s)
			for l := range 8 {
				v, ml := s[l], m[l]
				for _, e := range x[(r+l)*D+n : (r+l+1)*D] {
					v = FMA32(e-ml, e-ml, v)
				}
				q[r+l] = v
			}
		}
	}
	for ; r < R; r++ {
		var s float32
		m := mean[r]
		for _, v := range x[r*D : (r+1)*D] {
			s = FMA32(v-m, v-m, s)
		}
		q[r] = s
	}
}

// canonicalNaN is the quiet NaN with no payload, 0x7fc00000.
var canonicalNaN = math.Float32frombits(0x7fc00000)

// NormAffine32 sets y[j] = float32(float32((x[j]-m)*iv)*sc[j]) + bs[j] for
// every j of x, or without the addition when bs is nil; NaN results are the
// canonical NaN. sc (and bs) must be at least as long as x; y must be x or
// not overlap it.
func (v Vec) NormAffine32(y, x []float32, m, iv float32, sc, bs []float32) {
	n := len(x)
	y, sc = y[:n], sc[:n]
	if bs != nil {
		bs = bs[:n]
	}
	j := 0
	if v.fast {
		j = n &^ 7
		if j > 0 {
			var bp *float32
			if bs != nil {
				bp = &bs[0]
			}
			// The vector twin writes NaN results as the canonical NaN.
			vecasm.NormAffine(&y[0], &x[0], j, m, iv, &sc[0], bp)
		}
	}
	// Which NaN an operation on NaNs returns depends on the compiled
	// operand order (the vector code and a -race build of the Go code
	// differ), so NaN results are written as the canonical quiet NaN.
	if bs == nil {
		for ; j < n; j++ {
			v := float32((x[j]-m)*iv) * sc[j]
			if v != v {
				v = canonicalNaN
			}
			y[j] = v
		}
	} else {
		for ; j < n; j++ {
			v := float32(float32((x[j]-m)*iv)*sc[j]) + bs[j]
			if v != v {
				v = canonicalNaN
			}
			y[j] = v
		}
	}
}
