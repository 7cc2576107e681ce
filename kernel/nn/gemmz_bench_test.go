package nn

import (
	"fmt"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/parallel"
)

// BenchmarkGemmZ: tiny_bert's MatMuls (64 rows, column bias) at one
// thread on the AVX2 kernels and on the AVX-512 tiles.
func BenchmarkGemmZ(b *testing.B) {
	if !amd64.EnabledZ {
		b.Skip("no AVX-512")
	}
	pool := parallel.New(1)
	defer pool.Close()
	cfgs := []gemmZCfg{{"avx2", true, 0, 0, 0}, {"z8x32", false, 8, 2, 256}, {"z12x32", false, 12, 2, 256}, {"z14x32", false, 14, 2, 256},
		{"z16x16", false, 16, 1, 256}, {"z8x32kc128", false, 8, 2, 128}, {"z16x16kc128", false, 16, 1, 128}}
	for _, sh := range [][3]int{{64, 384, 128}, {64, 128, 128}, {64, 512, 128}, {64, 128, 512}} {
		m, n, k := sh[0], sh[1], sh[2]
		r := rand.New(rand.NewSource(1))
		a, bb, cb := randF32(r, m*k), randF32(r, k*n), randF32(r, n)
		c := make([]float32, m*n)
		for _, cf := range cfgs {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", m, n, k, cf.name), func(b *testing.B) {
				mc := cf.machine(pool)
				ep := epi{r: cb, col: true, lo: -1e30, hi: 1e30, on: true, fast: true}
				for i := 0; i < b.N; i++ {
					sgemmEp(mc, m, n, k, a, k, 1, bb, n, 1, c, n, ep)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// gemmZCfg is one GEMM configuration timed below: the AVX2 kernels, or
// the AVX-512 ones with the register blocking mr x nz panels, k blocks kc.
type gemmZCfg struct {
	name       string
	avx2       bool
	mr, nz, kc int
}

func (cf gemmZCfg) machine(p *parallel.Pool) machine {
	if cf.avx2 {
		return mach(p, kernel.ISAAVX2, nil)
	}
	return mach(p, kernel.ISABest, &forced{gemmZ: &gemmZShape{cf.mr, cf.nz, cf.kc}})
}

// TestGemmZTune (VOUCH_GEMMZ_TUNE=1) times the configurations of
// BenchmarkGemmZ alternately, rounds of 50 calls, and prints each one's
// best round: robust to a machine shared with other work.
func TestGemmZTune(t *testing.T) {
	if os.Getenv("VOUCH_GEMMZ_TUNE") == "" || !amd64.EnabledZ {
		t.Skip("VOUCH_GEMMZ_TUNE not set")
	}
	pool := parallel.New(1)
	defer pool.Close()
	cfgs := []gemmZCfg{{"avx2", true, 0, 0, 0}, {"z8x32", false, 8, 2, 256}, {"z12x32", false, 12, 2, 256}, {"z14x32", false, 14, 2, 256},
		{"z16x16", false, 16, 1, 256}, {"z8x16", false, 8, 1, 256}, {"z8x32kc128", false, 8, 2, 128}, {"z16x16kc128", false, 16, 1, 128}}
	for _, sh := range [][3]int{{64, 64, 64}, {64, 384, 128}, {64, 128, 128}, {64, 512, 128}, {64, 128, 512}} {
		m, n, k := sh[0], sh[1], sh[2]
		r := rand.New(rand.NewSource(1))
		a, bb, cb := randF32(r, m*k), randF32(r, k*n), randF32(r, n)
		c := make([]float32, m*n)
		best := make([]time.Duration, len(cfgs))
		for round := 0; round < 40; round++ {
			for ci, cf := range cfgs {
				mc := cf.machine(pool)
				ep := epi{r: cb, col: true, lo: -1e30, hi: 1e30, on: true, fast: true}
				if k == 64 {
					ep = epi{}
				}
				t0 := time.Now()
				for i := 0; i < 50; i++ {
					sgemmEp(mc, m, n, k, a, k, 1, bb, n, 1, c, n, ep)
				}
				d := time.Since(t0) / 50
				if best[ci] == 0 || d < best[ci] {
					best[ci] = d
				}
			}
		}
		for ci, cf := range cfgs {
			t.Logf("%dx%dx%d %-12s %8v %6.1f GFLOP/s", m, n, k, cf.name, best[ci], 2*float64(m*n*k)/best[ci].Seconds()/1e9)
		}
	}
}
