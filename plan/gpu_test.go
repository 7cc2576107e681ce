package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func hexSum(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

func testGPU(layers []Layer) GPU {
	g := GPU{Device: "cuda", Mode: "exact", Arch: "sm_90",
		Build: GPUEnv{GPU: "NVIDIA H200", ComputeCapability: "9.0", Driver: "580.159.04", CUDA: "13.0", NVRTC: "13.0"},
		Kernels: GPUKernels{Source: "exact.cu", SourceSHA256: hexSum("src"), Options: []string{"--fmad=false"},
			PTXSHA256: hexSum("ptx"), CubinSHA256: hexSum("cubin")}}
	for _, l := range layers {
		g.Layers = append(g.Layers, Placement{Layer: l.Name, Backend: BackendCUDA, Kernel: "vx_add"})
	}
	return g
}

func gpuPlan(t testing.TB) (cpu, gpu []byte) {
	cpu = tinyPlan(t)
	p, err := Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err = AddGPU(cpu, testGPU(p.Header.Graph.Layers), []byte("vouch-cuda-image 1\nnot a real image, 45 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	return cpu, gpu
}

func TestGPURoundTrip(t *testing.T) {
	cpu, b := gpuPlan(t)
	if !strings.HasPrefix(string(b), versionLineGPU) {
		t.Fatalf("version line %q", b[:12])
	}
	p, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	g := p.Header.GPU
	if g == nil || p.Header.FormatVersion != FormatVersionGPU {
		t.Fatalf("no GPU section decoded: version %d", p.Header.FormatVersion)
	}
	if string(g.Image) != "vouch-cuda-image 1\nnot a real image, 45 bytes" || g.Kernels.ImageBytes != int64(len(g.Image)) || g.Kernels.ImageSHA256 != hexSum(string(g.Image)) {
		t.Fatalf("image %q, header %+v", g.Image, g.Kernels)
	}
	if g.Build.GPU != "NVIDIA H200" || g.Arch != "sm_90" || g.GPULayers() != 1 {
		t.Fatalf("header %+v", g)
	}
	// The CPU part is the CPU plan's: the same graph and weights.
	c, err := Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Graph.Nodes) != len(p.Graph.Nodes) || c.Graph.Nodes[0].Name != p.Graph.Nodes[0].Name ||
		c.Graph.Initializers["w"].String() != p.Graph.Initializers["w"].String() {
		t.Fatal("the GPU plan's graph differs from the CPU plan's")
	}
	if c.Header.GPU != nil {
		t.Fatal("a CPU plan decoded with a GPU section")
	}
	// Re-encoding the CPU part of a decoded GPU plan gives the CPU plan back.
	hdr := p.Header
	hdr.GPU = nil
	again, err := Encode(hdr, p.Graph, map[string]LayerInfo{"add": {Origin: []string{"a", "b"}, Tactic: "portable", Precision: "fp32"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, cpu) {
		t.Fatal("the CPU part of a GPU plan does not re-encode to the CPU plan")
	}
	if _, err := AddGPU(b, *g, g.Image); err == nil {
		t.Fatal("a second GPU section accepted")
	}
}

func TestGPUTruncatedAndCorrupt(t *testing.T) {
	_, b := gpuPlan(t)
	for i := 0; i < len(b); i++ {
		if _, err := Decode(b[:i]); err == nil {
			t.Fatalf("truncation at %d of %d accepted", i, len(b))
		}
	}
	// Every flipped byte of the GPU section breaks its digest.
	n := len("vouch-cuda-image 1\nnot a real image, 45 bytes")
	for i := len(b) - n; i < len(b); i++ {
		c := bytes.Clone(b)
		c[i] ^= 0x20
		if _, err := Decode(c); !errors.Is(err, ErrFormat) {
			t.Fatalf("flipped GPU section byte %d: %v", i, err)
		}
	}
	// Extra bytes before the section move it off its boundary.
	c := append(bytes.Clone(b[:len(b)-n]), append([]byte{0}, b[len(b)-n:]...)...)
	if _, err := Decode(c); !errors.Is(err, ErrFormat) {
		t.Fatalf("misaligned section: %v", err)
	}
}

func TestGPUHeaderChecks(t *testing.T) {
	cpu := tinyPlan(t)
	p, err := Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	img := []byte("image")
	for _, tc := range []struct {
		name string
		edit func(*GPU)
		want string
	}{
		{"device", func(g *GPU) { g.Device = "rocm" }, `device "rocm"`},
		{"mode", func(g *GPU) { g.Mode = "fast" }, `mode "fast"`},
		{"arch", func(g *GPU) { g.Arch = "compute_90" }, `architecture "compute_90"`},
		{"digest", func(g *GPU) { g.Kernels.PTXSHA256 = "xyz" }, "ptx digest"},
		{"missing layer", func(g *GPU) { g.Layers = nil }, "placement of 0 layers, the plan has 1"},
		{"wrong layer", func(g *GPU) { g.Layers[0].Layer = "other" }, `names layer "other"`},
		{"backend", func(g *GPU) { g.Layers[0].Backend = "tpu" }, `backend "tpu"`},
		{"cuda without kernel", func(g *GPU) { g.Layers[0].Kernel = "" }, `backend "cuda" kernel ""`},
	} {
		g := testGPU(p.Header.Graph.Layers)
		tc.edit(&g)
		if _, err := AddGPU(cpu, g, img); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := AddGPU(cpu, testGPU(p.Header.Graph.Layers), nil); err == nil {
		t.Error("an empty image accepted")
	}
}

func FuzzDecodeGPU(f *testing.F) {
	cpu, gpu := gpuPlan(f)
	_, _, fast := fastPlan(f)
	f.Add(gpu)
	f.Add(cpu)
	f.Add(fast)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		if p.Header.FormatVersion == FormatVersionGPU {
			if p.Header.GPU == nil || int64(len(p.Header.GPU.Image)) != p.Header.GPU.Kernels.ImageBytes {
				t.Fatal("a GPU plan decoded without its section")
			}
			if p.Header.GPU.Fast() && p.Header.Precision != p.Precision() {
				t.Fatalf("a fast plan labelled %q decoded; its layers are %s", p.Header.Precision, p.Precision())
			}
		} else if p.Header.GPU != nil {
			t.Fatal("a CPU plan decoded with a GPU section")
		}
	})
}
