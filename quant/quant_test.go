package quant

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCacheRoundTrip(t *testing.T) {
	c := &Cache{Calibrator: Percentile, Param: "99.99", Scales: map[string]float32{"a: b": 0.5, "x": 1.2345e-3}, Notes: map[string]string{"x": "amax=1"}}
	var b bytes.Buffer
	if err := c.Format(&b); err != nil {
		t.Fatal(err)
	}
	got, err := ParseCache(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Calibrator != c.Calibrator || got.Param != c.Param || len(got.Scales) != 2 || got.Scales["a: b"] != 0.5 || got.Scales["x"] != c.Scales["x"] {
		t.Fatalf("round trip: %+v", got)
	}
	for _, bad := range []string{"", "VOUCHCALIB 2 minmax\n", "NOPE\n", "VOUCHCALIB 1 minmax\nx: zz\n", "VOUCHCALIB 1 minmax\nx: 00000000\n", "VOUCHCALIB 1 minmax\nx: 3f800000\nx: 3f800000\n", "VOUCHCALIB 1 minmax\nnoscale\n"} {
		if _, err := ParseCache(strings.NewReader(bad)); !errors.Is(err, ErrCache) {
			t.Errorf("%q: err %v, want ErrCache", bad, err)
		}
	}
}

func TestCalibrators(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 100000)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	x[0] = 40 // one outlier
	c := &Collector{}
	c.Range(x)
	c.Histogram(x)
	mm, _ := c.Calibrate(MinMax, 0)
	pc, _ := c.Calibrate(Percentile, 99.99)
	en, _ := c.Calibrate(Entropy, 0)
	if mm.Threshold != 40 || mm.Clipped != 0 {
		t.Errorf("minmax %+v", mm)
	}
	for _, r := range []Result{pc, en} {
		if r.Threshold < 2 || r.Threshold > 10 || r.Clipped > 0.01 {
			t.Errorf("calibrator ignoring the outlier: %+v", r)
		}
	}
	if _, err := c.Calibrate("bogus", 0); err == nil {
		t.Error("unknown calibrator accepted")
	}
}

func TestWeightScalesAndSQNR(t *testing.T) {
	q, s := WeightScales([]float32{1, -2, 0.5, 0, 0, 0}, 2)
	if s[0] != float32(2.0/127) || q[1] != -127 || s[1] != 1 || q[3] != 0 {
		t.Fatalf("q %v s %v", q, s)
	}
	if !math.IsInf(SQNR([]float32{1, 2}, []float32{1, 2}), 1) {
		t.Error("equal signals should have infinite SQNR")
	}
	a, err := Compare([]float32{0.9, 0.1, 0.2, 0.8}, []float32{0.6, 0.4, 0.6, 0.4}, 2, []int64{0, 1})
	if err != nil || a.FP32 != 100 || a.Reduced != 50 || a.Agreement != 50 || len(a.PerClass) != 2 || !a.Probabilities {
		t.Fatalf("%+v %v", a, err)
	}
}
