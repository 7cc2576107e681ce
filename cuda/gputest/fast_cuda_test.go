//go:build cuda

package gputest

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vouchml/vouch/plan"
)

var (
	flagFastModels  = flag.String("fast-models", "", "comma-separated ONNX files to build as fast plans and check on the GPU")
	flagFastBench   = flag.String("fast-bench", "", "comma-separated model names (their directory's name) to time")
	flagFastBatches = flag.String("fast-bench-batches", "1,256", "batch sizes to time")
	flagFastPrec    = flag.String("fast-precisions", "fp16,bf16", "precisions to check")
	flagFastRuns    = flag.Int("fast-runs", 100, "run-to-run repetitions")
)

// TestFast runs the fast-mode suite (issue 19) on device 0: the tensor-core
// kernels against the exact ones and float64, a row alone against the same
// row in batches, repeated runs and streams (0 differing bits), then the
// -fast-models as fast plans, timed for -fast-bench.
func TestFast(t *testing.T) {
	cfg := FastConfig{Driver: *flagCUDA, NVRTC: *flagNVRTC, Seed: *flagSeed, Runs: *flagFastRuns}
	for _, p := range strings.Split(*flagFastPrec, ",") {
		cfg.Precisions = append(cfg.Precisions, plan.Precision(p))
	}
	if *flagFastModels != "" {
		cfg.Models = strings.Split(*flagFastModels, ",")
	}
	if *flagFastBench != "" {
		cfg.BenchModels = strings.Split(*flagFastBench, ",")
	}
	for _, b := range strings.Split(*flagFastBatches, ",") {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			t.Fatalf("-fast-bench-batches: %q", b)
		}
		cfg.BenchBatches = append(cfg.BenchBatches, n)
	}
	rep, err := RunFast(cfg, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures {
		t.Error(f)
	}
	t.Logf("fast suite: %d outputs compared bit for bit, %d differ; %d failures", rep.Compared, rep.Differ, len(rep.Failures))
}
