package engine

import (
	"fmt"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/kernels"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
)

// Env is the build machine's GPU as a GPU plan records it.
type Env struct {
	Device  cuda.DeviceInfo // the build GPU (Name empty: none, --arch given)
	Release string          // the driver release, e.g. "580.159.04"
	NVRTC   string          // the NVRTC version that compiles
}

// Section returns a GPU plan's header object for graph g (the compiled
// layer graph, types its inferred value types) with the kernels of img.
func Section(g *ir.Graph, types map[string]ir.Type, img *cuda.Image, env Env) plan.GPU {
	b := plan.GPUEnv{GPU: env.Device.Name, Driver: env.Release, NVRTC: img.NVRTC}
	if env.Device.Name != "" {
		b.ComputeCapability = fmt.Sprintf("%d.%d", env.Device.Major, env.Device.Minor)
		b.CUDA = cuda.CUDAVersion(env.Device.DriverVersion)
	}
	return plan.GPU{Device: "cuda", Mode: "exact", Arch: img.Arch, Build: b,
		Kernels: plan.GPUKernels{Source: img.Source, SourceSHA256: img.SourceDigest, Options: img.Options,
			PTXSHA256: digest(img.PTX), CubinSHA256: digest(img.Cubin)},
		Layers: Place(g, types)}
}

// Build compiles the exact kernels with n for arch ("sm_90") and turns the
// encoded CPU plan of g into a GPU plan. This is the only place NVRTC runs.
func Build(cpuPlan []byte, g *ir.Graph, types map[string]ir.Type, n *cuda.NVRTC, arch string, env Env) ([]byte, *plan.GPU, error) {
	img, err := Kernels(n, arch)
	if err != nil {
		return nil, nil, err
	}
	sec := Section(g, types, img, env)
	b, err := plan.AddGPU(cpuPlan, sec, img.Encode())
	if err != nil {
		return nil, nil, err
	}
	return b, &sec, nil
}

// Kernels compiles the exact kernels with n for arch: the image Build
// stores in a GPU plan.
func Kernels(n *cuda.NVRTC, arch string) (*cuda.Image, error) {
	return cuda.Build(n, kernels.Source(), kernels.Name, arch, kernels.Options)
}
