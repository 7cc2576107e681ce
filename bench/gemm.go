package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// GEMMResult is the throughput of one float32 matrix product.
type GEMMResult struct {
	M, N, K int
	Summary Summary
	GFLOPs  float64 // 2·M·N·K at the median time
}

// GEMM times C = A·B for float32 A (m×k) and B (k×n) through the MatMul
// kernel that plans use (the builtin registry's, whatever its tactic), so it
// measures the kernels as they are, runs times after warmup untimed runs.
func GEMM(m, n, k, warmup, runs int) (GEMMResult, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	a, b := tensor.New(tensor.Float32, m, k), tensor.New(tensor.Float32, k, n)
	for _, t := range []*tensor.Tensor{a, b} {
		d := t.Data.([]float32)
		for i := range d {
			d[i] = rng.Float32()*2 - 1
		}
	}
	node := &ir.Node{Name: "gemm", OpType: "MatMul", Version: 13, Inputs: []string{"a", "b"}, Outputs: []string{"c"}}
	op, err := builtin.Registry().Lookup(node)
	if err != nil {
		return GEMMResult{}, fmt.Errorf("bench: %w", err)
	}
	// The process-wide pool: kernels given no pool run on the caller alone.
	ctx := &kernel.Ctx{Pool: parallel.Default()}
	in := []*tensor.Tensor{a, b}
	var samples []time.Duration
	for r := 0; r < warmup+max(runs, 1); r++ {
		start := time.Now()
		if _, err := op.Run(ctx, node, in); err != nil {
			return GEMMResult{}, fmt.Errorf("bench: MatMul %dx%dx%d: %w", m, n, k, err)
		}
		if r >= warmup {
			samples = append(samples, time.Since(start))
		}
	}
	s := Summarize(samples)
	return GEMMResult{M: m, N: n, K: k, Summary: s, GFLOPs: 2 * float64(m) * float64(n) * float64(k) / s.Median.Seconds() / 1e9}, nil
}

// PeakFMA measures one core's float32 FMA peak in GFLOP/s: a loop of
// independent 256-bit fused multiply-adds, enough chains in flight to hide
// their latency on both FMA ports. It returns 0 where it cannot measure
// (no AVX2+FMA, or not amd64). The median of runs calls of about d each.
func PeakFMA(d time.Duration, runs int) float64 {
	if !amd64.Enabled {
		return 0
	}
	const iters = 1 << 16
	// Calibrate the loop count to about d.
	n := iters
	for {
		start := time.Now()
		amd64.FMALoop(n)
		if el := time.Since(start); el >= d/4 || n > 1<<34 {
			n = int(float64(n) * float64(d) / float64(max(el, 1)))
			break
		}
		n *= 4
	}
	n = max(n, iters)
	var samples []time.Duration
	for i := 0; i < max(runs, 1); i++ {
		start := time.Now()
		amd64.FMALoop(n)
		samples = append(samples, time.Since(start))
	}
	// Per iteration: 12 VFMADD231PS on 8 lanes, 2 flops each.
	return float64(n) * 12 * 8 * 2 / Summarize(samples).Min.Seconds() / 1e9
}
