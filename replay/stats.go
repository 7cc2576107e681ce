package replay

import (
	"fmt"
	"math"
	"sort"

	"github.com/vouchml/vouch/tensor"
)

// Criteria decide whether two outputs agree (Polygraphy's vocabulary):
// Check is "elemwise" (every element within atol + rtol·|ref|), "max" (the
// largest absolute error within atol), "mean" (the mean absolute error
// within atol) or "quantile" (the Quantile-th absolute error within atol).
type Criteria struct {
	ATol, RTol float64
	Check      string
	Quantile   float64
}

// DefaultCriteria: elementwise, rtol 1e-3, atol 1e-5.
func DefaultCriteria() Criteria {
	return Criteria{ATol: 1e-5, RTol: 1e-3, Check: "elemwise", Quantile: 0.99}
}

func (c Criteria) valid() error {
	switch c.Check {
	case "elemwise", "max", "mean", "quantile":
	default:
		return fmt.Errorf("replay: --check %q: want elemwise, max, mean or quantile", c.Check)
	}
	if c.ATol < 0 || c.RTol < 0 || c.Quantile < 0 || c.Quantile > 1 {
		return fmt.Errorf("replay: tolerances must be non-negative and the quantile in [0, 1]")
	}
	return nil
}

// Stats compares one output of two engines.
type Stats struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
	// Absolute and relative error: max, mean, median, p99.
	AbsMax, AbsMean, AbsMedian, AbsP99 float64
	RelMax, RelMean, RelMedian, RelP99 float64
	// KL is the mean KL divergence of the rows (last axis, as
	// distributions: softmax of the values unless they already are
	// probabilities); Top1 the fraction of rows whose argmax agrees.
	KL   float64 `json:"kl_divergence"`
	Top1 float64 `json:"top1_agreement"`
	// Exact reports bit-for-bit equality.
	Exact bool `json:"bit_exact"`
	Pass  bool `json:"pass"`
}

// Comparison is a cross-plan check of one recorded request.
type Comparison struct {
	TraceID string  `json:"trace_id"`
	Outputs []Stats `json:"outputs"`
	Pass    bool    `json:"pass"`
	// For a fast-mode trace compared with the exact plan (fast.go): where
	// the served output came from, what the exact one ran on, the GPU
	// architecture the served bits are pinned to, the fast plan's label,
	// and WithinTolerance or NotWithinTolerance (never bit equality).
	Served    string `json:"served,omitempty"`
	Reference string `json:"reference,omitempty"`
	Pinned    string `json:"pinned_to,omitempty"`
	Precision string `json:"precision,omitempty"`
	Verdict   string `json:"verdict,omitempty"`
}

// Compare computes the statistics of got against ref.
func Compare(name string, ref, got *tensor.Tensor, c Criteria) (Stats, error) {
	if err := c.valid(); err != nil {
		return Stats{}, err
	}
	s := Stats{Name: name, Shape: ref.Shape}
	if tensor.ShapeString(ref.Shape) != tensor.ShapeString(got.Shape) || ref.DType != got.DType {
		return s, fmt.Errorf("replay: output %q: %v vs %v", name, ref, got)
	}
	a, err := ref.Float64s()
	if err != nil {
		return s, fmt.Errorf("replay: output %q: %w", name, err)
	}
	b, _ := got.Float64s()
	n := len(a)
	abs := make([]float64, n)
	rel := make([]float64, n)
	s.Exact = true
	elemOK := true
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(a[i]) && math.IsNaN(b[i]) {
			d = 0
		}
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			s.Exact = false
		}
		abs[i] = d
		rel[i] = d / math.Max(math.Abs(a[i]), 1e-12)
		if d > c.ATol+c.RTol*math.Abs(a[i]) || math.IsNaN(d) {
			elemOK = false
		}
	}
	s.AbsMax, s.AbsMean, s.AbsMedian, s.AbsP99 = summarize(abs)
	s.RelMax, s.RelMean, s.RelMedian, s.RelP99 = summarize(rel)
	if len(ref.Shape) > 0 && n > 0 {
		width := ref.Shape[len(ref.Shape)-1]
		if width > 0 {
			s.KL, s.Top1 = rowsAgreement(a, b, width)
		}
	}
	switch c.Check {
	case "elemwise":
		s.Pass = elemOK
	case "max":
		s.Pass = s.AbsMax <= c.ATol
	case "mean":
		s.Pass = s.AbsMean <= c.ATol
	case "quantile":
		s.Pass = quantile(abs, c.Quantile) <= c.ATol
	}
	return s, nil
}

func summarize(v []float64) (mx, mean, median, p99 float64) {
	if len(v) == 0 {
		return
	}
	sum := 0.0
	for _, x := range v {
		mx = math.Max(mx, x)
		sum += x
	}
	return mx, sum / float64(len(v)), quantile(v, 0.5), quantile(v, 0.99)
}

// quantile returns the nearest-rank q-quantile of v (v is not modified).
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64{}, v...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// rowsAgreement treats each row of width values as a distribution.
func rowsAgreement(a, b []float64, width int) (kl, top1 float64) {
	rows := len(a) / width
	agree := 0
	for r := 0; r < rows; r++ {
		p := dist(a[r*width : (r+1)*width])
		q := dist(b[r*width : (r+1)*width])
		for i := range p {
			if p[i] > 0 {
				kl += p[i] * math.Log(p[i]/math.Max(q[i], 1e-300))
			}
		}
		if argmax(p) == argmax(q) {
			agree++
		}
	}
	return kl / float64(rows), float64(agree) / float64(rows)
}

// dist returns v itself when it is a probability distribution, else its
// softmax.
func dist(v []float64) []float64 {
	sum, neg := 0.0, false
	for _, x := range v {
		sum += x
		neg = neg || x < 0
	}
	if !neg && math.Abs(sum-1) < 1e-3 {
		return v
	}
	mx := math.Inf(-1)
	for _, x := range v {
		mx = math.Max(mx, x)
	}
	out := make([]float64, len(v))
	t := 0.0
	for i, x := range v {
		out[i] = math.Exp(x - mx)
		t += out[i]
	}
	for i := range out {
		out[i] /= t
	}
	return out
}

func argmax(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
