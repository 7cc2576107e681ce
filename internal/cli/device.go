package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// deviceUsage is the --device flag's help, shared by run, serve, replay
// and bench.
const deviceUsage = "where the plan's layers run: cpu; cuda:N (a plan built with vouch build --device cuda: exact mode gives the CPU's bits, fast mode its GPU architecture's); or emu (a fast-mode plan on this CPU with its GPU's bits: the emulation of that architecture's tensor cores)"

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
	// Fast is set for a fast-mode build (build_fast.go): --device cuda
	// with --precision fp16|bf16|int8|best or --layer-precision.
	Fast *FastBuild
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
	if d.Kind == exec.DeviceEmu {
		return fmt.Errorf("%w: --device emu runs fast-mode GPU plans on this CPU; build one with --device cuda[:N] --precision fp16|bf16", ErrUsage)
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
	case derr != nil && o.Fast != nil && (arch == "" || o.Fast.Precision == "best"):
		return fmt.Errorf("vouch build --device %s --precision %s: %w: a fast plan's accuracy against the exact plan (and best's per-layer sensitivity) is measured on the build GPU; build on a machine with a GPU of the plan's architecture (or give --arch sm_XX to build without the accuracy evidence, which the report then records as missing; best cannot)", d, o.Fast.Precision, derr)
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
	if o.Fast != nil {
		return fastBuild(d, arch, env, n, o.Fast, res, log, w)
	}
	b, sec, err := engine.Build(res.Plan, res.Graph, res.Graph.Types, n, arch, env)
	if err != nil {
		return fmt.Errorf("vouch build --device %s: %w", d, err)
	}
	logPlacement(log, sec, arch)
	res.Plan, res.Digest = b, plan.Digest(b)
	res.Report.PlanSHA256 = res.Digest
	if p, err := plan.Decode(b); err == nil {
		res.Report.GPU = &buildlog.GPUReport{Mode: sec.Mode, Arch: arch, Layers: reportLayers(p)}
	}
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

// newEngine returns the engine that runs a model on device: the CPU
// engine for "cpu" (an ONNX model, a CPU plan or a GPU plan), else the
// plan's GPU program.
func newEngine(g *ir.Graph, p *plan.Plan, reg *kernel.Registry, device string, cpu exec.CPU) (*exec.Engine, error) {
	d, err := parseDevice(device)
	if err != nil {
		return nil, err
	}
	if d.Kind == exec.DeviceCPU {
		if p != nil {
			if err := p.CheckCPU(); err != nil {
				return nil, fmt.Errorf("%w (run it with --device cuda:N on a %s GPU or --device emu (the emulation of its tensor cores), or run the exact plan of the same model: vouch build --device cuda without --precision)", err, p.Pinned())
			}
		}
		return exec.NewEngine(g, reg, exec.Options{CPU: cpu})
	}
	if p == nil && d.Kind == exec.DeviceEmu {
		return nil, fmt.Errorf("%w: --device emu runs fast-mode GPU plans: build one with vouch build MODEL.onnx --device cuda --precision fp16", ErrUsage)
	}
	if p == nil {
		return nil, fmt.Errorf("%w: --device %s runs engine plans: build one with vouch build MODEL.onnx --device %s", ErrUsage, d, d)
	}
	e, err := exec.NewPlanEngine(p, reg, exec.Options{Device: d.String(), CPU: cpu})
	return e, errNoGPU(d, err)
}

// gpuBench is `vouch bench --device cuda:N`'s engine: the serving engine
// on the GPU, run on the seeded inputs.
type gpuBench struct {
	eng    *exec.Engine
	inputs map[string]*tensor.Tensor
	name   string
}

func (b *gpuBench) Name() string { return b.name }
func (b *gpuBench) Run() error {
	_, err := b.eng.Run(context.Background(), b.inputs)
	return err
}
func (b *gpuBench) Close() error { return b.eng.Close() }

// benchEngine returns bench's vouch engine on device. A model compiled in
// memory gets its GPU section in memory too (NVRTC, as vouch build
// --device would); a plan file must be a GPU plan.
func benchEngine(model *bench.Model, device string, w io.Writer) (bench.Engine, error) {
	d, err := parseDevice(device)
	if err != nil {
		return nil, err
	}
	if d.Kind == exec.DeviceCPU {
		return bench.NewVouch(model)
	}
	p := model.Plan
	if p.Header.GPU == nil && model.Built {
		if p, err = gpuPlanInMemory(p, d); err != nil {
			return nil, err
		}
	}
	eng, err := newEngine(p.Graph, p, builtin.Registry(), device, exec.CPU{})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "device  %s, %d of %d layers on the GPU\n", eng.DeviceName(), p.Header.GPU.GPULayers(), len(p.Graph.Nodes))
	return &gpuBench{eng: eng, inputs: model.Inputs, name: "vouch-" + d.String()}, nil
}

// gpuPlanInMemory adds a GPU section, compiled here, to a plan built in
// memory.
func gpuPlanInMemory(p *plan.Plan, d exec.Device) (*plan.Plan, error) {
	info := map[string]plan.LayerInfo{}
	for _, l := range p.Header.Graph.Layers {
		info[l.Name] = plan.LayerInfo{Origin: l.Origin, Tactic: l.Tactic, Precision: l.Precision, FLOPs: l.FLOPs}
	}
	cpu, err := plan.Encode(p.Header, p.Graph, info)
	if err != nil {
		return nil, err
	}
	if err := ir.Infer(p.Graph, builtin.Registry(), nil); err != nil {
		return nil, err
	}
	res := &compile.Result{Plan: cpu, Graph: p.Graph}
	if err := gpuBuild(GPUBuild{Device: d.String()}, res, buildlog.New(io.Discard), io.Discard); err != nil {
		return nil, err
	}
	return plan.Decode(res.Plan)
}

// planFormat is the format version of an encoded plan: a GPU plan's is
// plan.FormatVersionGPU.
func planFormat(b []byte) int {
	if bytes.HasPrefix(b, []byte("VOUCHPLAN 2\n")) {
		return plan.FormatVersionGPU
	}
	return plan.FormatVersion
}
