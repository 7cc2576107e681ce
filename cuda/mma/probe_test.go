package mma

import "testing"

// The probe's problems tell the candidate models apart: for each of a few
// models taken as the "hardware", the fit finds it with zero differing
// outputs and ranks every other candidate behind it with some. Two
// candidates that no problem separates are reported (the fit could not
// choose between them), and the integer problems differ in no model.
func TestProbeProblemsDiscriminate(t *testing.T) {
	cands := Candidates()
	for _, f := range []Format{FP16, BF16} {
		pr := NewProblems(f, 60, 11)
		for _, truth := range []Model{cands[0], {Block: 8, Frac: 26, Round: NearestEven}, {Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true}} {
			d, err := pr.Emulate(truth)
			if err != nil {
				t.Fatal(err)
			}
			fits, err := pr.FitModels(d, cands)
			if err != nil {
				t.Fatal(err)
			}
			if fits[0].Model != truth || fits[0].Differ != 0 {
				t.Fatalf("%v: truth %v, best fit %v with %d differing", f, truth, fits[0].Model, fits[0].Differ)
			}
			for _, fit := range fits[1:] {
				if fit.Differ == 0 {
					t.Errorf("%v: the problems do not separate %v from %v", f, truth, fit.Model)
				}
				if fit.Layout != 0 {
					t.Errorf("%v: %v differs from %v on %d integer outputs", f, fit.Model, truth, fit.Layout)
				}
			}
		}
	}
	if _, err := NewProblems(FP16, 10, 1).FitModels(make([]float32, 5), cands); err == nil {
		t.Error("a short output accepted")
	}
}
