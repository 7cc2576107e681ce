package amd64

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkDwTapsMA compares, alternating in one loop so that a loaded
// machine slows both alike, four DwTapsA calls with one DwTapsMA call on
// a RegNetY group's taps (8 input planes of 30x30, 3x3, 72 taps, a band
// of 512 outputs), reporting each one's median time (a-ns, ma-ns).
func BenchmarkDwTapsMA(b *testing.B) {
	if !Enabled {
		b.Skip("no AVX2")
	}
	const wq, chs, n, taps = 30, 900, 512, 72
	offs := make([]int32, 0, taps)
	for c := 0; c < 8; c++ {
		for ky := 0; ky < 3; ky++ {
			for kx := 0; kx < 3; kx++ {
				offs = append(offs, int32(c*chs+ky*wq+kx))
			}
		}
	}
	x := make([]float32, 8*chs+n)
	for i := range x {
		x[i] = float32(i%17) / 16
	}
	w := make([]float32, 4*taps)
	for i := range w {
		w[i] = float32(i%5) / 4
	}
	y := make([]float32, 4*n)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ta, tm []time.Duration
	for b.Loop() {
		t0 := time.Now()
		for j := 0; j < 4; j++ {
			DwTapsA(n, taps, &offs[0], &w[j*taps], &x[0], &y[j*n])
		}
		t1 := time.Now()
		DwTapsMA(n, taps, &offs[0], &w[0], taps, &x[0], &y[0], n)
		t2 := time.Now()
		ta, tm = append(ta, t1.Sub(t0)), append(tm, t2.Sub(t1))
	}
	slices.Sort(ta)
	slices.Sort(tm)
	b.ReportMetric(float64(ta[len(ta)/2].Nanoseconds()), "a-ns")
	b.ReportMetric(float64(tm[len(tm)/2].Nanoseconds()), "ma-ns")
}
