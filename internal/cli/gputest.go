package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/cuda/gputest"
)

func runGPUTest(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("gputest", "gputest [--device N] [--bench] [--plan P.plan --batches 1,32,256] [flags]", `
Runs vouch's GPU suite on an NVIDIA GPU: compiles the exact-mode CUDA
kernels with NVRTC for the device, runs every kernel against its CPU twin
on random shapes with NaN, ±Inf, ±0 and subnormal inputs and requires equal
bits, checks CUDA graph replay, batch and stream invariance, and with
--bench times the exact SGEMM against cuBLAS FP32 (TF32 off) and every
Conv kernel on resnet18's and ResNet-50's convolutions (--convbench alone).
--plan times GPU plans through the serving engine at each of --batches
(end to end, and the layers alone between events) and checks there that a
row's bits do not depend on its batch nor on concurrent runs' streams.
Without a GPU it fails with the driver's error.`)
	cfg := gputest.Config{}
	fs.IntVar(&cfg.Device, "device", 0, "CUDA device ordinal")
	fs.StringVar(&cfg.Driver, "libcuda", "", "path of libcuda.so.1 (default: the loader's path, then the usual places)")
	fs.StringVar(&cfg.NVRTC, "nvrtc", "", "path of libnvrtc.so (default: libnvrtc.so.13, .12, .11.2 in the usual places)")
	fs.StringVar(&cfg.CUBLAS, "cublas", "", "path of libcublas.so (the benchmark's peer)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "random seed of the inputs")
	fs.IntVar(&cfg.Cases, "cases", 12, "random cases per kernel, besides the fixed ones")
	fs.BoolVar(&cfg.Bench, "bench", false, "time the exact SGEMM against cuBLAS")
	fs.IntVar(&cfg.BenchSize, "bench-size", 4096, "the benchmark's M = N = K (a multiple of 128)")
	fs.IntVar(&cfg.BenchReps, "bench-reps", 20, "timed repetitions per benchmark variant")
	fs.StringVar(&cfg.PTXOut, "ptx-out", "", "write the compiled PTX to this file")
	fs.BoolVar(&cfg.ConvBench, "convbench", false, "time every Conv kernel on resnet18's and ResNet-50's convolutions")
	fs.BoolVar(&cfg.SkipTwins, "no-twins", false, "skip the twin checks (benchmarks and --plan only)")
	var models, plans multiFlag
	fs.Var(&models, "model", "an ONNX model to run node by node on the GPU against the CPU executor (repeatable)")
	fs.Var(&plans, "plan", "a GPU plan to time and check through the serving engine (repeatable)")
	batches := fs.String("batches", "1", "comma-separated batch sizes for --plan")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", ErrUsage, rest)
	}
	for _, b := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n < 1 || n > 1<<16 {
			return fmt.Errorf("%w: --batches: %q is not a batch size (1 to 65536)", ErrUsage, b)
		}
		cfg.Batches = append(cfg.Batches, n)
	}
	cfg.Models, cfg.Plans = models, plans
	rep, err := gputest.Run(cfg, m.Stdout)
	if err != nil {
		return err
	}
	if n := rep.Failed(); n > 0 {
		_, d := rep.Totals()
		return fmt.Errorf("%w: %d checks, %d outputs", gputest.ErrDiffer, n, d)
	}
	return nil
}
