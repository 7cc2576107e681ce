//go:build cuda

package gputest

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

var (
	flagAttnModels  = flag.String("attn-models", "", "comma-separated ONNX files (with Attention layers) to build as fast plans, attention exact and fused")
	flagAttnBatches = flag.String("attn-batches", "2,8,64", "batches row 0 is checked in")
	flagAttnBench   = flag.String("attn-bench-batches", "1,64", "batches to time")
	flagAttnRuns    = flag.Int("attn-runs", 20, "run-to-run repetitions")
	flagAttnRecord  = flag.String("attn-record", "", "write the kernel cases' output digests here")
	flagAttnWait    = flag.Duration("attn-wait", 0, "wait this long for a model file that is still being written")
	flagAttnExact   = flag.Bool("attn-exact", true, "time the exact plan too")
)

func attnInts(t *testing.T, s string) []int {
	var v []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("batch %q", f)
		}
		v = append(v, n)
	}
	return v
}

// TestFastAttention checks fast_attn.cu on device 0 (issue 19, BERT): the
// kernel against attn.Reference bit for bit, batch invariance and runs,
// then -attn-models as fast plans with attention exact and fused.
func TestFastAttention(t *testing.T) {
	cfg := AttnConfig{Driver: *flagCUDA, NVRTC: *flagNVRTC, Runs: *flagAttnRuns, Record: *flagAttnRecord, Wait: *flagAttnWait, SkipExact: !*flagAttnExact,
		Batches: attnInts(t, *flagAttnBatches), BenchBatches: attnInts(t, *flagAttnBench)}
	if *flagAttnModels != "" {
		cfg.Models = strings.Split(*flagAttnModels, ",")
	}
	rep, err := RunAttn(cfg, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures {
		t.Error(f)
	}
	t.Logf("fast attention: %d outputs compared bit for bit, %d differ; %d failures", rep.Compared, rep.Differ, len(rep.Failures))
}
