package tree

import (
	"math"

	"github.com/vouchml/vouch/kernel/vmath"
)

// transform applies e's post transform to one row of scores, in float32
// with vmath's functions (scores of a double model are rounded to float32
// first, except under NONE):
//
//	LOGISTIC      vmath.Sigmoid32 per score
//	SOFTMAX       exp(s - max) / Σ exp(s - max), summed in index order
//	SOFTMAX_ZERO  as SOFTMAX, but a score within 1e-7 of zero becomes
//	              s·exp(-max) and is left out of the sum (ONNX Runtime)
//	PROBIT        √2 · erfinv(2s - 1), erfinv by Winitzki's closed form
//	              (a = 0.147), the approximation of ONNX Runtime and of
//	              ONNX's reference implementation
func transform[A float32 | float64](post int, row []A) {
	switch post {
	case postLogistic:
		for j, s := range row {
			row[j] = A(vmath.Sigmoid32(float32(s)))
		}
	case postSoftmax, postSoftmaxZero:
		m := float32(row[0])
		for _, s := range row {
			if float32(s) > m || s != s {
				m = float32(s)
			}
		}
		em := vmath.Exp32(-m)
		var sum float32
		for j, s := range row {
			v := float32(s)
			if post == postSoftmaxZero && v <= 1e-7 && v >= -1e-7 {
				row[j] = A(float32(v * em))
				continue
			}
			ev := vmath.Exp32(v - m)
			row[j] = A(ev)
			sum += ev
		}
		for j := range row {
			row[j] = A(float32(row[j]) / sum)
		}
	case postProbit:
		for j, s := range row {
			row[j] = A(probit(float32(s)))
		}
	}
}

// probit is √2·erfinv(2p - 1); erfinv by Winitzki's formula with the
// logarithm from vmath and IEEE square roots, so the bits are fixed.
func probit(p float32) float32 {
	x := float32(2*p) - 1
	sgn := float32(1)
	if x < 0 {
		sgn = -1
	}
	w := float32((1 - x) * (1 + x))
	l := vmath.Log32(w)
	const a = 0.147
	v := float32(float32(2/(math.Pi*a)) + float32(0.5*l))
	v2 := float32(l * float32(1/a))
	v3 := float32(-v + sqrt32(float32(v*v)-v2))
	return float32(float32(math.Sqrt2) * float32(sgn*sqrt32(v3-v)))
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

func logistic32(s float32) float32 { return vmath.Sigmoid32(s) }

// finishClass turns a classifier's aggregated scores (after finishAgg)
// into its label index and probabilities z (len ntargets), following ONNX
// Runtime's TreeEnsembleClassifier, whose special cases the specification
// leaves open:
//
//   - more than two classes, or two classes both weighed: base values
//     added, the post transform over all classes, the label the first
//     class of highest score among those a leaf weighed for this row (for
//     two classes both weighed, ONNX Runtime instead gives label 1 when
//     class 1's score is positive and rewrites the scores when there are
//     two base values; vouch keeps to the specification's "top class");
//   - two classes with weights on one class only (XGBoost, LightGBM
//     binary), the binary case: the score s of that class plus its base
//     value decides (label 1 when s > 0, or s > 0.5 when every weight is
//     non-negative), and z = [1-s, s] for non-negative weights, else
//     [σ(-s), σ(s)] under LOGISTIC and [-s, s] otherwise; PROBIT gives
//     [probit(s), 0];
//   - one class: that label, the transformed score.
func finishClass[A float32 | float64](e *Ensemble, acc []A, has []bool, z []A) int {
	nt := e.ntargets
	switch {
	case nt == 1:
		z[0] = acc[0]
		if len(e.base) == 1 {
			z[0] += A(e.base[0])
		}
		transform(e.post, z)
		return 0
	case nt > 2 || !e.binary:
		copy(z, acc)
		for k := range e.base {
			z[k] += A(e.base[k])
			has[k] = true
		}
		best := -1
		for k := range z {
			if has[k] && (best < 0 || z[k] > z[best]) {
				best = k
			}
		}
		transform(e.post, z)
		return max(best, 0)
	}
	s0, s1 := acc[0], acc[1]
	h0, h1 := has[0], has[1]
	single := false
	switch len(e.base) {
	case 2:
		if h1 {
			s1 = A(e.base[1]) + s0
			s0 = -s1
		} else {
			s1 += A(e.base[1])
			s0 += A(e.base[0])
		}
	case 1:
		s0 += A(e.base[0])
		single = !h1
	case 0:
		single = !h1
	}
	var pos A
	switch {
	case !single && h1:
		pos = s1
	case h0:
		pos = s0
	}
	label := 0
	add := 3
	if e.binary {
		if e.allPos {
			add = 1
			if pos > 0.5 {
				label, add = 1, 0
			}
		} else if pos > 0 {
			label, add = 1, 2
		}
	}
	if !single {
		z[0], z[1] = s0, s1
		transform(e.post, z[:2])
		return label
	}
	s := s0
	switch {
	case e.post == postProbit:
		z[0], z[1] = A(probit(float32(s))), 0
	case add <= 1:
		z[0], z[1] = 1-s, s
	case e.post == postLogistic:
		z[0], z[1] = A(logistic32(float32(-s))), A(logistic32(float32(s)))
	default:
		z[0], z[1] = -s, s
	}
	return label
}
