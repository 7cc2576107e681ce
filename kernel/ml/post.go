package ml

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/vmath"
)

// transform is a classifier's or regressor's post_transform.
type transform int

// The post transforms of the ONNX-ML specification.
const (
	none transform = iota
	logistic
	softmax
	softmaxZero
	probit
)

func parseTransform(n *ir.Node) (transform, error) {
	switch s := n.String("post_transform", "NONE"); s {
	case "NONE", "":
		return none, nil
	case "LOGISTIC":
		return logistic, nil
	case "SOFTMAX":
		return softmax, nil
	case "SOFTMAX_ZERO":
		return softmaxZero, nil
	case "PROBIT":
		return probit, nil
	default:
		return none, errorf(n, "unknown post_transform %q (NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT)", s)
	}
}

// apply transforms one row of scores in place.
//
//	LOGISTIC      1 / (1 + exp(-s)) per score (vmath.Sigmoid32)
//	SOFTMAX       exp(s - max) / Σ exp(s - max), the sum in ascending order
//	SOFTMAX_ZERO  as SOFTMAX, but a score within 1e-7 of zero becomes
//	              s·exp(-max) (so stays about zero) and is still summed; an
//	              all-zero sum gives 0.5 everywhere (ONNX's reference)
//	PROBIT        √2 · erfinv(2s - 1) per score (see erfinv)
func (tr transform) apply(row []float32) {
	switch tr {
	case logistic:
		for j, s := range row {
			row[j] = vmath.Sigmoid32(s)
		}
	case softmax:
		m := maxOf(row)
		var sum float32
		for j, s := range row {
			e := vmath.Exp32(s - m)
			row[j] = e
			sum += e
		}
		for j := range row {
			row[j] /= sum
		}
	case softmaxZero:
		m := maxOf(row)
		em := vmath.Exp32(-m)
		var sum float32
		for j, s := range row {
			var e float32
			if s > 1e-7 || s < -1e-7 {
				e = vmath.Exp32(s - m)
			} else {
				e = float32(s * em)
			}
			row[j] = e
			sum += e
		}
		for j := range row {
			if sum == 0 {
				row[j] = 0.5
			} else {
				row[j] /= sum
			}
		}
	case probit:
		for j, s := range row {
			row[j] = probitOf(s)
		}
	}
}

// pair gives the two scores of a binary classifier with one score s (a
// LinearClassifier with one coefficient row and two labels, a two-class
// kernel SVM). The specification is silent; these are ONNX Runtime's
// (1.30, checked by ort_test.go):
//
//	NONE                   -s, s for an SVM; 1-s, s for a linear classifier
//	LOGISTIC               σ(-s), σ(s)
//	SOFTMAX, SOFTMAX_ZERO  1-s, s (no transform)
//	PROBIT                 probit(-s), probit(s) (ONNX Runtime writes one
//	                       probit; this pair keeps two columns)
func (tr transform) pair(s float32, svm bool) (float32, float32) {
	switch tr {
	case logistic:
		return vmath.Sigmoid32(-s), vmath.Sigmoid32(s)
	case probit:
		return probitOf(-s), probitOf(s)
	case none:
		if svm {
			return -s, s
		}
	}
	return 1 - s, s
}

// maxOf is the largest element (the first NaN, when there is one: NaN
// scores make a NaN softmax rather than a silently wrong one).
func maxOf(v []float32) float32 {
	m := v[0]
	for _, x := range v {
		if x != x {
			return x
		}
		if x > m {
			m = x
		}
	}
	return m
}

const sqrt2 = float32(math.Sqrt2)

func probitOf(p float32) float32 { return float32(sqrt2 * erfinv(float32(2*p)-1)) }

// erfinv is the inverse error function by Winitzki's closed form with
// a = 0.147 (relative error about 2e-3): the approximation that ONNX's
// reference implementation and ONNX Runtime both use for PROBIT, so that
// vouch's probits agree with theirs. The logarithm is vmath.Log32 and the
// square roots are IEEE (correctly rounded), so the bits are fixed.
func erfinv(x float32) float32 {
	sgn := float32(1)
	if x < 0 {
		sgn = -1
	}
	w := float32((1 - x) * (1 + x))
	if w == 0 {
		return sgn * float32(math.Inf(1))
	}
	l := vmath.Log32(w)
	const a = float32(0.147)
	const twoOverPiA = float32(2 / (math.Pi * 0.147))
	v := float32(twoOverPiA + float32(0.5*l))
	v2 := float32(l / a)
	v3 := float32(-v + sqrt32(float32(float32(v*v)-v2)))
	return sgn * sqrt32(v3)
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
