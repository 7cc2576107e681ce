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
	flagBench  = flag.Bool("gpubench", false, "also time the exact SGEMM against cuBLAS")
	flagSize   = flag.Int("gpubench-size", 4096, "the benchmark's M = N = K")
	flagPTX    = flag.String("ptx-out", "", "write the compiled PTX here")
	flagNVRTC  = flag.String("nvrtc", "", "path of libnvrtc.so")
	flagCUDA   = flag.String("libcuda", "", "path of libcuda.so.1")
	flagCUBLAS = flag.String("cublas", "", "path of libcublas.so")
	flagCases  = flag.Int("cases", 12, "random cases per kernel")
	flagSeed   = flag.Int64("seed", 1, "random seed")
	flagModels = flag.String("models", "", "comma-separated ONNX files to run on the GPU against the CPU executor")
	flagConv   = flag.Bool("convbench", false, "time every Conv kernel on resnet18's and ResNet-50's convolutions")
	flagPlans  = flag.String("plans", "", "comma-separated GPU plan files to time through the serving engine")
	flagBatch  = flag.String("batches", "1", "comma-separated batch sizes for -plans")
	flagNoTwin = flag.Bool("notwins", false, "skip the twin checks")
	flagNoCPU  = flag.Bool("noplancpu", false, "with -plans: do not check each timed batch against the CPU engine")
)

// TestGPUSuite runs the whole suite on device 0 (go test -tags cuda; on
// the GPU machine). Without a GPU it fails: it exists to be run there.
func TestGPUSuite(t *testing.T) {
	cfg := Config{Driver: *flagCUDA, NVRTC: *flagNVRTC, CUBLAS: *flagCUBLAS, Seed: *flagSeed, Cases: *flagCases,
		Bench: *flagBench, BenchSize: *flagSize, PTXOut: *flagPTX}
	if *flagModels != "" {
		cfg.Models = strings.Split(*flagModels, ",")
	}
	cfg.ConvBench, cfg.SkipTwins, cfg.SkipPlanCPU = *flagConv, *flagNoTwin, *flagNoCPU
	if *flagPlans != "" {
		cfg.Plans = strings.Split(*flagPlans, ",")
	}
	for _, b := range strings.Split(*flagBatch, ",") {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			t.Fatalf("-batches: %q is not a batch size", b)
		}
		cfg.Batches = append(cfg.Batches, n)
	}
	rep, err := Run(cfg, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Diffs != 0 {
			t.Errorf("%s: %d of %d outputs differ from the CPU twin", r.Name, r.Diffs, r.Elems)
		}
	}
	el, df := rep.Totals()
	t.Logf("%d checks, %d outputs compared, %d differ", len(rep.Results), el, df)
}
