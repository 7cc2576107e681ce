package q8

import "math"

// WeightScales quantizes w (channels rows of equal length) per row,
// symmetrically: scale s = max|row|/127 (1 for a row of zeros or with a
// non-finite value, whose values are then left 0) and each value
// Quantize(v, s). The compiler's int8 layers and the GPU's fast int8
// layers pack their weights with it, so both hold the same int8 values.
func WeightScales(w []float32, channels int) (q []int8, scales []float32) {
	return WeightScalesBits(w, channels, 8)
}

// WeightBits7Max bounds 7-bit weights: |w| ≤ 63, so that on AVX2 without
// VNNI a VPMADDUBSW pair sum of u8 activations (≤ 255) and such weights,
// at most 2·255·63 = 32130 in magnitude, never saturates int16 (vnni7.go).
const WeightBits7Max = 63

// WeightScalesBits is WeightScales with bits 8 (|q| ≤ 127, scale
// max|row|/127) or 7 (|q| ≤ WeightBits7Max, scale max|row|/63); other
// values panic (the compiler validates its option first).
func WeightScalesBits(w []float32, channels, bits int) (q []int8, scales []float32) {
	qmax := 127
	switch bits {
	case 8:
	case 7:
		qmax = WeightBits7Max
	default:
		panic("q8: weight bits must be 7 or 8")
	}
	per := len(w) / channels
	q = make([]int8, len(w))
	scales = make([]float32, channels)
	for c := 0; c < channels; c++ {
		row := w[c*per : (c+1)*per]
		var amax float64
		for _, v := range row {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		if amax == 0 || math.IsInf(amax, 0) || math.IsNaN(amax) {
			scales[c] = 1
			continue
		}
		s := float32(amax / float64(qmax))
		scales[c] = s
		for k, v := range row {
			x := Quantize(v, s)
			q[c*per+k] = max(-int8(qmax), min(int8(qmax), x))
		}
	}
	return q, scales
}

// Quantize maps x to int8 with scale s, rounding half to even and
// clamping to [−127, 127] (NaN maps to 0). It works in float64 and is
// for weights, at build or load time; kernels quantize activations with
// their own documented float32 arithmetic.
func Quantize(x, s float32) int8 {
	if x != x {
		return 0
	}
	v := math.RoundToEven(float64(x) / float64(s))
	return int8(math.Max(-127, math.Min(127, v)))
}
