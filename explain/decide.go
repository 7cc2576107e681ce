package explain

import (
	"math"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/tensor"
)

// Decide returns every row's decision from a classifier's output t
// (rows × classes, the last dimension one a label): the label of the top
// class (ties: the first) and its confidence, the value itself when the
// row is a probability distribution (every value in [0, 1], summing to 1
// within 1e-3), else its softmax. It returns nil when t is not such an
// output. Serving and replay both decide with it.
func Decide(t *tensor.Tensor, labels []string) []audit.Decision {
	if t == nil || len(labels) == 0 || len(t.Shape) == 0 {
		return nil
	}
	n := t.Shape[len(t.Shape)-1]
	f, err := t.Float64s()
	if err != nil || n != len(labels) || n == 0 || len(f) == 0 || len(f)%n != 0 {
		return nil
	}
	out := make([]audit.Decision, len(f)/n)
	for i := range out {
		best, conf := classify(f[i*n : (i+1)*n])
		out[i] = audit.Decision{Label: labels[best], Confidence: &conf}
	}
	return out
}

func classify(row []float64) (int, float64) {
	best := 0
	sum, prob := 0.0, true
	for i, v := range row {
		if v > row[best] {
			best = i
		}
		if !(v >= 0 && v <= 1) {
			prob = false
		}
		sum += v
	}
	if prob && math.Abs(sum-1) <= 1e-3 {
		return best, row[best]
	}
	var z float64
	for _, v := range row {
		z += math.Exp(v - row[best])
	}
	if z == 0 || math.IsNaN(z) {
		return best, 0
	}
	return best, 1 / z
}
