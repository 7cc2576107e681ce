package plan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// exactGPUDigest is the digest of gpuPlan's bytes as the code before fast
// mode (fa61d59) wrote them: an exact plan's header gains no field.
const exactGPUDigest = "4dad94c6646a41cb210d0a016e5b60506f174763fbc582a3df53ed344b7af4a1"

func TestExactGPUPlanUnchanged(t *testing.T) {
	_, b := gpuPlan(t)
	if d := Digest(b); d != exactGPUDigest {
		t.Fatalf("exact GPU plan digest %s, want %s (the exact plans' bytes changed)", d, exactGPUDigest)
	}
	for _, field := range []string{`"contract"`, `"precision":"fp16"`, `"precision":""`} {
		if bytes.Contains(b, []byte(field)) {
			t.Errorf("an exact GPU plan holds %s", field)
		}
	}
}

// fastPlan is breast_cancer_mlp with its first layer on a fast fp16 kernel,
// its second on the CPU and the rest on exact kernels; the options claim
// int8, which the label must ignore.
func fastPlan(t testing.TB) (cpu []byte, g GPU, fast []byte) {
	m := sharedModel(t, "breast_cancer_mlp")
	cpu, err := Encode(Header{Producer: "test", RequiredFeatures: []string{}, Options: json.RawMessage(`{"precision":"int8"}`),
		Source: Source{SHA256: "00", Opsets: map[string]int64{"": 13}}}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Header.Graph.Layers) < 3 {
		t.Fatalf("breast_cancer_mlp has %d layers, the test needs 3", len(p.Header.Graph.Layers))
	}
	g = testGPU(p.Header.Graph.Layers)
	g.Mode = ModeFast
	g.Layers[0].Kernel, g.Layers[0].Precision = FastKernel(FP16, "gemm"), FP16
	g.Layers[1] = Placement{Layer: g.Layers[1].Layer, Backend: BackendCPU, Reason: "test"}
	fast, err = AddGPU(cpu, g, []byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	return cpu, g, fast
}

func TestFastPlanRoundTrip(t *testing.T) {
	cpu, g, b := fastPlan(t)
	p, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	h := p.Header
	if !h.GPU.Fast() || h.GPU.Contract != FastContract("sm_90") || !strings.Contains(h.GPU.Contract, "pinned to this plan and sm_90 GPUs") {
		t.Fatalf("mode %q contract %q", h.GPU.Mode, h.GPU.Contract)
	}
	if h.Precision != FP16 || p.Precision() != FP16 {
		t.Fatalf("label header %q, Precision() %q; want fp16 (from the placement, not the options' int8)", h.Precision, p.Precision())
	}
	if l := h.GPU.Layers[0]; l.Precision != FP16 || l.Kernel != "fast.fp16.gemm" || !l.Fast() {
		t.Fatalf("fast placement %+v", l)
	}
	if h.GPU.Layers[2].Fast() || h.GPU.Layers[2].Precision != "" {
		t.Fatalf("exact placement %+v", h.GPU.Layers[2])
	}
	// The CPU layers stay the exact plan's: fp32.
	c, err := Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	if c.Precision() != FP32 || Label(h.Graph.Layers) != FP32 {
		t.Fatalf("CPU part labelled %q", c.Precision())
	}
	// Equal inputs give equal bytes.
	again, err := AddGPU(cpu, g, []byte("image"))
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("AddGPU is not deterministic (%v)", err)
	}
	// The same placement with every layer exact is an exact fp32 plan.
	g.Mode, g.Layers[0].Kernel, g.Layers[0].Precision = ModeExact, "vx_sgemm", ""
	e, err := AddGPU(cpu, g, []byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Decode(e); err != nil || p.Precision() != FP32 || p.Header.GPU.Contract != "" {
		t.Fatalf("exact plan: %v", err)
	}
}

func TestGPULabel(t *testing.T) {
	cuda := func(k string, p Precision) Placement { return Placement{Backend: BackendCUDA, Kernel: k, Precision: p} }
	cpu := Placement{Backend: BackendCPU}
	gemm, q8, f16 := Layer{Kind: "Gemm"}, Layer{Kind: "Q8", Domain: "vouch"}, Layer{Kind: "F16", Domain: "vouch"}
	for _, c := range []struct {
		name   string
		layers []Layer
		place  []Placement
		want   Precision
	}{
		{"exact", []Layer{gemm, gemm}, []Placement{cuda("vx_sgemm", ""), cpu}, FP32},
		{"fp16", []Layer{gemm, gemm}, []Placement{cuda("fast.fp16.gemm", FP16), cuda("vx_sgemm", "")}, FP16},
		{"bf16", []Layer{gemm, gemm}, []Placement{cuda("fast.bf16.gemm", BF16), cpu}, BF16},
		{"int8", []Layer{gemm}, []Placement{cuda("fast.int8.conv", Int8)}, Int8},
		{"fp16 and bf16", []Layer{gemm, gemm}, []Placement{cuda("fast.fp16.gemm", FP16), cuda("fast.bf16.gemm", BF16)}, Mixed},
		{"fast int8 and CPU int8", []Layer{gemm, q8}, []Placement{cuda("fast.int8.gemm", Int8), cpu}, Int8},
		{"fast fp16 and CPU int8", []Layer{gemm, q8}, []Placement{cuda("fast.fp16.gemm", FP16), cpu}, Mixed},
		{"CPU fp16 kind", []Layer{f16, gemm}, []Placement{cpu, cuda("vx_sgemm", "")}, FP16},
		// A fast kernel's precision decides, not the precision field alone.
		{"precision without fast kernel", []Layer{gemm}, []Placement{cuda("vx_sgemm", FP16)}, FP32},
	} {
		if got := GPULabel(c.layers, c.place); got != c.want {
			t.Errorf("%s: GPULabel = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestParseFastKernel(t *testing.T) {
	for _, c := range []struct {
		kernel string
		p      Precision
		op     string
		ok     bool
	}{
		{"fast.fp16.conv", FP16, "conv", true},
		{"fast.bf16.matmul", BF16, "matmul", true},
		{"fast.int8.gemm.relu", Int8, "gemm.relu", true},
		{"vx_sgemm", "", "", false},
		{"fast.fp32.conv", "", "", false},
		{"fast.fp16", "", "", false},
		{"fast.fp16.", "", "", false},
		{"fastfp16.conv", "", "", false},
	} {
		p, op, ok := ParseFastKernel(c.kernel)
		if p != c.p || op != c.op || ok != c.ok {
			t.Errorf("ParseFastKernel(%q) = %q %q %v, want %q %q %v", c.kernel, p, op, ok, c.p, c.op, c.ok)
		}
	}
	if k := FastKernel(BF16, "attention"); k != "fast.bf16.attention" {
		t.Errorf("FastKernel = %q", k)
	}
}

// rewriteHeader re-encodes a plan's header after edit, keeping the
// weights and the GPU section: a tampered plan as an attacker would write it.
func rewriteHeader(t *testing.T, b []byte, edit func(*Header)) []byte {
	t.Helper()
	hlen := binary.LittleEndian.Uint64(b[len(versionLineGPU):])
	var h Header
	if err := json.Unmarshal(b[len(versionLineGPU)+8:len(versionLineGPU)+8+int(hlen)], &h); err != nil {
		t.Fatal(err)
	}
	rest := b[alignUp(len(versionLineGPU)+8+int(hlen)):]
	edit(&h)
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.WriteString(versionLineGPU)
	binary.Write(&buf, binary.LittleEndian, uint64(len(js)))
	buf.Write(js)
	pad(&buf)
	buf.Write(rest)
	return buf.Bytes()
}

// TestFastPlanTampered: a precision or mode that the placement's kernels
// contradict is refused, by Decode and by AddGPU, naming the layer.
func TestFastPlanTampered(t *testing.T) {
	cpu, g0, fast := fastPlan(t)
	_, exact := gpuPlan(t)
	if _, err := Decode(rewriteHeader(t, fast, func(*Header) {})); err != nil {
		t.Fatalf("the untampered rewrite is refused: %v", err)
	}
	l0, l2 := g0.Layers[0].Layer, g0.Layers[2].Layer
	for _, c := range []struct {
		name string
		plan []byte
		edit func(*GPU)
		want string
	}{
		{"fast precision changed", fast, func(g *GPU) { g.Layers[0].Precision = BF16 }, `layer "` + l0 + `": kernel "fast.fp16.gemm" computes in fp16, its placement says precision "bf16"`},
		{"fast precision dropped", fast, func(g *GPU) { g.Layers[0].Precision = "" }, `layer "` + l0 + `": kernel "fast.fp16.gemm" computes in fp16`},
		{"exact kernel with a precision", fast, func(g *GPU) { g.Layers[2].Precision = FP16 }, `layer "` + l2 + `": exact kernel "vx_add" with precision "fp16"`},
		{"CPU layer with a precision", fast, func(g *GPU) { g.Layers[1].Precision = Int8 }, `a CPU layer with precision "int8"`},
		{"malformed fast kernel", fast, func(g *GPU) { g.Layers[0].Kernel = "fast.fp32.gemm"; g.Layers[0].Precision = FP32 }, `layer "` + l0 + `": fast kernel "fast.fp32.gemm"`},
		{"fast plan says exact", fast, func(g *GPU) { g.Mode = ModeExact }, `mode "exact", but layer "` + l0 + `" runs fast kernel "fast.fp16.gemm"`},
		{"exact plan says fast", exact, func(g *GPU) { g.Mode = ModeFast; g.Contract = FastContract(g.Arch) }, `mode "fast", but no layer runs a fast kernel`},
		{"contract changed", fast, func(g *GPU) { g.Contract = "bit-identical on any CPU" }, "a fast plan's contract"},
		{"contract dropped", fast, func(g *GPU) { g.Contract = "" }, "a fast plan's contract"},
		{"exact plan with a contract", exact, func(g *GPU) { g.Contract = FastContract(g.Arch) }, "an exact plan with a contract"},
	} {
		bad := rewriteHeader(t, c.plan, func(h *Header) { c.edit(h.GPU) })
		if _, err := Decode(bad); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decode gave %v, want %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		prec Precision
		want string
	}{
		{"header says fp32", FP32, `header claims precision "fp32"; its layers and their placement are fp16`},
		{"header says int8", Int8, `header claims precision "int8"`},
		{"header has no label", "", `header claims precision ""`},
	} {
		bad := rewriteHeader(t, fast, func(h *Header) { h.Precision = c.prec })
		if _, err := Decode(bad); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decode gave %v, want %q", c.name, err, c.want)
		}
	}
	// AddGPU refuses what Decode would.
	for _, c := range []struct {
		name string
		edit func(*GPU)
		want string
	}{
		{"mode exact over a fast kernel", func(g *GPU) { g.Mode = ModeExact }, `but layer "` + l0 + `" runs fast kernel`},
		{"mode fast over exact kernels", func(g *GPU) { g.Layers[0].Kernel, g.Layers[0].Precision = "vx_sgemm", "" }, "no layer runs a fast kernel"},
		{"precision disagrees", func(g *GPU) { g.Layers[0].Precision = Int8 }, `layer "` + l0 + `": kernel "fast.fp16.gemm" computes in fp16`},
	} {
		g := g0
		g.Layers = append([]Placement(nil), g0.Layers...)
		c.edit(&g)
		if _, err := AddGPU(cpu, g, []byte("image")); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddGPU, %s: %v, want %q", c.name, err, c.want)
		}
	}
}
