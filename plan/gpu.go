package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// # GPU plans, format version 2
//
// A GPU plan is a version 1 plan with two changes:
//
//	"VOUCHPLAN 2\n"                      the version line
//	header          as in version 1, with format_version 2 and a "gpu"
//	                object (the GPU type below)
//	padding         zero bytes up to a multiple of 64 from the file start
//	weights         as in version 1, then zero bytes up to a multiple of 64
//	GPU section     the kernel image: gpu.kernels.image_bytes bytes whose
//	                SHA-256 is gpu.kernels.image_sha256 (the encoding of
//	                cuda.Image: PTX and cubin for one architecture)
//
// The GPU section is the last gpu.kernels.image_bytes bytes of the file.
// A CPU plan (version 1) has no "gpu" object and no section, so its bytes
// and digest are what they were before GPU plans existed. The plan digest
// covers the whole file, the kernels included.
//
// The layers' placement (gpu.layers) lists every top-level layer, in the
// plan's order, with the backend that runs it: "cuda" (an exact-mode GPU
// kernel, named) or "cpu" (vouch's CPU kernel inside the same plan, with
// the reason). Exact mode performs the CPU contract's arithmetic in the
// same order, so the CPU layers of the same plan replay a GPU run's bits.

// FormatVersionGPU is the format of plans with a GPU section.
const FormatVersionGPU = 2

const versionLineGPU = "VOUCHPLAN 2\n"

// maxGPUImage bounds the GPU section a header may claim.
const maxGPUImage = 256 << 20

// GPU is the GPU part of a plan header.
type GPU struct {
	// Device is the device kind: "cuda".
	Device string `json:"device"`
	// Mode is "exact": the CPU's bits, replayable on any CPU.
	Mode string `json:"mode"`
	// Arch is the architecture the cubin was compiled for ("sm_90"); a
	// device of another architecture refuses the plan.
	Arch    string      `json:"arch"`
	Build   GPUEnv      `json:"build"`
	Kernels GPUKernels  `json:"kernels"`
	Layers  []Placement `json:"layers"`
	// Image is the GPU section's bytes: set by Decode, written by AddGPU.
	Image []byte `json:"-"`
}

// GPUEnv is the machine the GPU plan was built on.
type GPUEnv struct {
	GPU               string `json:"gpu"`                // e.g. "NVIDIA H200"
	ComputeCapability string `json:"compute_capability"` // e.g. "9.0"
	Driver            string `json:"driver,omitempty"`   // the driver release, e.g. "580.159.04"
	CUDA              string `json:"cuda"`               // the driver's CUDA version, e.g. "13.0"
	NVRTC             string `json:"nvrtc"`              // the NVRTC that compiled the kernels, e.g. "13.0"
}

// GPUKernels are the digests of the compiled kernels.
type GPUKernels struct {
	Source       string   `json:"source"`        // the CUDA C source's name
	SourceSHA256 string   `json:"source_sha256"` // its digest
	Options      []string `json:"options"`       // the NVRTC options
	PTXSHA256    string   `json:"ptx_sha256"`    // compute_XX PTX
	CubinSHA256  string   `json:"cubin_sha256"`  // sm_XX cubin
	ImageSHA256  string   `json:"image_sha256"`  // the GPU section
	ImageBytes   int64    `json:"image_bytes"`
}

// Placement says where one top-level layer runs.
type Placement struct {
	Layer   string `json:"layer"`
	Backend string `json:"backend"`          // "cuda" or "cpu"
	Kernel  string `json:"kernel,omitempty"` // for "cuda": the GPU kernel
	Reason  string `json:"reason,omitempty"` // for "cpu": why not on the GPU
}

// Backends of a Placement.
const (
	BackendCUDA = "cuda"
	BackendCPU  = "cpu"
)

// GPULayers counts the layers placed on the GPU.
func (g *GPU) GPULayers() int {
	n := 0
	for _, l := range g.Layers {
		if l.Backend == BackendCUDA {
			n++
		}
	}
	return n
}

// AddGPU turns an encoded CPU plan into a GPU plan: the same layers,
// weights and options, the header's "gpu" object from gpu (whose image
// digests are filled in from image) and image as the GPU section. The CPU
// plan is decoded first, so a malformed one is refused.
func AddGPU(cpu []byte, gpu GPU, image []byte) ([]byte, error) {
	p, err := Decode(cpu)
	if err != nil {
		return nil, err
	}
	if p.Header.GPU != nil {
		return nil, fmt.Errorf("plan: AddGPU: the plan already has a GPU section")
	}
	if len(image) == 0 || len(image) > maxGPUImage {
		return nil, fmt.Errorf("plan: AddGPU: a GPU image of %d bytes (1 to %d)", len(image), maxGPUImage)
	}
	sum := sha256.Sum256(image)
	gpu.Kernels.ImageSHA256, gpu.Kernels.ImageBytes = hex.EncodeToString(sum[:]), int64(len(image))
	gpu.Image = nil
	hdr := p.Header
	hdr.FormatVersion = FormatVersionGPU
	hdr.GPU = &gpu
	if err := checkGPU(&hdr); err != nil {
		return nil, err
	}
	hlen := binary.LittleEndian.Uint64(cpu[len(versionLine):])
	start := alignUp(len(versionLine) + 8 + int(hlen))
	weights := cpu[start:]
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("plan: encoding header: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(versionLineGPU)
	binary.Write(&buf, binary.LittleEndian, uint64(len(js)))
	buf.Write(js)
	pad(&buf)
	buf.Write(weights)
	pad(&buf)
	buf.Write(image)
	return buf.Bytes(), nil
}

func alignUp(n int) int {
	if r := n % align; r != 0 {
		n += align - r
	}
	return n
}

// lineVersion returns the format version a version line names, or 0.
func lineVersion(line string) int {
	switch line {
	case versionLine:
		return FormatVersion
	case versionLineGPU:
		return FormatVersionGPU
	}
	return 0
}

// splitGPU checks the header's GPU object against the format version and
// returns the weights section, with the GPU section (its digest checked)
// cut off into hdr.GPU.Image.
func splitGPU(hdr *Header, rest []byte) ([]byte, error) {
	if hdr.FormatVersion != FormatVersionGPU {
		if hdr.GPU != nil {
			return nil, fmt.Errorf("%w: a version %d plan with a GPU section", ErrFormat, hdr.FormatVersion)
		}
		return rest, nil
	}
	if err := checkGPU(hdr); err != nil {
		return nil, err
	}
	k := hdr.GPU.Kernels
	if k.ImageBytes > int64(len(rest)) {
		return nil, fmt.Errorf("%w: GPU section of %d bytes, only %d bytes after the header (truncated file?)", ErrFormat, k.ImageBytes, len(rest))
	}
	cut := int64(len(rest)) - k.ImageBytes
	if cut%align != 0 {
		return nil, fmt.Errorf("%w: the GPU section does not start on a %d-byte boundary", ErrFormat, align)
	}
	img := rest[cut:]
	sum := sha256.Sum256(img)
	if hex.EncodeToString(sum[:]) != k.ImageSHA256 {
		return nil, fmt.Errorf("%w: the GPU section's SHA-256 is %x, the header says %s", ErrFormat, sum, k.ImageSHA256)
	}
	hdr.GPU.Image = img
	return rest[:cut], nil
}

// checkGPU checks a version 2 header's GPU object on its own and against
// the layer list.
func checkGPU(hdr *Header) error {
	g := hdr.GPU
	if g == nil {
		return fmt.Errorf("%w: a version %d plan without its \"gpu\" object", ErrFormat, FormatVersionGPU)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: gpu: %s", ErrFormat, fmt.Sprintf(format, a...))
	}
	if g.Device != "cuda" {
		return bad("device %q (this vouch knows \"cuda\")", g.Device)
	}
	if g.Mode != "exact" {
		return bad("mode %q (this vouch runs \"exact\")", g.Mode)
	}
	if num, ok := strings.CutPrefix(g.Arch, "sm_"); !ok || num == "" || len(num) > 4 || strings.Trim(num, "0123456789a") != "" {
		return bad("architecture %q, want sm_XX", g.Arch)
	}
	k := g.Kernels
	for name, d := range map[string]string{"image": k.ImageSHA256, "ptx": k.PTXSHA256, "cubin": k.CubinSHA256, "source": k.SourceSHA256} {
		if !isHexDigest(d) {
			return bad("%s digest %q is not a hex SHA-256", name, d)
		}
	}
	if k.ImageBytes < 1 || k.ImageBytes > maxGPUImage {
		return bad("image of %d bytes (1 to %d)", k.ImageBytes, maxGPUImage)
	}
	layers := hdr.Graph.Layers
	if len(g.Layers) != len(layers) {
		return bad("placement of %d layers, the plan has %d", len(g.Layers), len(layers))
	}
	for i, p := range g.Layers {
		if p.Layer != layers[i].Name {
			return bad("placement %d names layer %q, the plan's layer %d is %q", i, p.Layer, i, layers[i].Name)
		}
		switch {
		case p.Backend == BackendCUDA && p.Kernel != "":
		case p.Backend == BackendCPU:
		default:
			return bad("layer %q: backend %q kernel %q (want cuda with a kernel, or cpu)", p.Layer, p.Backend, p.Kernel)
		}
	}
	return nil
}

func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}
