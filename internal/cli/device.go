package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/plan"
)

// deviceUsage is the --device flag's help, shared by run, serve, replay
// and bench.
const deviceUsage = "where the plan's layers run: cpu, or cuda:N (exact mode, a plan built with vouch build --device cuda; the outputs have the CPU's bits)"

// deviceFlag registers --device on fs.
func deviceFlag(fs *flag.FlagSet, dst *string) {
	fs.StringVar(dst, "device", exec.DeviceCPU, deviceUsage)
}

// parseDevice checks a --device value; a bad one is a usage error.
func parseDevice(s string) (exec.Device, error) {
	d, err := exec.ParseDevice(s)
	if err != nil {
		return d, fmt.Errorf("%w: --device: %w", ErrUsage, err)
	}
	return d, nil
}

// GPUBuild are the GPU settings of `vouch build`.
type GPUBuild struct {
	Device string // "" or "cpu": a CPU plan; "cuda" or "cuda:N": a GPU plan
	Arch   string // the target architecture ("sm_90"); default: the device's
	// Libraries, "" searching the usual places.
	Driver, NVRTC string
}

func (g *GPUBuild) flags(fs *flag.FlagSet) {
	fs.StringVar(&g.Device, "device", "", "build a GPU plan for cuda[:N]: the exact kernels compiled with NVRTC for that device's architecture, stored in the plan with the build GPU, driver, CUDA and NVRTC versions (needs NVRTC; loading never compiles)")
	fs.StringVar(&g.Arch, "arch", "", "with --device cuda: the target architecture (sm_90, sm_80, ...; default: the device's); without a GPU here the plan records none")
	fs.StringVar(&g.NVRTC, "nvrtc", "", "with --device cuda: the path of libnvrtc.so (default: libnvrtc.so.13, .12, .11.2 in the usual places)")
}

// gpuBuild turns res's CPU plan into a GPU plan when o asks for one,
// logging every layer's placement, and says what it did on w.
func gpuBuild(o GPUBuild, res *compile.Result, log *buildlog.Log, w io.Writer) error {
	d, err := parseDevice(o.Device)
	if err != nil || d.Kind == exec.DeviceCPU {
		return err
	}
	if o.Arch != "" && !strings.HasPrefix(o.Arch, "sm_") {
		return fmt.Errorf("%w: --arch %q: want sm_XX (sm_90, sm_80, ...)", ErrUsage, o.Arch)
	}
	var env engine.Env
	drv, derr := cuda.Open(o.Driver)
	if derr == nil {
		if env.Device, derr = drv.Device(d.Ordinal); derr == nil {
			env.Release = drv.Release()
		}
	}
	arch := o.Arch
	switch {
	case derr != nil && arch == "":
		return fmt.Errorf("vouch build --device %s: %w (give --arch sm_XX to build without the GPU)", d, derr)
	case derr != nil:
		env = engine.Env{}
	case arch == "":
		arch = env.Device.Arch()
	case arch != env.Device.Arch():
		// A cross build records no build GPU: its kernels never ran here.
		env = engine.Env{}
	}
	n, err := cuda.OpenNVRTC(o.NVRTC)
	if err != nil {
		return fmt.Errorf("vouch build --device %s: %w", d, err)
	}
	b, sec, err := engine.Build(res.Plan, res.Graph, res.Graph.Types, n, arch, env)
	if err != nil {
		return fmt.Errorf("vouch build --device %s: %w", d, err)
	}
	for _, l := range sec.Layers {
		f := map[string]any{"layer": l.Layer, "backend": l.Backend}
		if l.Kernel != "" {
			f["kernel"] = l.Kernel
		}
		if l.Reason != "" {
			f["reason"] = l.Reason
		}
		log.Info("gpu-placement", "layer", f)
	}
	log.Info("gpu-placement", "kernels", map[string]any{"arch": arch, "gpu": sec.Build.GPU, "driver": sec.Build.Driver, "cuda": sec.Build.CUDA,
		"nvrtc": sec.Build.NVRTC, "ptx_sha256": sec.Kernels.PTXSHA256, "cubin_sha256": sec.Kernels.CubinSHA256, "image_bytes": sec.Kernels.ImageBytes})
	res.Plan, res.Digest = b, plan.Digest(b)
	res.Report.PlanSHA256 = res.Digest
	gpuName := sec.Build.GPU
	if gpuName == "" {
		gpuName = "no GPU here"
	}
	fmt.Fprintf(w, "gpu     %s %s exact (%s, NVRTC %s): %d of %d layers on the GPU\n", d, arch, gpuName, sec.Build.NVRTC, sec.GPULayers(), len(sec.Layers))
	return nil
}

// errNoGPU says a command asked for a GPU where there is none; the error
// keeps the driver's for errors.Is.
func errNoGPU(d exec.Device, err error) error {
	if errors.Is(err, cuda.ErrNoDriver) {
		return fmt.Errorf("--device %s: %w (run on a machine with an NVIDIA GPU, or without --device: a GPU plan runs on any CPU with the same bits)", d, err)
	}
	return err
}
