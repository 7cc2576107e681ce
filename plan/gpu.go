package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
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
//
// # Fast mode
//
// A fast plan (gpu.mode "fast") is a GPU plan whose placement names fast
// kernels for some layers: tensor-core kernels "fast.<precision>.<op>"
// (precision fp16, bf16 or int8; op e.g. conv, gemm, matmul, attention),
// each placement carrying that precision in its "precision" field. Every
// other layer keeps its exact GPU kernel or its CPU placement, and an
// exact or CPU placement has no "precision" (it computes in what its
// layer's kind says: fp32 for the layers a GPU build starts from). The
// mode is "fast" exactly when some placement is fast; Decode and AddGPU
// refuse a mode, or a placement's precision, that the kernels contradict.
//
// A fast plan's contract is not the CPU's: its outputs are batch-invariant
// and run-to-run deterministic, and their bits are pinned to the plan and
// the GPU architecture (gpu.arch). The header states it in gpu.contract,
// the FastContract sentence for that architecture; an exact plan has no
// contract field (its contract is the CPU's bits), so exact plans are the
// bytes they were before fast mode existed. The header's precision label
// of any GPU plan is GPULabel over its layers and placement.

// FormatVersionGPU is the format of plans with a GPU section.
const FormatVersionGPU = 2

const versionLineGPU = "VOUCHPLAN 2\n"

// maxGPUImage bounds the GPU section a header may claim.
const maxGPUImage = 256 << 20

// GPU is the GPU part of a plan header.
type GPU struct {
	// Device is the device kind: "cuda".
	Device string `json:"device"`
	// Mode is ModeExact (the CPU's bits, replayable on any CPU) when no
	// placement is fast, ModeFast when any is.
	Mode string `json:"mode"`
	// Arch is the architecture the cubin was compiled for ("sm_90"); a
	// device of another architecture refuses the plan.
	Arch string `json:"arch"`
	// Contract is a fast plan's stated contract, FastContract(Arch),
	// filled in by AddGPU; empty in an exact plan.
	Contract string      `json:"contract,omitempty"`
	Build    GPUEnv      `json:"build"`
	Kernels  GPUKernels  `json:"kernels"`
	Layers   []Placement `json:"layers"`
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
	// Precision is a fast kernel's precision (the kernel name's
	// precision component); empty for exact and CPU layers.
	Precision Precision `json:"precision,omitempty"`
	Reason    string    `json:"reason,omitempty"` // for "cpu": why not on the GPU
}

// Backends of a Placement.
const (
	BackendCUDA = "cuda"
	BackendCPU  = "cpu"
)

// Modes of a GPU plan.
const (
	ModeExact = "exact"
	ModeFast  = "fast"
)

// fastPrefix begins the kernel name of every fast layer.
const fastPrefix = "fast."

// FastKernel is the kernel name of a fast layer: "fast.<precision>.<op>".
func FastKernel(p Precision, op string) string { return fastPrefix + string(p) + "." + op }

// ParseFastKernel splits a fast kernel name into its precision and op; ok
// is false for an exact kernel's name (no "fast." prefix) and for a
// malformed fast one (a precision other than fp16, bf16 or int8, or no op).
func ParseFastKernel(kernel string) (p Precision, op string, ok bool) {
	rest, fast := strings.CutPrefix(kernel, fastPrefix)
	if !fast {
		return "", "", false
	}
	ps, op, _ := strings.Cut(rest, ".")
	switch p = Precision(ps); p {
	case FP16, BF16, Int8:
		if op != "" {
			return p, op, true
		}
	}
	return "", "", false
}

// Fast reports whether the layer runs a fast GPU kernel.
func (p Placement) Fast() bool {
	_, _, ok := ParseFastKernel(p.Kernel)
	return p.Backend == BackendCUDA && ok
}

// FastContract is the contract a fast plan for GPUs of architecture arch
// states in its header.
func FastContract(arch string) string {
	return "fast mode: batch-invariant and run-to-run deterministic; the outputs' bits are pinned to this plan and " + arch +
		" GPUs: they replay bit for bit on an " + arch + " GPU (or through an emulation of its tensor cores' arithmetic), and any CPU compares them with the exact plan within a tolerance"
}

// Fast reports whether the plan is a fast-mode plan.
func (g *GPU) Fast() bool { return g.Mode == ModeFast }

// ErrPinned is wrapped by the error of running a fast plan where its bits
// are not defined: on a CPU (whose kernels are the exact plan's).
var ErrPinned = errors.New("plan: a fast-mode plan's bits are pinned to its GPU architecture")

// Pinned is the GPU architecture a fast plan's bits are pinned to, or ""
// for an exact GPU plan and a CPU plan (whose bits any CPU reproduces).
func (p *Plan) Pinned() string {
	if g := p.Header.GPU; g != nil && g.Fast() {
		return g.Arch
	}
	return ""
}

// CheckCPU refuses a fast plan on the CPU: its CPU layers are the exact
// plan's, so a CPU run would give the exact plan's bits under the fast
// plan's digest and label.
func (p *Plan) CheckCPU() error {
	if a := p.Pinned(); a != "" {
		return fmt.Errorf("%w: this plan's outputs are those of its fast kernels on %s GPUs; on a CPU its layers would give the exact plan's bits instead", ErrPinned, a)
	}
	return nil
}

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
// digests are filled in from image, and a fast plan's contract from its
// architecture) and image as the GPU section. The header's precision label
// becomes GPULabel over the layers and gpu's placement. The CPU plan is
// decoded first, so a malformed one is refused, and so is a mode or a
// placement precision that the placement's kernels contradict.
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
	gpu.Layers = append([]Placement(nil), gpu.Layers...)
	if gpu.Mode == ModeFast {
		gpu.Contract = FastContract(gpu.Arch)
	}
	hdr := p.Header
	hdr.FormatVersion = FormatVersionGPU
	hdr.GPU = &gpu
	if len(gpu.Layers) == len(hdr.Graph.Layers) {
		hdr.Precision = GPULabel(hdr.Graph.Layers, gpu.Layers)
	}
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
	if g.Mode != ModeExact && g.Mode != ModeFast {
		return bad("mode %q (this vouch runs %q and %q)", g.Mode, ModeExact, ModeFast)
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
		if err := checkPlacementPrecision(p); err != nil {
			return bad("%v", err)
		}
	}
	return checkMode(hdr)
}

// checkPlacementPrecision checks a placement's precision against its
// kernel: a fast kernel's precision, nothing for any other.
func checkPlacementPrecision(p Placement) error {
	want, _, ok := ParseFastKernel(p.Kernel)
	switch {
	case p.Backend == BackendCUDA && strings.HasPrefix(p.Kernel, fastPrefix) && !ok:
		return fmt.Errorf("layer %q: fast kernel %q, want %s<fp16|bf16|int8>.<op>", p.Layer, p.Kernel, fastPrefix)
	case p.Backend == BackendCPU && p.Precision != "":
		return fmt.Errorf("layer %q: a CPU layer with precision %q (a CPU layer computes in what its kind says)", p.Layer, p.Precision)
	case p.Backend == BackendCUDA && !ok && p.Precision != "":
		return fmt.Errorf("layer %q: exact kernel %q with precision %q (an exact kernel computes in what its layer's kind says)", p.Layer, p.Kernel, p.Precision)
	case p.Backend == BackendCUDA && ok && p.Precision != want:
		return fmt.Errorf("layer %q: kernel %q computes in %s, its placement says precision %q", p.Layer, p.Kernel, want, p.Precision)
	}
	return nil
}

// checkMode checks the mode, the contract and the precision label against
// the placement (already matched to the layers).
func checkMode(hdr *Header) error {
	g := hdr.GPU
	var first *Placement
	for i := range g.Layers {
		if g.Layers[i].Fast() {
			first = &g.Layers[i]
			break
		}
	}
	switch {
	case g.Mode == ModeExact && first != nil:
		return fmt.Errorf("%w: gpu: mode %q, but layer %q runs fast kernel %q", ErrFormat, g.Mode, first.Layer, first.Kernel)
	case g.Mode == ModeFast && first == nil:
		return fmt.Errorf("%w: gpu: mode %q, but no layer runs a fast kernel", ErrFormat, g.Mode)
	case g.Mode == ModeFast && g.Contract != FastContract(g.Arch):
		return fmt.Errorf("%w: gpu: a fast plan's contract %q, want %q", ErrFormat, g.Contract, FastContract(g.Arch))
	case g.Mode == ModeExact && g.Contract != "":
		return fmt.Errorf("%w: gpu: an exact plan with a contract %q (its contract is the CPU's bits)", ErrFormat, g.Contract)
	}
	label := GPULabel(hdr.Graph.Layers, g.Layers)
	if (hdr.Precision != "" || g.Mode == ModeFast) && hdr.Precision != label {
		return fmt.Errorf("%w: header claims precision %q; its layers and their placement are %s", ErrFormat, hdr.Precision, label)
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
