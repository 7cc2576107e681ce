package nn

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
)

// BenchmarkPackedB compares a constant B read in place (or gathered, when
// transposed) with the same B packed at bind time (packB16), on weight
// shapes of the zoo: gpt_decoder's LM head (a 32 KB row stride), BERT's
// feed-forward, a classifier at batch 8 (Gemm transB).
func BenchmarkPackedB(b *testing.B) {
	for _, sh := range []struct {
		m, n, k int
		transB  bool
	}{{64, 8192, 512, false}, {64, 1536, 512, false}, {128, 3072, 768, false}, {128, 768, 3072, false}, {8, 4096, 4096, true}, {8, 1000, 512, true}} {
		for _, pk := range []bool{false, true} {
			name := "inplace"
			if pk {
				name = "packed"
			}
			b.Run(fmt.Sprintf("%s/%dx%dx%d/transB=%v", name, sh.m, sh.n, sh.k, sh.transB), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				a, bb := randF32(r, sh.m*sh.k), randF32(r, sh.k*sh.n)
				brs, bcs := sh.n, 1
				if sh.transB {
					brs, bcs = 1, sh.k
				}
				c := make([]float32, sh.m*sh.n)
				p := parallel.New(1)
				defer p.Close()
				pool := mach(p, kernel.ISABest, nil)
				var pb *packedB
				if pk {
					pb = packB16(bb, brs, bcs, sh.k, sh.n)
				}
				run := func() { sgemmPacked(pool, sh.m, sh.n, sh.k, a, sh.k, 1, bb, brs, bcs, pb, c, sh.n, epi{}) }
				run()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					run()
				}
				b.ReportMetric(2*float64(sh.m*sh.n*sh.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
