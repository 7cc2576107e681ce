//go:build cuda

package gputest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	flagNodeDirs     = flag.String("nodetests", "", "comma-separated directories of ONNX node tests (libonnx-testdata's node/) or zoo-style models to run on the GPU against the CPU plan")
	flagNodeRun      = flag.String("nodetests-run", "", "a regexp: only the test ids (root/test) it matches")
	flagNodeResults  = flag.String("nodetests-results", "", "JSON-lines results file: tests it records are not run again, new results are appended (a stopped run resumes)")
	flagNodeTimeout  = flag.Duration("nodetests-timeout", 20*time.Second, "time limit per test (past it the process stops: rerun to resume)")
	flagNodeDeadline = flag.Int64("nodetests-deadline", 0, "Unix time after which no test starts (0: none)")
	flagNodeRuns     = flag.Int("nodetests-runs", 2, "device runs per data set, each compared with the CPU")
	flagNodeImage    = flag.String("nodetests-image", "", "kernel image cache file (NVRTC runs once across restarts)")
	flagNodeRTol     = flag.Float64("nodetests-rtol", 0, "reference check rtol (0 with atol 0: the conformance runner's)")
	flagNodeATol     = flag.Float64("nodetests-atol", 0, "reference check atol")
	flagNodeStandIn  = flag.Bool("nodetests-standin", false, "no GPU: the portable CPU engine stands in for the device (rehearses a run)")
)

// TestNodeTests runs the ONNX node tests (or zoo models) named by
// -nodetests on device 0: every test with a layer on the GPU, GPU plan on
// the device vs the same plan on the CPU, bit for bit (NodeTests). It
// fails on any bit difference, and when the run stopped early (a sticky
// device error or a test past its time: run it again with the same
// -nodetests-results to resume).
func TestNodeTests(t *testing.T) {
	if *flagNodeDirs == "" {
		t.Skip("no -nodetests directories")
	}
	cfg := NodeConfig{Roots: strings.Split(*flagNodeDirs, ","), Timeout: *flagNodeTimeout, Runs: *flagNodeRuns,
		Results: *flagNodeResults, RTol: *flagNodeRTol, ATol: *flagNodeATol}
	if *flagNodeRun != "" {
		re, err := regexp.Compile(*flagNodeRun)
		if err != nil {
			t.Fatalf("-nodetests-run: %v", err)
		}
		cfg.Match = re
	}
	if *flagNodeDeadline > 0 {
		cfg.Deadline = time.Unix(*flagNodeDeadline, 0)
	}
	target, release := testTarget(portable), func() {}
	if !*flagNodeStandIn {
		var err error
		if target, release, err = OpenNodeTarget(*flagCUDA, *flagNVRTC, 0, *flagNodeImage, os.Stdout); err != nil {
			t.Fatal(err)
		}
	}
	defer release()
	fmt.Printf("nodetests: device %s\n", target.Name)
	sum, err := NodeTests(cfg, target, os.Stdout)
	if errors.Is(err, ErrRestart) {
		t.Fatalf("%v (results in %s)", err, cfg.Results)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Results {
		if r.Status == NodeDiffer {
			t.Errorf("%s: %d of %d values differ from the CPU plan: %s", r.ID, r.Diffs, r.Values, r.Detail)
		}
	}
}
