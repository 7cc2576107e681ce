package nn

import (
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
)

var (
	peakOnce sync.Once
	peak     float64 // GFLOP/s of one core's FMA ports
)

// fmaPeak measures one core's FP32 FMA peak: the best of several timed
// runs of 12 independent VFMADD231PS chains (192 flops per iteration).
func fmaPeak() float64 {
	peakOnce.Do(func() {
		if !amd64.Enabled {
			return
		}
		const iters = 20_000_000
		for r := 0; r < 7; r++ {
			t := time.Now()
			amd64.FMALoop(iters)
			if g := iters * 192 / time.Since(t).Seconds() / 1e9; g > peak {
				peak = g
			}
		}
	})
	return peak
}

// BenchmarkFMAPeak reports this core's FP32 FMA peak in GFLOP/s.
func BenchmarkFMAPeak(b *testing.B) {
	if !amd64.Enabled {
		b.Skip("no AVX2+FMA")
	}
	const iters = 1_000_000
	for i := 0; i < b.N; i++ {
		amd64.FMALoop(iters)
	}
	b.ReportMetric(float64(b.N)*iters*192/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func benchSGEMM(b *testing.B, m, n, k, workers int, portable bool) {
	r := rand.New(rand.NewSource(1))
	a, bb := randF32(r, m*k), randF32(r, k*n)
	c := make([]float32, m*n)
	p := parallel.New(workers)
	defer p.Close()
	level := kernel.ISABest
	if portable {
		level = kernel.ISAPortable
	}
	pool := mach(p, level, nil)
	sgemmP(pool, m, n, k, a, k, 1, bb, n, 1, c, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sgemmP(pool, m, n, k, a, k, 1, bb, n, 1, c, n)
	}
	g := 2 * float64(m*n*k) * float64(b.N) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(g, "GFLOP/s")
	if p := fmaPeak(); p > 0 && workers == 1 {
		b.ReportMetric(100*g/p, "%peak")
	}
}

// BenchmarkSGEMM512 is the 512x512x512 SGEMM at one thread (and two), on
// the vector kernel and on its portable twin; %peak compares with one
// core's measured FMA peak.
func BenchmarkSGEMM512(b *testing.B) {
	b.Run("fast/1thread", func(b *testing.B) { benchSGEMM(b, 512, 512, 512, 1, false) })
	b.Run("fast/2threads", func(b *testing.B) { benchSGEMM(b, 512, 512, 512, 2, false) })
	b.Run("portable/1thread", func(b *testing.B) { benchSGEMM(b, 512, 512, 512, 1, true) })
}
