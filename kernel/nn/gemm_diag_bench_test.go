package nn

import (
	"fmt"
	"math/rand"
	"syscall"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

// BenchmarkSGEMMModes is the 512^3 SGEMM at one thread with A and B read
// in place or packed (forced), and with padded leading dimensions (no
// power-of-two strides), to separate cache effects from the microkernel.
func BenchmarkSGEMMModes(b *testing.B) {
	const m, n, k = 512, 512, 512
	for _, pad := range []int{0, 16} {
		for _, mode := range []int{0, 1, 2, 3} {
			f := &forced{packA: mode&1 != 0, packB: mode&2 != 0}
			b.Run(fmt.Sprintf("pad%d/packA=%v/packB=%v", pad, f.packA, f.packB), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				lda, ldb, ldc := k+pad, n+pad, n+pad
				a, bb := randF32(r, m*lda), randF32(r, k*ldb)
				c := make([]float32, m*ldc)
				p := parallel.New(1)
				defer p.Close()
				pool := mach(p, kernel.ISABest, f)
				sgemmP(pool, m, n, k, a, lda, 1, bb, ldb, 1, c, ldc)
				b.ResetTimer()
				t0 := cpuSeconds()
				for i := 0; i < b.N; i++ {
					sgemmP(pool, m, n, k, a, lda, 1, bb, ldb, 1, c, ldc)
				}
				flops := 2 * float64(m*n*k) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flops/(cpuSeconds()-t0)/1e9, "cpuGFLOP/s")
			})
		}
	}
}

// cpuSeconds is the process's user+system CPU time: on a shared machine
// GFLOP per CPU second is far steadier than per wall second (a one-worker
// GEMM keeps one thread busy).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
