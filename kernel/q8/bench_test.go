package q8

import (
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/kernel/parallel"
)

func BenchmarkIGemm(b *testing.B) {
	for _, s := range [][3]int{{64, 3136, 576}, {512, 49, 4608}} {
		m, n, k := s[0], s[1], s[2]
		r := rand.New(rand.NewPCG(1, 2))
		a, bb := randI16(r, m*k), randI16(r, k*n)
		al, bl := packedLen(m, n, k)
		ap, bp := make([]int16, al), make([]int16, bl)
		packA(ap, a, m, k, k)
		c := make([]int32, m*n)
		b.Run("gemm", func(b *testing.B) {
			packB(best, bp, bb, n, k, n, 0, (n+tileN-1)/tileN)
			for i := 0; i < b.N; i++ {
				igemm(machine{twins: best}, m, n, k, ap, bp, c, n)
			}
			b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
		b.Run("packB", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				packB(best, bp, bb, n, k, n, 0, (n+tileN-1)/tileN)
			}
		})
	}
	_ = parallel.Default
}
