package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/replay"
	"github.com/vouchml/vouch/tensor"
)

// TestSplitPrecision: --precision with --device cuda selects fast kernels
// (and keeps the CPU layers fp32), on the CPU it is the precision pass's;
// bad values are usage errors naming what is wrong.
func TestSplitPrecision(t *testing.T) {
	for _, c := range []struct {
		device, precision string
		layers            []string
		fast              *FastBuild // nil: not a fast build
		compile           string     // the CPU layers' precision
		err               string
	}{
		{"", "fp16", nil, nil, "fp16", ""},
		{"cpu", "int8", []string{"a=fp32"}, nil, "int8", ""},
		{"cuda", "fp32", nil, nil, "fp32", ""},
		{"cuda:1", "fp16", nil, &FastBuild{Precision: "fp16", Layers: map[string]plan.Precision{}}, "fp32", ""},
		{"cuda", "best", []string{"fc=bf16", "conv=fp32"}, &FastBuild{Precision: "best", Layers: map[string]plan.Precision{"fc": plan.BF16, "conv": plan.FP32}}, "fp32", ""},
		{"cuda", "fp32", []string{"fc=int8"}, &FastBuild{Precision: "fp32", Layers: map[string]plan.Precision{"fc": plan.Int8}}, "fp32", ""},
		{"cuda", "fp8", nil, nil, "", `--precision "fp8" with --device cuda:0: want fp16, bf16, int8 or best`},
		{"cuda", "fp16", []string{"fc=fp4"}, nil, "", `precision "fp4" is not fp32, fp16, bf16 or int8`},
		{"cuda", "fp16", []string{"fc=fp16", "fc=int8"}, nil, "", `layer "fc" given two precisions`},
		{"cuda", "fp16", []string{"=fp16"}, nil, "", "want NAME=fp32|fp16|bf16|int8"},
		{"cpu", "fp16", []string{"fc=bf16"}, nil, "", `precision "bf16" is not fp32, fp16 or int8`},
	} {
		o := BuildOptions{Compile: compile.DefaultOptions(), GPU: GPUBuild{Device: c.device}, maxKL: DefaultMaxKL, maxRelError: DefaultMaxRelError}
		o.Compile.Precision = c.precision
		err := o.splitPrecision(c.layers)
		if c.err != "" {
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %s %v: %v, want %q", c.device, c.precision, c.layers, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s %v: %v", c.device, c.precision, c.layers, err)
		}
		f := o.GPU.Fast
		if (f == nil) != (c.fast == nil) || o.Compile.Precision != c.compile {
			t.Fatalf("%s %s %v: fast %+v, CPU layers %s", c.device, c.precision, c.layers, f, o.Compile.Precision)
		}
		if f != nil {
			if f.Precision != c.fast.Precision || len(f.Layers) != len(c.fast.Layers) || f.MaxKL != DefaultMaxKL {
				t.Errorf("%s %s: fast %+v, want %+v", c.device, c.precision, f, c.fast)
			}
			for k, v := range c.fast.Layers {
				if f.Layers[k] != v {
					t.Errorf("%s: layer %s %q, want %q", c.precision, k, f.Layers[k], v)
				}
			}
		} else if c.device == "cpu" && len(o.Compile.Quant.LayerPrecision) != len(c.layers) {
			t.Errorf("cpu layer precisions %v", o.Compile.Quant.LayerPrecision)
		}
	}
}

// fastDigits is digits_cnn's exact CPU plan and a fast plan made from it
// as BuildFast makes one (engine.Section's placement with the GPU layers
// that have weights on fast fp16 kernels, plan.AddGPU), with a GPU section
// that is no real image: enough for everything but running it on a GPU.
func fastDigits(t *testing.T) (cpu []byte, fast *plan.Plan, fastBytes []byte) {
	dir := t.TempDir()
	pl := filepath.Join(dir, "digits.plan")
	if code, _, errs := vouch(t, "build", "../../../shared/models/digits_cnn/model.onnx", "-o", pl); code != 0 {
		t.Fatalf("build: %d %s", code, errs)
	}
	cpu, err := os.ReadFile(pl)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	img := &cuda.Image{Arch: "sm_90", NVRTC: "13.0", Source: "fast.cu", SourceDigest: plan.Digest([]byte("src")), PTX: []byte("ptx\x00"), Cubin: []byte("\x7fELF")}
	sec := engine.Section(p.Graph, nil, img, engine.Env{})
	n := 0
	for i, l := range p.Header.Graph.Layers {
		if sec.Layers[i].Backend == plan.BackendCUDA && (strings.Contains(l.Kind, "Fused") || l.Kind == "Gemm" || l.Kind == "Conv") {
			sec.Layers[i].Kernel, sec.Layers[i].Precision = plan.FastKernel(plan.FP16, "conv(test)"), plan.FP16
			n++
		}
	}
	if n == 0 {
		for i := range sec.Layers {
			sec.Layers[i] = plan.Placement{Layer: sec.Layers[i].Layer, Backend: plan.BackendCUDA, Kernel: plan.FastKernel(plan.FP16, "op"), Precision: plan.FP16}
		}
	}
	sec.Mode = plan.ModeFast
	fastBytes, err = plan.AddGPU(cpu, sec, img.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if fast, err = plan.Decode(fastBytes); err != nil {
		t.Fatal(err)
	}
	return cpu, fast, fastBytes
}

// TestFastPlanReport: the report and the summary list every layer's
// precision (a fast kernel's, else fp32), the notes, and say so when the
// accuracy was not measured; the label is the layers', fp16.
func TestFastPlanReport(t *testing.T) {
	_, p, _ := fastDigits(t)
	if p.Precision() != plan.FP16 {
		t.Fatalf("label %q", p.Precision())
	}
	rows := reportLayers(p)
	fast := 0
	for i, r := range rows {
		want := "fp32"
		if p.Header.GPU.Layers[i].Fast() {
			want, fast = "fp16", fast+1
		}
		if r.Precision != want || r.Layer != p.Header.Graph.Layers[i].Name {
			t.Errorf("row %d: %+v, want precision %s", i, r, want)
		}
	}
	why := evidenceMissing(engine.Env{}, "sm_90", &FastBuild{})
	if !strings.Contains(why, "no GPU here (built with --arch sm_90)") {
		t.Fatalf("evidence missing: %q", why)
	}
	var dev cuda.DeviceInfo
	dev.Name, dev.Major, dev.Minor = "NVIDIA A100", 8, 0
	if why := evidenceMissing(engine.Env{Device: dev}, "sm_90", &FastBuild{}); !strings.Contains(why, "is sm_80, the plan is for sm_90") {
		t.Fatalf("cross build: %q", why)
	}
	dev.Major = 9
	if why := evidenceMissing(engine.Env{Device: dev}, "sm_90", &FastBuild{}); !strings.Contains(why, "no --eval-data or --calib") {
		t.Fatalf("no data: %q", why)
	}
	rep := &buildlog.GPUReport{Mode: p.Header.GPU.Mode, Arch: "sm_90", Layers: rows, AccuracyMissing: why,
		Notes: []buildlog.LayerNote{{Layer: "x", Reason: "unsupported geometry"}}}
	var out bytes.Buffer
	d, _ := exec.ParseDevice("cuda:0")
	printFast(&out, d, p, rep)
	for _, s := range []string{"sm_90 fast", "fast: fp16 ", "label fp16", "1 layers asked for fast stay exact", "accuracy NOT MEASURED: no GPU here (built with --arch sm_90)", "contract fast mode: batch-invariant"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, out.String())
		}
	}
	if fast == 0 {
		t.Fatal("no fast layer in the test plan")
	}
}

// TestFastVariant: best's variants of a fast plan share its kernels'
// image; with every layer back on its exact kernel the plan is an exact
// plan labelled fp32, with one fast layer a fast plan labelled fp16.
func TestFastVariant(t *testing.T) {
	cpu, p, _ := fastDigits(t)
	cp, err := plan.Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	exact := engine.Place(cp.Graph, nil)
	fb := &fallback{cpuPlan: cpu, exact: exact, log: buildlog.New(nil)}
	b, err := fb.variant(p, exact)
	if err != nil {
		t.Fatal(err)
	}
	v, err := plan.Decode(b)
	if err != nil || v.Header.GPU.Mode != plan.ModeExact || v.Precision() != plan.FP32 || v.Header.GPU.Contract != "" || !bytes.Equal(v.Header.GPU.Image, p.Header.GPU.Image) {
		t.Fatalf("all exact: %v %+v", err, v.Header.GPU)
	}
	cur := append([]plan.Placement(nil), p.Header.GPU.Layers...)
	sens := map[int]float64{}
	var fastIdx []int
	for i, l := range cur {
		if l.Fast() {
			fastIdx = append(fastIdx, i)
			sens[i] = float64(len(fastIdx))
		}
	}
	order := sortedBySensitivity(sens, cur)
	if len(order) != len(fastIdx) || order[0] != fastIdx[len(fastIdx)-1] {
		t.Fatalf("order %v of fast layers %v", order, fastIdx)
	}
	fb.back(cur, order[0], "test")
	if cur[order[0]] != exact[order[0]] || len(fb.fallbacks) != 1 || fb.fallbacks[0].Layer != exact[order[0]].Layer {
		t.Fatalf("fallback: %+v", fb.fallbacks)
	}
	if b, err = fb.variant(p, cur); err != nil {
		t.Fatal(err)
	}
	if v, err = plan.Decode(b); err != nil || (len(fastIdx) > 1) != (v.Header.GPU.Mode == plan.ModeFast) {
		t.Fatalf("one fallback: %v %+v", err, v.Header.GPU.Mode)
	}
}

// TestEvidenceRuns: the evidence runs a plan over the data in chunks and
// gathers the rows; on the CPU the exact plan against itself is bit-exact,
// and the rows equal one run of the whole batch (batch invariance).
func TestEvidenceRuns(t *testing.T) {
	cpu, fp, _ := fastDigits(t)
	x, err := quant.LoadTensor("../../../shared/models/digits_cnn/data/test_x.pb")
	if err != nil {
		t.Fatal(err)
	}
	y, err := quant.LoadTensor("../../../shared/models/digits_cnn/data/test_y.pb")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := newEvidence(cpu, exec.Device{Kind: exec.DeviceCPU}, compile.QuantOptions{EvalData: []*tensor.Tensor{x}, EvalLabels: y})
	if err != nil {
		t.Fatal(err)
	}
	if ev.samples != x.Shape[0] || ev.data != "evaluation data" || len(ev.chunks) < 2 && x.Shape[0] > maxEvidenceChunk {
		t.Fatalf("evidence: %d samples, %d chunks of %s", ev.samples, len(ev.chunks), ev.data)
	}
	p, err := plan.Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := runWhole(p, map[string]*tensor.Tensor{ev.input: x})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ev.outputs {
		s, err := replay.Compare(name, whole[name], ev.ref[name], replay.Criteria{Check: "elemwise"})
		if err != nil || !s.Exact {
			t.Fatalf("%s: the chunks' rows differ from one run of the batch: %+v %v", name, s, err)
		}
	}
	acc, stats, err := ev.measure(cpu) // on the CPU: the exact plan against itself
	if err != nil {
		t.Fatal(err)
	}
	if o := acc.Outputs[0]; !o.BitExact || o.AbsMax != 0 || o.Top1 != 1 || acc.Labelled == nil || acc.Labelled.Drop != 0 || stats[0].KL != 0 {
		t.Fatalf("the exact plan against itself: %+v %+v", acc, acc.Labelled)
	}
	// A variant best returned wholly to exact kernels has the CPU's bits
	// by contract: measured on the CPU, even for a GPU build.
	cp, err := plan.Decode(cpu)
	if err != nil {
		t.Fatal(err)
	}
	fb := &fallback{cpuPlan: cpu, exact: engine.Place(cp.Graph, nil), log: buildlog.New(nil)}
	vb, err := fb.variant(fp, fb.exact)
	if err != nil {
		t.Fatal(err)
	}
	ev.dev = exec.Device{Kind: exec.DeviceCUDA}
	if acc, _, err := ev.measure(vb); err != nil || !acc.Outputs[0].BitExact || acc.Device != "cpu" {
		t.Fatalf("an all-exact variant: %v %+v", err, acc)
	}
	f := &FastBuild{MaxKL: 0.01, MaxRelError: 0.01}
	if v, limit, what := f.bound(stats); v != 0 || limit != 0.01 || !strings.Contains(what, "KL") {
		t.Fatalf("bound: %v %v %s", v, limit, what)
	}
}

func runWhole(p *plan.Plan, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	e, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.Run(context.Background(), in)
}

// TestFastWithoutGPU: a fast build without a GPU says it needs one to
// measure the accuracy (best cannot build at all); a fast plan is refused
// on the CPU by run and serve, with what to do.
func TestFastWithoutGPU(t *testing.T) {
	_, _, fb := fastDigits(t)
	dir := t.TempDir()
	fastPlan := filepath.Join(dir, "fast.plan")
	if err := os.WriteFile(fastPlan, fb, 0o644); err != nil {
		t.Fatal(err)
	}
	input := "../../../shared/models/digits_cnn/test_data_set_0/input_0.pb"
	code, _, errs := vouch(t, "run", fastPlan, "--input", input)
	if code != 1 || !strings.Contains(errs, "pinned to its GPU architecture") || !strings.Contains(errs, "run it with --device cuda:N on a sm_90 GPU or --device emu") {
		t.Errorf("run of a fast plan on the CPU: exit %d, stderr %q", code, errs)
	}
	code, _, errs = vouch(t, "replay", "0123", "--output", "y=out.pb")
	if code != 2 || !strings.Contains(errs, "give --against EXACT.vouch too") {
		t.Errorf("replay --output without --against: exit %d, stderr %q", code, errs)
	}
	code, out, errs := vouch(t, "inspect", fastPlan)
	if code != 0 || !strings.Contains(out, "label    fp16 (from the layers)") || !strings.Contains(out, "gpu      cuda sm_90 fast: ") || !strings.Contains(out, "contract fast mode: batch-invariant") {
		t.Errorf("inspect of a fast plan: exit %d, %s%s", code, out, errs)
	}
	if _, err := cuda.Open(""); err == nil {
		t.Log("a CUDA driver is installed here: the no-GPU build cases are not checked")
		return
	}
	model := "../../../shared/models/digits_cnn/model.onnx"
	for _, prec := range []string{"fp16", "best"} {
		code, _, errs = vouch(t, "build", model, "-o", filepath.Join(dir, "f.plan"), "--device", "cuda", "--precision", prec)
		if code != 1 || !strings.Contains(errs, "no NVIDIA driver found") || !strings.Contains(errs, "accuracy against the exact plan (and best's per-layer sensitivity) is measured on the build GPU") {
			t.Errorf("--precision %s without a GPU: exit %d, stderr %q", prec, code, errs)
		}
	}
	code, _, errs = vouch(t, "build", model, "-o", filepath.Join(dir, "f.plan"), "--device", "cuda", "--arch", "sm_90", "--precision", "best")
	if code != 1 || !strings.Contains(errs, "best cannot") {
		t.Errorf("--precision best --arch without a GPU: exit %d, stderr %q", code, errs)
	}
}
