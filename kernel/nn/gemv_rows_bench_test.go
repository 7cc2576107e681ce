package nn

import (
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

func BenchmarkGemvMClassifier(b *testing.B) {
	pool := parallel.New(1)
	defer pool.Close()
	const k, n = 1280, 1000
	x := make([]float32, k)
	w := make([]float32, k*n)
	for i := range w {
		w[i] = float32(i%7) * 0.1
	}
	for i := range x {
		x[i] = 0.5
	}
	y := make([]float32, n)
	for _, tc := range []struct {
		name     string
		brs, bcs int
	}{{"rows", n, 1}, {"transB", 1, k}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sgemmP(mach(pool, kernel.ISABest, nil), 1, n, k, x, k, 1, w, tc.brs, tc.bcs, y, n)
			}
		})
		b.Run(tc.name+"/cold", func(b *testing.B) {
			junk := make([]float32, 16<<20)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := range junk {
					junk[j]++
				}
				b.StartTimer()
				sgemmP(mach(pool, kernel.ISABest, nil), 1, n, k, x, k, 1, w, tc.brs, tc.bcs, y, n)
			}
		})
	}
	// TacticGemvPanels: B packed into 64-column panels, hot and cold.
	g := gemmShape{m: 1, n: n, k: k, ars: k, acs: 1, brs: n, bcs: 1}
	p := gemvPackOf(nil, node("Gemm"), g, w)
	for _, cold := range []bool{false, true} {
		name := "panels"
		if cold {
			name += "/cold"
		}
		b.Run(name, func(b *testing.B) {
			junk := make([]float32, 16<<20)
			for i := 0; i < b.N; i++ {
				if cold {
					b.StopTimer()
					for j := range junk {
						junk[j]++
					}
					b.StartTimer()
				}
				gemvPanels(mach(pool, kernel.ISABest, nil), g, x, p, y)
			}
		})
	}
}
