package quant

import (
	"fmt"
	"math"
)

// Accuracy compares a reduced-precision model's outputs with the FP32
// model's on labelled data.
type Accuracy struct {
	Samples       int          `json:"samples"`
	FP32          float64      `json:"fp32_accuracy"`    // percent
	Reduced       float64      `json:"reduced_accuracy"` // percent
	Drop          float64      `json:"drop_pp"`          // FP32 − Reduced, percentage points
	Agreement     float64      `json:"top1_agreement"`   // percent of samples with the same top-1 class
	MeanKL        float64      `json:"mean_kl"`          // mean KL(fp32 ‖ reduced) of the class distributions
	PerClass      []ClassDelta `json:"per_class,omitempty"`
	Probabilities bool         `json:"outputs_are_probabilities"`
}

// ClassDelta is one class's accuracy under both precisions.
type ClassDelta struct {
	Class   int     `json:"class"`
	Count   int     `json:"count"`
	FP32    float64 `json:"fp32_accuracy"`
	Reduced float64 `json:"reduced_accuracy"`
	Delta   float64 `json:"delta_pp"`
}

// Compare scores outputs ref (FP32) and got (reduced), each [samples,
// classes] row-major, against labels (nil: only agreement and KL). Rows
// that are non-negative and sum to 1 (within 1e-3) are taken as
// probabilities; otherwise a row is a vector of logits and goes through a
// softmax for the KL divergence.
func Compare(ref, got []float32, classes int, labels []int64) (Accuracy, error) {
	var a Accuracy
	if classes <= 0 || len(ref) != len(got) || len(ref)%classes != 0 {
		return a, fmt.Errorf("quant: outputs of %d and %d values do not split into rows of %d classes", len(ref), len(got), classes)
	}
	n := len(ref) / classes
	if labels != nil && len(labels) != n {
		return a, fmt.Errorf("quant: %d labels for %d samples", len(labels), n)
	}
	a.Samples = n
	a.Probabilities = isProb(ref, classes)
	type cc struct{ n, r, g int }
	per := make([]cc, classes)
	var agree, okR, okG int
	var kl float64
	p := make([]float64, classes)
	q := make([]float64, classes)
	for i := 0; i < n; i++ {
		rr, gr := ref[i*classes:(i+1)*classes], got[i*classes:(i+1)*classes]
		tr, tg := argmax(rr), argmax(gr)
		if tr == tg {
			agree++
		}
		dist(rr, p, a.Probabilities)
		dist(gr, q, a.Probabilities)
		for c := range p {
			if p[c] > 0 {
				kl += p[c] * math.Log(p[c]/math.Max(q[c], 1e-12))
			}
		}
		if labels != nil {
			y := int(labels[i])
			if y < 0 || y >= classes {
				return a, fmt.Errorf("quant: label %d of sample %d is outside 0..%d", y, i, classes-1)
			}
			per[y].n++
			if tr == y {
				okR++
				per[y].r++
			}
			if tg == y {
				okG++
				per[y].g++
			}
		}
	}
	if n == 0 {
		return a, nil
	}
	a.Agreement = 100 * float64(agree) / float64(n)
	a.MeanKL = kl / float64(n)
	if labels != nil {
		a.FP32 = 100 * float64(okR) / float64(n)
		a.Reduced = 100 * float64(okG) / float64(n)
		a.Drop = a.FP32 - a.Reduced
		for c, v := range per {
			if v.n == 0 {
				continue
			}
			d := ClassDelta{Class: c, Count: v.n, FP32: 100 * float64(v.r) / float64(v.n), Reduced: 100 * float64(v.g) / float64(v.n)}
			d.Delta = d.Reduced - d.FP32
			a.PerClass = append(a.PerClass, d)
		}
	}
	return a, nil
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func isProb(v []float32, classes int) bool {
	for i := 0; i+classes <= len(v); i += classes {
		var s float64
		for _, x := range v[i : i+classes] {
			if x < 0 {
				return false
			}
			s += float64(x)
		}
		if math.Abs(s-1) > 1e-3 {
			return false
		}
	}
	return true
}

func dist(v []float32, out []float64, prob bool) {
	if prob {
		for i, x := range v {
			out[i] = float64(x)
		}
		return
	}
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, float64(x))
	}
	var s float64
	for i, x := range v {
		out[i] = math.Exp(float64(x) - m)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
}
