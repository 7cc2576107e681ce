package q8

import "testing"

func BenchmarkTileHot(b *testing.B) {
	kb := 128
	ap := make([]int16, kb*2*tileM)
	bp := make([]int16, kb*2*tileN)
	c := make([]int32, tileM*tileN)
	for _, v := range []bool{false, true} {
		tw := best
		tw.vnni = v && hasVNNI
		name := "avx2"
		if tw.vnni {
			name = "vnni"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runTile(tw, kb, ap, bp, c, tileN, 0)
			}
			b.ReportMetric(float64(kb*2*tileM*tileN)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}
