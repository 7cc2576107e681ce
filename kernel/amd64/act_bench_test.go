package amd64

import "testing"

// BenchmarkSiLUZ is SiLUZ over 8192 values in L1 (four vectors a pass;
// one vector a pass took about twice as long: its chain waits on latency).
func BenchmarkSiLUZ(b *testing.B) {
	if !EnabledZ {
		b.Skip("no AVX-512")
	}
	x := make([]float32, 8192)
	for i := range x {
		x[i] = float32(i%1000)/100 - 5
	}
	y := make([]float32, len(x))
	for i := 0; i < b.N; i++ {
		SiLUZ(&x[0], &y[0], len(x), &SiLUTab, false)
	}
	b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gvalues/s")
}
