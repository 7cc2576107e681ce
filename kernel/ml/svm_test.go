package ml

import (
	"math"
	"testing"

	"github.com/vouchml/vouch/tensor"
)

// kernel64 is the spec's kernel functions in float64.
func kernel64(kind string, gamma, coef0, degree float64, x, v []float32) float64 {
	dot, d2 := 0.0, 0.0
	for j := range x {
		dot += float64(x[j]) * float64(v[j])
		d := float64(x[j]) - float64(v[j])
		d2 += d * d
	}
	switch kind {
	case "POLY":
		return math.Pow(gamma*dot+coef0, degree)
	case "RBF":
		return math.Exp(-gamma * d2)
	case "SIGMOID":
		return math.Tanh(gamma*dot + coef0)
	}
	return dot
}

// A three-class kernel SVM on two features: classes 0, 1 and 2 have 2, 1
// and 1 support vectors.
var (
	svs      = []float32{0, 0, 1, 0, 0, 1, 1, 1}
	perClass = []int{2, 1, 1}
	svCoef   = []float32{0.5, -0.25, 1, -1, 0.75, 0.5, -0.5, 0.25} // [classes-1][vectors]
	svRho    = []float32{0.1, -0.2, 0.05}
)

// oneVsOne64 is the pairwise decision values and the voted class, from the
// spec's formula, in float64.
func oneVsOne64(kind string, kp []float64, x []float32) ([]float64, int) {
	k := make([]float64, 4)
	for v := range 4 {
		k[v] = kernel64(kind, kp[0], kp[1], kp[2], x, svs[v*2:v*2+2])
	}
	start := []int{0, 2, 3}
	votes := make([]int, 3)
	var d []float64
	idx := 0
	for i := 0; i < 3; i++ {
		for j := i + 1; j < 3; j++ {
			s := float64(svRho[idx])
			for v := start[i]; v < start[i]+perClass[i]; v++ {
				s += float64(svCoef[(j-1)*4+v]) * k[v]
			}
			for v := start[j]; v < start[j]+perClass[j]; v++ {
				s += float64(svCoef[i*4+v]) * k[v]
			}
			d = append(d, s)
			if s > 0 {
				votes[i]++
			} else {
				votes[j]++
			}
			idx++
		}
	}
	best := 0
	for c := range votes {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return d, best
}

func TestSVMClassifierKernels(t *testing.T) {
	x := []float32{0.3, 0.8, 1.2, -0.4, -1, 0.5, 2, 2}
	for _, tc := range []struct {
		kind string
		kp   []float32
	}{
		{"LINEAR", nil},
		{"POLY", []float32{0.5, 1, 2}},
		{"POLY", []float32{0.5, 1, 2.5}},
		{"RBF", []float32{0.7, 0, 0}},
		{"SIGMOID", []float32{0.3, -0.1, 0}},
	} {
		n := node("SVMClassifier", s1("kernel_type", tc.kind), fs("support_vectors", svs...), is("vectors_per_class", 2, 1, 1),
			fs("coefficients", svCoef...), fs("rho", svRho...), ss("classlabels_strings", "x", "y", "z"))
		kp := []float64{0, 0, 0}
		if tc.kp != nil {
			n.Attrs["kernel_params"] = fs("kernel_params", tc.kp...)
			kp = []float64{float64(tc.kp[0]), float64(tc.kp[1]), float64(tc.kp[2])}
		}
		out := run(t, n, f32([]int{4, 2}, x...))
		var want []float32
		var labels []string
		for r := range 4 {
			d, best := oneVsOne64(tc.kind, kp, x[r*2:r*2+2])
			for _, v := range d {
				want = append(want, float32(v))
			}
			labels = append(labels, []string{"x", "y", "z"}[best])
		}
		near(t, tc.kind+" scores", out[1], want, 1e-5)
		equal(t, tc.kind+" labels", out[0], labels...)
	}
}

// couple64 is libsvm's multiclass_probability in float64.
func couple64(k int, r []float64) []float64 {
	q := make([]float64, k*k)
	p := make([]float64, k)
	qp := make([]float64, k)
	for t := range k {
		p[t] = 1 / float64(k)
		for j := range t {
			q[t*k+t] += r[j*k+t] * r[j*k+t]
			q[t*k+j] = q[j*k+t]
		}
		for j := t + 1; j < k; j++ {
			q[t*k+t] += r[j*k+t] * r[j*k+t]
			q[t*k+j] = -r[j*k+t] * r[t*k+j]
		}
	}
	for range 100 {
		pqp := 0.0
		for t := range k {
			qp[t] = 0
			for j := range k {
				qp[t] += q[t*k+j] * p[j]
			}
			pqp += p[t] * qp[t]
		}
		maxErr := 0.0
		for t := range k {
			maxErr = math.Max(maxErr, math.Abs(qp[t]-pqp))
		}
		if maxErr < 0.005/float64(k) {
			break
		}
		for t := range k {
			diff := (-qp[t] + pqp) / q[t*k+t]
			p[t] += diff
			pqp = (pqp + diff*(diff*q[t*k+t]+2*qp[t])) / (1 + diff) / (1 + diff)
			for j := range k {
				qp[j] = (qp[j] + diff*q[t*k+j]) / (1 + diff)
				p[j] /= 1 + diff
			}
		}
	}
	return p
}

func TestSVMClassifierPlatt(t *testing.T) {
	probA, probB := []float32{-1.5, -2, -0.7}, []float32{0.1, -0.3, 0.2}
	n := node("SVMClassifier", s1("kernel_type", "RBF"), fs("kernel_params", 0.7, 0, 0), fs("support_vectors", svs...),
		is("vectors_per_class", 2, 1, 1), fs("coefficients", svCoef...), fs("rho", svRho...),
		is("classlabels_ints", 4, 5, 6), fs("prob_a", probA...), fs("prob_b", probB...))
	x := []float32{0.3, 0.8, 1.2, -0.4, 2, 2}
	out := run(t, n, f32([]int{3, 2}, x...))
	got := out[1].Data.([]float32)
	for r := range 3 {
		d, best := oneVsOne64("RBF", []float64{0.7, 0, 0}, x[r*2:r*2+2])
		rr := make([]float64, 9)
		idx := 0
		for i := 0; i < 3; i++ {
			for j := i + 1; j < 3; j++ {
				v := 1 - sigmoid(d[idx]*float64(probA[idx])+float64(probB[idx]))
				v = math.Min(math.Max(v, 1e-7), 1-1e-7)
				rr[i*3+j], rr[j*3+i] = v, 1-v
				idx++
			}
		}
		want := couple64(3, rr)
		sum := 0.0
		for c := range 3 {
			sum += float64(got[r*3+c])
			if math.Abs(float64(got[r*3+c])-want[c]) > 1e-4 {
				t.Errorf("row %d class %d: probability %v, want %v", r, c, got[r*3+c], want[c])
			}
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("row %d: probabilities sum to %v", r, sum)
		}
		if l := out[0].Data.([]int64)[r]; l != int64(4+best) {
			t.Errorf("row %d: label %d, want %d (votes)", r, l, 4+best)
		}
	}
}

func TestSVMClassifierBinaryAndLinear(t *testing.T) {
	// Two classes, one support vector each.
	n := node("SVMClassifier", s1("kernel_type", "LINEAR"), fs("support_vectors", 1, 0, 0, 1), is("vectors_per_class", 1, 1),
		fs("coefficients", 1, -1), fs("rho", 0.5), is("classlabels_ints", 0, 1))
	out := run(t, n, f32([]int{2, 2}, 2, 1, 0, 3))
	// d = 1·x0 - 1·x1 + 0.5: 1.5 (vote class 0), -2.5 (class 1).
	near(t, "binary scores", out[1], []float32{-1.5, 1.5, 2.5, -2.5}, 1e-6)
	equal[int64](t, "binary labels", out[0], 0, 1)
	n.Attrs["post_transform"] = s1("post_transform", "LOGISTIC")
	near(t, "binary logistic", run(t, n, f32([]int{1, 2}, 2, 1))[1], sig32(-1.5, 1.5), 1e-6)

	// liblinear form: one coefficient row per class, rho[0] the bias.
	n = node("SVMClassifier", fs("coefficients", 1, 0, 0, 1, -1, -1), fs("rho", 0.25), ss("classlabels_strings", "a", "b", "c"))
	out = run(t, n, f32([]int{2, 2}, 2, 1, -1, -2))
	near(t, "linear scores", out[1], []float32{2.25, 1.25, -2.75, -0.75, -1.75, 3.25}, 1e-6)
	equal(t, "linear labels", out[0], "a", "c")
}

func TestSVMRegressor(t *testing.T) {
	x := []float32{0.3, 0.8, 1.2, -0.4}
	n := node("SVMRegressor", s1("kernel_type", "RBF"), fs("kernel_params", 0.7, 0, 0), fs("support_vectors", svs...),
		i1("n_supports", 4), fs("coefficients", 0.5, -1, 0.25, 2), fs("rho", -0.3))
	out := run(t, n, f32([]int{2, 2}, x...))
	var want []float32
	for r := range 2 {
		s := -0.3
		for v, c := range []float64{0.5, -1, 0.25, 2} {
			s += c * kernel64("RBF", 0.7, 0, 0, x[r*2:r*2+2], svs[v*2:v*2+2])
		}
		want = append(want, float32(s))
	}
	near(t, "rbf regression", out[0], want, 1e-5)
	n.Attrs["one_class"] = i1("one_class", 1)
	sign := func(v float32) float32 {
		if v > 0 {
			return 1
		}
		return -1
	}
	near(t, "one class", run(t, n, f32([]int{2, 2}, x...))[0], []float32{sign(want[0]), sign(want[1])}, 0)
	n = node("SVMRegressor", fs("coefficients", 2, -1), fs("rho", 1))
	near(t, "linear regression", run(t, n, tensor.From([]float64{1, 3}, 1, 2))[0], []float32{0}, 0)
}
