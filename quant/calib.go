package quant

import (
	"fmt"
	"github.com/vouchml/vouch/kernel/q8"
	"math"
	"sort"
)

// Calibrator names.
const (
	MinMax     = "minmax"
	Entropy    = "entropy"
	Percentile = "percentile"
)

// Bins is the histogram resolution of |x| (TensorRT's 2048).
const Bins = 2048

// levels is the number of non-negative int8 levels (0..127) the entropy
// search quantizes the histogram into.
const levels = 128

// Collector gathers one tensor's statistics over calibration batches in
// two passes: Range (the |x| maximum) over every batch, then Histogram
// (2048 bins of |x| over [0, amax]) over the same batches.
type Collector struct {
	Amax  float64
	Hist  []int64
	Total int64
	// Sum of squares, for reporting.
	frozen bool
}

// Range records a batch's values for the first pass.
func (c *Collector) Range(x []float32) {
	for _, v := range x {
		a := math.Abs(float64(v))
		if a > c.Amax && !math.IsInf(a, 0) && !math.IsNaN(a) {
			c.Amax = a
		}
	}
}

// Histogram records a batch's values for the second pass. NaN and
// infinite values are not counted.
func (c *Collector) Histogram(x []float32) {
	if c.Hist == nil {
		c.Hist = make([]int64, Bins)
		c.frozen = true
	}
	if c.Amax == 0 {
		for _, v := range x {
			if v == v && !math.IsInf(float64(v), 0) {
				c.Hist[0]++
				c.Total++
			}
		}
		return
	}
	w := c.Amax / Bins
	for _, v := range x {
		a := math.Abs(float64(v))
		if math.IsNaN(a) || math.IsInf(a, 0) {
			continue
		}
		b := int(a / w)
		if b >= Bins {
			b = Bins - 1
		}
		c.Hist[b]++
		c.Total++
	}
}

// Result is a calibrated activation range.
type Result struct {
	Threshold float64 // the |x| bound mapped to 127
	Scale     float32 // Threshold/127, rounded to float32
	Amax      float64 // the largest |x| seen
	Clipped   float64 // fraction of calibration values beyond Threshold
}

// Calibrate chooses the threshold with the named calibrator. pct is the
// percentile for "percentile" (e.g. 99.99).
func (c *Collector) Calibrate(calibrator string, pct float64) (Result, error) {
	r := Result{Amax: c.Amax}
	if c.Amax == 0 || c.Total == 0 {
		r.Threshold, r.Scale = 0, 1
		return r, nil
	}
	w := c.Amax / Bins
	switch calibrator {
	case MinMax:
		r.Threshold = c.Amax
	case Percentile:
		if pct <= 0 || pct > 100 {
			return r, fmt.Errorf("quant: percentile %v out of range (0, 100]", pct)
		}
		want := pct / 100 * float64(c.Total)
		var cum int64
		r.Threshold = c.Amax
		for i, h := range c.Hist {
			cum += h
			if float64(cum) >= want {
				r.Threshold = float64(i+1) * w
				break
			}
		}
	case Entropy:
		i := entropyBins(c.Hist)
		r.Threshold = (float64(i) + 0.5) * w
		if i >= Bins {
			r.Threshold = c.Amax
		}
	default:
		return r, fmt.Errorf("quant: unknown calibrator %q (minmax, entropy, percentile)", calibrator)
	}
	r.Scale = float32(r.Threshold / 127)
	if r.Scale == 0 || math.IsInf(float64(r.Scale), 0) {
		r.Scale = 1
	}
	r.Clipped = c.ClippedAbove(float64(r.Scale) * 127)
	return r, nil
}

// ClippedAbove returns the fraction of histogram counts in bins lying
// wholly above t (values that saturate at ±127).
func (c *Collector) ClippedAbove(t float64) float64 {
	if c.Total == 0 || c.Amax == 0 {
		return 0
	}
	w := c.Amax / Bins
	var n int64
	for i, h := range c.Hist {
		if float64(i)*w >= t {
			n += h
		}
	}
	return float64(n) / float64(c.Total)
}

// entropyBins is TensorRT's entropy calibration: for each candidate
// number of bins i in [128, 2048] it folds the tail of the histogram into
// bin i−1 (the reference distribution P), quantizes the first i bins into
// 128 levels and expands them back over the non-empty bins (Q), and keeps
// the i with the smallest KL(P‖Q). Ties keep the smaller i.
func entropyBins(hist []int64) int {
	n := len(hist)
	best, bestKL := n, math.Inf(1)
	var tail int64
	suffix := make([]int64, n+1)
	for i := n - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + hist[i]
	}
	_ = tail
	p := make([]float64, n)
	q := make([]float64, n)
	for i := levels; i <= n; i++ {
		for j := 0; j < i; j++ {
			p[j] = float64(hist[j])
		}
		p[i-1] += float64(suffix[i])
		// Quantize hist[:i] into 128 levels of `merged` bins each, the
		// last level taking the remainder.
		merged := i / levels
		for lv := 0; lv < levels; lv++ {
			lo := lv * merged
			hi := lo + merged
			if lv == levels-1 {
				hi = i
			}
			var sum float64
			nz := 0
			for j := lo; j < hi; j++ {
				sum += float64(hist[j])
				if hist[j] != 0 {
					nz++
				}
			}
			for j := lo; j < hi; j++ {
				if hist[j] != 0 {
					q[j] = sum / float64(nz)
				} else {
					q[j] = 0
				}
			}
		}
		kl := klDiv(p[:i], q[:i])
		if kl < bestKL {
			best, bestKL = i, kl
		}
	}
	return best
}

// klDiv is KL(P‖Q) of two unnormalized histograms; bins where P is zero
// contribute nothing, bins where only Q is zero are smoothed with a
// small mass (TensorRT's epsilon).
func klDiv(p, q []float64) float64 {
	var sp, sq float64
	for i := range p {
		sp += p[i]
		sq += q[i]
	}
	if sp == 0 || sq == 0 {
		return math.Inf(1)
	}
	const eps = 1e-4
	var kl float64
	for i := range p {
		if p[i] == 0 {
			continue
		}
		pi := p[i] / sp
		qi := q[i] / sq
		if qi == 0 {
			qi = eps / sq
		}
		kl += pi * math.Log(pi/qi)
	}
	return kl
}

// WeightScales returns symmetric per-channel scales for a weight whose
// channel c holds w[c*per:(c+1)*per], and the int8 values: q =
// clamp(round(w·127/amax), −127, 127), scale = amax/127 (1 for an
// all-zero channel).
func WeightScales(w []float32, channels int) (q []int8, scales []float32) {
	return q8.WeightScales(w, channels)
}

// WeightScalesBits is WeightScales for 8- or 7-bit weights
// (kernel/q8.WeightScalesBits).
func WeightScalesBits(w []float32, channels, bits int) (q []int8, scales []float32) {
	return q8.WeightScalesBits(w, channels, bits)
}

// Quantize maps x to int8 with scale s (kernel/q8.Quantize: half to even,
// clamped to [−127, 127], NaN to 0).
func Quantize(x, s float32) int8 { return q8.Quantize(x, s) }

// SQNR returns the signal-to-quantization-noise ratio in dB of approx
// against ref: 10·log10(Σref² / Σ(ref−approx)²); +Inf when equal.
func SQNR(ref, approx []float32) float64 {
	var s, e float64
	for i := range ref {
		r := float64(ref[i])
		d := r - float64(approx[i])
		s += r * r
		e += d * d
	}
	if e == 0 {
		return math.Inf(1)
	}
	if s == 0 {
		return math.Inf(-1)
	}
	return 10 * math.Log10(s/e)
}

// SortedNames returns m's keys in order.
func SortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
