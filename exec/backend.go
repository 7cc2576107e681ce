package exec

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vouchml/vouch/cuda/emu"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// The device seam. Options.Device names where a plan's layers run:
//
//	"" or "cpu"      vouch's CPU kernels (any plan; a GPU plan too, since
//	                 every layer of one has a CPU kernel: this is how a
//	                 GPU-served trace replays on a machine without a GPU)
//	"cuda", "cuda:N" CUDA device N (0 by default), exact mode: the plan
//	                 must be a GPU plan (plan format 2) built for that
//	                 device's architecture; its layers placed on "cuda"
//	                 run with the exact kernels, the others on the CPU,
//	                 and the outputs have the CPU's bits
//	"emu"            the CPU, running a fast-mode GPU plan with the bits
//	                 the GPU gives: its fast layers through the emulated
//	                 tensor-core arithmetic of the plan's architecture
//	                 (cuda/emu), the others through the CPU kernels
//
// A device is chosen by the caller, never by the plan or the machine: a
// GPU plan asked to run on the CPU runs on the CPU, a CPU plan asked to
// run on a GPU is refused (ErrDevice), and a GPU missing, or of another
// architecture, is an error, never a silent fall-back.

// DeviceCUDA is the CUDA backend's device kind.
const DeviceCUDA = "cuda"

// DeviceEmu is the emulation backend's device kind.
const DeviceEmu = "emu"

// ErrDevice wraps every refusal to run a plan on the device asked for.
var ErrDevice = errors.New("exec: device")

// Device is a parsed Options.Device.
type Device struct {
	Kind    string // DeviceCPU or DeviceCUDA
	Ordinal int    // the CUDA device number
}

// maxOrdinal bounds a device number.
const maxOrdinal = 1023

// ParseDevice parses "", "cpu", "cuda" or "cuda:N".
func ParseDevice(s string) (Device, error) {
	switch s {
	case "", DeviceCPU:
		return Device{Kind: DeviceCPU}, nil
	case DeviceEmu:
		return Device{Kind: DeviceEmu}, nil
	case DeviceCUDA:
		return Device{Kind: DeviceCUDA}, nil
	}
	num, ok := strings.CutPrefix(s, DeviceCUDA+":")
	if ok {
		n, err := strconv.Atoi(num)
		if err == nil && n >= 0 && n <= maxOrdinal && strconv.Itoa(n) == num {
			return Device{Kind: DeviceCUDA, Ordinal: n}, nil
		}
	}
	return Device{}, fmt.Errorf("%w: unknown device %q (want cpu, cuda, cuda:N or emu)", ErrDevice, s)
}

// String is the canonical name: "cpu" or "cuda:N".
func (d Device) String() string {
	switch d.Kind {
	case DeviceCUDA:
		return fmt.Sprintf("%s:%d", DeviceCUDA, d.Ordinal)
	case DeviceEmu:
		return DeviceEmu
	}
	return DeviceCPU
}

// Program is a plan loaded on a device.
type Program interface {
	// Run runs the plan on inputs (graph-input order, already checked)
	// and returns the outputs in graph-output order. It MUST be safe for
	// concurrent use and MUST return the bits the plan's CPU layers give.
	Run(ctx context.Context, inputs []*tensor.Tensor) ([]*tensor.Tensor, error)
	// Backend names the kernels ("cuda-exact"), Device the device, as the
	// audit record says them.
	Backend() string
	Device() string
	Close() error
}

// NewPlanEngine prepares plan p to run under o on the device o.Device
// names (see the device seam above). On the CPU it is NewEngine of the
// plan's graph.
func NewPlanEngine(p *plan.Plan, reg *kernel.Registry, o Options) (*Engine, error) {
	d, err := ParseDevice(o.Device)
	if err != nil {
		return nil, err
	}
	cpu := o
	cpu.Device = DeviceCPU
	switch d.Kind {
	case DeviceCPU:
		return NewEngine(p.Graph, reg, cpu)
	case DeviceEmu:
		return newEmuEngine(p, reg, cpu)
	}
	if p.Header.GPU == nil {
		return nil, fmt.Errorf("%w: the plan was built for the CPU, it has no GPU kernels: rebuild it with vouch build --device %s", ErrDevice, d)
	}
	// The CPU engine checks every layer has a CPU kernel, and runs the
	// inputs' checks.
	e, err := NewEngine(p.Graph, reg, cpu)
	if err != nil {
		return nil, err
	}
	prog, err := openCUDA(p, d, e.ex)
	if err != nil {
		return nil, err
	}
	if err := warm(prog, p); err != nil {
		prog.Close()
		return nil, err
	}
	e.dev = prog
	e.opts.Device = d.String()
	return e, nil
}

// Backend names the kernels the engine runs: "cpu" or the device
// program's ("cuda-exact").
func (e *Engine) Backend() string {
	if e.dev != nil {
		return e.dev.Backend()
	}
	if e.emuArch != "" {
		return emu.Backend(e.emuArch)
	}
	return DeviceCPU
}

// DeviceName names the device for an audit record: "cpu", or the GPU with
// its architecture and driver.
func (e *Engine) DeviceName() string {
	if e.dev != nil {
		return e.dev.Device()
	}
	if e.emuArch != "" {
		return "cpu (emulating " + e.emuArch + " tensor cores)"
	}
	return DeviceCPU
}

// newEmuEngine runs fast plan p on the CPU with its GPU's bits (cuda/emu).
func newEmuEngine(p *plan.Plan, reg *kernel.Registry, o Options) (*Engine, error) {
	g, err := emu.Rewrite(p)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrDevice, DeviceEmu, err)
	}
	e, err := NewEngine(g, reg.With(emu.Domain, emu.Ops(reg)), o)
	if err != nil {
		return nil, err
	}
	e.emuArch = p.Header.GPU.Arch
	e.opts.Device = DeviceEmu
	return e, nil
}

// DeviceTime is the device time of the latest run's layers when the
// device program measures it (the CUDA program: between events around
// its layers, without the copies), else 0.
func (e *Engine) DeviceTime() time.Duration {
	if t, ok := e.dev.(interface{ LastDeviceTime() time.Duration }); ok {
		return t.LastDeviceTime()
	}
	return 0
}

// Close releases the device program, if any.
func (e *Engine) Close() error {
	if e.dev != nil {
		return e.dev.Close()
	}
	return nil
}

// runDevice runs checked inputs on the device program.
func (e *Engine) runDevice(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	g := e.ex.g
	args := make([]*tensor.Tensor, len(g.Inputs))
	for i, v := range g.Inputs {
		args[i] = inputs[v.Name]
	}
	outs, err := e.dev.Run(ctx, args)
	if err != nil {
		return nil, err
	}
	res := make(map[string]*tensor.Tensor, len(outs))
	for i, o := range g.Outputs {
		res[o.Name] = outs[i]
	}
	return res, nil
}

// warm captures a device program's CUDA graphs before the engine is handed
// out (so before a server reports ready): a program that runs as graphs
// (every layer on the GPU) runs twice at each profile's opt shapes, with
// zero inputs; the first run allocates that shape's buffers, the second
// captures its graph, and the first request of that shape replays it. A
// run's arithmetic never depends on this: a warmed shape and a cold one
// give the same bits. Programs with CPU layers (no graphs) are not warmed.
//
// A program that can tell device faults from the model's own errors
// (DeviceFault) skips a shape at which the model itself cannot run: an
// opt shape from the default profile that the model refuses (tiny_bert's
// 64 positions at 128 tokens: a Gather index out of range, which the CPU
// gives as well) has nothing to capture, and a request of that shape gets
// the model's error as on the CPU. A device fault still refuses the plan.
func warm(prog Program, p *plan.Plan) error {
	g, ok := prog.(interface{ Graphs() bool })
	if !ok || !g.Graphs() {
		return nil
	}
	df, _ := prog.(interface{ DeviceFault(error) bool })
	for i, shapes := range WarmShapes(p) {
		in := make([]*tensor.Tensor, len(shapes))
		for j, v := range p.Graph.Inputs {
			in[j] = tensor.New(v.Type.DType, shapes[j]...)
		}
		for range 2 {
			if _, err := prog.Run(context.Background(), in); err != nil {
				if df != nil && !df.DeviceFault(err) {
					break
				}
				return fmt.Errorf("%w: warm-up at profile %d's opt shapes %v: %w", ErrDevice, i, shapes, err)
			}
		}
	}
	return nil
}

// WarmShapes is the input shapes the device warm-up runs, in graph-input
// order: each profile's opt shapes (an input the profile does not name
// takes its static shape; a profile that leaves a shape unknown, or
// gives one of another rank, is skipped), each distinct set once.
func WarmShapes(p *plan.Plan) [][][]int {
	var out [][][]int
	seen := map[string]bool{}
	for _, pr := range p.Header.Profiles {
		shapes := make([][]int, len(p.Graph.Inputs))
		ok := true
		for j, v := range p.Graph.Inputs {
			if r, in := pr.Inputs[v.Name]; in && (!v.Type.RankKnown || len(r.Opt) == len(v.Type.Shape)) {
				shapes[j] = r.Opt
			} else if in {
				ok = false
			} else if s, static := v.Type.Static(); static {
				shapes[j] = s
			} else {
				ok = false
			}
		}
		key := fmt.Sprint(shapes)
		if ok && !seen[key] {
			seen[key] = true
			out = append(out, shapes)
		}
	}
	return out
}
