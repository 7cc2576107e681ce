package ml

import (
	"math"
	"testing"

	"github.com/vouchml/vouch/tensor"
)

func softmax64(v ...float64) []float32 {
	m := v[0]
	for _, x := range v {
		m = math.Max(m, x)
	}
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - m)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(math.Exp(x-m) / s)
	}
	return out
}

func sig32(v ...float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(sigmoid(x))
	}
	return out
}

// A three-class model on two features: the margins of row 0 are 5.1, 0.2,
// -1.7 and of row 1 0.1, 2.7, -0.7.
func TestLinearClassifierPostTransforms(t *testing.T) {
	x := f32([]int{2, 2}, 1, 2, -2, 1)
	m := [][]float64{{5.1, 0.2, -1.7}, {0.1, 2.7, -0.7}}
	for _, tc := range []struct {
		post string
		want []float32
	}{
		{"NONE", []float32{5.1, 0.2, -1.7, 0.1, 2.7, -0.7}},
		{"LOGISTIC", append(sig32(m[0]...), sig32(m[1]...)...)},
		{"SOFTMAX", append(softmax64(m[0]...), softmax64(m[1]...)...)},
		{"SOFTMAX_ZERO", append(softmax64(m[0]...), softmax64(m[1]...)...)},
	} {
		n := node("LinearClassifier", fs("coefficients", 1, 2, -1, 0.5, 0, -1), fs("intercepts", 0.1, 0.2, 0.3),
			is("classlabels_ints", 10, 20, 30), s1("post_transform", tc.post))
		out := run(t, n, x)
		equal[int64](t, tc.post+" labels", out[0], 10, 20)
		near(t, tc.post+" scores", out[1], tc.want, 1e-6)
	}
}

func TestLinearClassifierStringLabelsAndInputTypes(t *testing.T) {
	n := node("LinearClassifier", fs("coefficients", 1, 2, -1, 0.5, 0, -1), fs("intercepts", 0.1, 0.2, 0.3),
		ss("classlabels_strings", "a", "b", "c"))
	for _, x := range []*tensor.Tensor{
		f32([]int{2, 2}, 1, 2, -2, 1),
		tensor.From([]float64{1, 2, -2, 1}, 2, 2),
		tensor.From([]int64{1, 2, -2, 1}, 2, 2),
		tensor.From([]int32{1, 2, -2, 1}, 2, 2),
	} {
		out := run(t, n, x)
		equal(t, x.DType.String()+" labels", out[0], "a", "b")
		near(t, "scores", out[1], []float32{5.1, 0.2, -1.7, 0.1, 2.7, -0.7}, 1e-6)
	}
	// A one-dimensional X is one row.
	out := run(t, n, f32([]int{2}, -2, 1))
	equal(t, "1-D label", out[0], "b")
	if len(out[1].Shape) != 2 || out[1].Shape[0] != 1 {
		t.Errorf("1-D scores shape %v", out[1].Shape)
	}
}

// TestLinearClassifierBinary: one coefficient row with two labels gives
// two score columns and the second label for m > 0. The specification is
// silent on the columns; these are ONNX Runtime's (ort_test.go compares):
// 1-m and m for NONE, SOFTMAX and SOFTMAX_ZERO, σ(-m) and σ(m) for
// LOGISTIC.
func TestLinearClassifierBinary(t *testing.T) {
	x := f32([]int{3, 2}, 1, 1, -1, -1, 0, 0)
	// margins 2·x0 - x1 + 0.5: 1.5, -0.5, 0.5
	ms := []float64{1.5, -0.5, 0.5}
	oneMinus := func(m float64) []float32 { return []float32{float32(1 - m), float32(m)} }
	for _, tc := range []struct {
		post string
		want func(m float64) []float32
	}{
		{"NONE", oneMinus},
		{"LOGISTIC", func(m float64) []float32 { return sig32(-m, m) }},
		{"SOFTMAX", oneMinus},
		{"SOFTMAX_ZERO", oneMinus},
	} {
		n := node("LinearClassifier", fs("coefficients", 2, -1), fs("intercepts", 0.5),
			ss("classlabels_strings", "good", "bad"), s1("post_transform", tc.post))
		out := run(t, n, x)
		equal(t, tc.post+" labels", out[0], "bad", "good", "bad")
		var want []float32
		for _, m := range ms {
			want = append(want, tc.want(m)...)
		}
		near(t, tc.post+" scores", out[1], want, 1e-6)
	}
	// Integer labels; and labels that are not a pair: 1 and 0, one raw
	// score column (ONNX Runtime applies only PROBIT to a lone score).
	n := node("LinearClassifier", fs("coefficients", 2, -1), fs("intercepts", -0.5), is("classlabels_ints", 3, 7))
	equal[int64](t, "int labels", run(t, n, x)[0], 7, 3, 3)
	n = node("LinearClassifier", fs("coefficients", 2, -1), fs("intercepts", -0.5), s1("post_transform", "LOGISTIC"))
	out := run(t, n, x)
	equal[int64](t, "no labels", out[0], 1, 0, 0)
	near(t, "one column", out[1], []float32{0.5, -1.5, -0.5}, 1e-6)
}

func TestPostTransformProbitAndSoftmaxZero(t *testing.T) {
	// PROBIT of 0.8 is Φ⁻¹(0.8) = 0.8416212; Winitzki's erfinv is within 2e-3.
	n := node("LinearRegressor", fs("coefficients", 1), fs("intercepts", 0), s1("post_transform", "PROBIT"))
	out := run(t, n, f32([]int{3, 1}, 0.8, 0.5, 0.2))
	near(t, "probit", out[0], []float32{0.8416212, 0, -0.8416212}, 2e-3)
	// SOFTMAX_ZERO leaves a zero score at zero.
	row := []float32{0, 1, 2}
	softmaxZero.apply(row)
	e := math.Exp(-1)
	want := []float32{0, float32(e / (1 + e)), float32(1 / (1 + e))}
	near(t, "softmax_zero", tensor.From(row, 3), want, 1e-6)
	row = []float32{0, 0}
	softmaxZero.apply(row)
	near(t, "softmax_zero of zeros", tensor.From(row, 2), []float32{0.5, 0.5}, 0)
}

func TestLinearRegressor(t *testing.T) {
	n := node("LinearRegressor", fs("coefficients", 1, 2, 3, -1, 0, 0.5), fs("intercepts", 1, -1), i1("targets", 2))
	out := run(t, n, f32([]int{2, 3}, 1, 1, 1, 2, 0, -2))
	near(t, "targets", out[0], []float32{7, -1.5, -3, -4}, 1e-6)
	// Without intercepts; one target.
	n = node("LinearRegressor", fs("coefficients", 0.5, 0.25))
	near(t, "no intercept", run(t, n, f32([]int{1, 2}, 2, 4))[0], []float32{2}, 0)
	if _, err := runErr(node("LinearRegressor", fs("coefficients", 1, 2, 3), i1("targets", 2)), f32([]int{1, 3}, 1, 1, 1)); err == nil {
		t.Error("3 coefficients for 2 targets of 3 features: no error")
	}
}

func TestLinearContributions(t *testing.T) {
	n := node("LinearClassifier", fs("coefficients", 1, 2, -1, 0.5, 0, -1), fs("intercepts", 0.1, 0.2, 0.3),
		is("classlabels_ints", 10, 20, 30))
	x := []float32{-2, 1}
	out := make([]float64, 3*3)
	if err := LinearContributions(n, x, out); err != nil {
		t.Fatal(err)
	}
	scores := run(t, n, f32([]int{1, 2}, x...))[1].Data.([]float32)
	for tg := range 3 {
		sum := 0.0
		for j := range 3 {
			sum += out[tg*3+j]
		}
		if math.Abs(sum-float64(scores[tg])) > 1e-6 {
			t.Errorf("target %d: contributions sum to %v, margin %v", tg, sum, scores[tg])
		}
	}
	if out[0] != -2 || out[1] != 2 || out[2] != float64(float32(0.1)) {
		t.Errorf("target 0 contributions %v", out[:3])
	}
	if err := LinearContributions(n, x, out[:5]); err == nil {
		t.Error("short out: no error")
	}
	if err := LinearContributions(node("Scaler"), x, out); err == nil {
		t.Error("a Scaler node: no error")
	}
	scale, offset, err := ScalerAffine(node("Scaler", fs("scale", 2), fs("offset", 1, 3)), 2)
	if err != nil || scale[1] != 2 || offset[1] != 3 {
		t.Errorf("ScalerAffine: %v %v %v", scale, offset, err)
	}
}
