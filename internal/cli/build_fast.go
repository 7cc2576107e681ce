package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/quant"
)

// FastBuild are the fast-mode settings of `vouch build --device cuda
// --precision fp16|bf16|int8|best` (issue 19): the GPU layers a fast
// kernel supports run it in that precision, and every other layer keeps
// the exact plan's kernel (the CPU layers of the plan are the exact
// plan's: fp32).
type FastBuild struct {
	// Precision is fp16, bf16, int8, best, or fp32 (every layer exact
	// unless Layers says otherwise).
	Precision string
	// Layers are the --layer-precision overrides; fp32 keeps a layer exact.
	Layers map[string]plan.Precision
	// Quant is the calibration and evaluation data and the calibrator
	// (--calib, --calib-cache, --calibrator, --eval-data): int8 scales come
	// from it, and the accuracy evidence runs on it.
	Quant compile.QuantOptions
	// MaxKL bounds the mean KL divergence of the outputs against the
	// exact plan under best (MaxRelError for outputs of one value a row,
	// whose softmax says nothing).
	MaxKL, MaxRelError float64
}

// Fast-mode defaults: the seeds ask quantized models for KL < 0.01.
const (
	DefaultMaxKL       = 0.01
	DefaultMaxRelError = 0.01
)

// fastPrecisions are the precisions a fast layer can ask for.
var fastPrecisions = []plan.Precision{plan.FP32, plan.FP16, plan.BF16, plan.Int8}

// splitPrecision decides, after the flags are parsed, whether a build is
// a fast GPU build: --device cuda with a --precision other than fp32 or a
// --layer-precision. A fast build's --precision and --layer-precision go
// to o.GPU.Fast and the CPU layers are built at fp32 (and, once build
// has read the data, without the calibration and evaluation data: so that
// they are, byte for byte, the exact plan's); any other build parses the layer precisions as the precision pass's.
func (o *BuildOptions) splitPrecision(layerPrec []string) error {
	d, err := parseDevice(o.GPU.Device)
	if err != nil {
		return err
	}
	if d.Kind != exec.DeviceCUDA || (o.Compile.Precision == "fp32" && len(layerPrec) == 0) {
		m := map[string]string{}
		for _, v := range layerPrec {
			if err := compile.ParseLayerPrecision(m, v); err != nil {
				return fmt.Errorf("%w: --layer-precision: %v", ErrUsage, err)
			}
		}
		if len(m) > 0 {
			o.Compile.Quant.LayerPrecision = m
		}
		return nil
	}
	f := &FastBuild{Precision: o.Compile.Precision, Layers: map[string]plan.Precision{}, MaxKL: o.maxKL, MaxRelError: o.maxRelError}
	switch plan.Precision(f.Precision) {
	case plan.FP32, plan.FP16, plan.BF16, plan.Int8, "best":
	default:
		return fmt.Errorf("%w: --precision %q with --device %s: want fp16, bf16, int8 or best (GPU fast kernels), or fp32 (exact)", ErrUsage, f.Precision, d)
	}
	for _, v := range layerPrec {
		name, p, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("%w: --layer-precision %q: want NAME=fp32|fp16|bf16|int8", ErrUsage, v)
		}
		if !containsPrecision(fastPrecisions, plan.Precision(p)) {
			return fmt.Errorf("%w: --layer-precision %q: precision %q is not fp32, fp16, bf16 or int8", ErrUsage, v, p)
		}
		if _, dup := f.Layers[name]; dup {
			return fmt.Errorf("%w: --layer-precision: layer %q given two precisions", ErrUsage, name)
		}
		f.Layers[name] = plan.Precision(p)
	}
	if !(f.MaxKL >= 0) || !(f.MaxRelError >= 0) {
		return fmt.Errorf("%w: --max-kl and --max-rel-error must be non-negative", ErrUsage)
	}
	o.GPU.Fast = f
	o.Compile.Precision = "fp32"
	return nil
}

func containsPrecision(ps []plan.Precision, p plan.Precision) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// requested is the precision layer name asks for.
func (f *FastBuild) requested(name string) plan.Precision {
	if p, ok := f.Layers[name]; ok {
		return p
	}
	return plan.Precision(f.Precision)
}

// fastBuild turns res's exact CPU plan into a fast GPU plan (the GPU build
// of gpuBuild, with fast kernels), measures it against the exact plan on
// the build GPU when there is one of the plan's architecture, falls back
// sensitive layers under best, and records it all in the log and report.
func fastBuild(d exec.Device, arch string, env engine.Env, n *cuda.NVRTC, f *FastBuild, res *compile.Result, log *buildlog.Log, w io.Writer) error {
	types := res.Graph.Types
	// What was asked for, and the data's digests: the plan header's
	// options are the exact build's, which had neither.
	q := f.Quant
	log.Info("gpu-fast", "requested", map[string]any{"precision": f.Precision, "layer_precision": f.Layers, "max_kl": f.MaxKL,
		"max_rel_error": f.MaxRelError, "calibrator": q.Calibrator, "percentile": q.Percentile, "calib_sha256": q.CalibSHA256,
		"calib_cache_sha256": q.CacheSHA256, "eval_sha256": q.EvalSHA256})
	fo := fastOptions{Precision: plan.Precision(f.Precision), Layers: f.Layers}
	int8 := f.int8Layers(res)
	if f.Precision == "best" {
		// best: int8 where the layer has a kernel and a scale, fp16
		// elsewhere, then the measured fallback.
		fo.Precision = plan.FP16
		if f.Quant.Calib == nil && f.Quant.Cache == nil {
			log.Info("gpu-fast", "best-without-int8", map[string]any{"reason": "no --calib or --calib-cache: int8 needs scales; best starts from fp16"})
			int8 = nil
		}
	}
	if len(int8) > 0 {
		in, skipped, err := compile.CalibrateInputs(res.Graph, int8, compile.Options{Quant: f.Quant}, builtin.Registry(), log)
		if err != nil {
			return fmt.Errorf("vouch build --device %s --precision %s: %w", d, f.Precision, err)
		}
		for _, name := range quant.SortedNames(skipped) {
			log.Info("gpu-fast", "no-int8-input", map[string]any{"layer": name, "reason": skipped[name]})
		}
		fo.Scales = in.Scales
		res.CalibrationCache, res.Report.Precision = in.Cache, in.Report
	}
	if f.Precision == "best" {
		fo.Layers = bestStart(res, fo, f.Layers)
	}
	b, sec, notes, err := buildFast(res.Plan, res.Graph, types, n, arch, env, fo)
	if err != nil {
		return fmt.Errorf("vouch build --device %s --precision %s: %w", d, f.Precision, err)
	}
	p, err := plan.Decode(b)
	if err != nil {
		return err
	}
	rep := &buildlog.GPUReport{Mode: sec.Mode, Arch: arch, Contract: p.Header.GPU.Contract, Requested: f.Precision}
	for _, nt := range notes {
		rep.Notes = append(rep.Notes, buildlog.LayerNote{Layer: nt.Layer, Reason: nt.Reason})
		log.Info("gpu-fast", "stays-exact", map[string]any{"layer": nt.Layer, "reason": nt.Reason})
	}
	if why := evidenceMissing(env, arch, f); why != "" {
		if f.Precision == "best" {
			return fmt.Errorf("vouch build --device %s --precision best: %s; best measures each layer's sensitivity on the build GPU", d, why)
		}
		rep.AccuracyMissing = why
		log.Warn("gpu-fast", "accuracy-not-measured", map[string]any{"reason": why, "message": "fast plan's accuracy against the exact plan not measured: " + why})
		res.Report.Warnings = append(res.Report.Warnings, "accuracy of the fast plan against the exact plan not measured: "+why)
	} else {
		ev, err := newEvidence(res.Plan, d, f.Quant)
		if err != nil {
			return err
		}
		acc, stats, err := ev.measure(b)
		if err != nil {
			return fmt.Errorf("vouch build --device %s: measuring the fast plan against the exact plan: %w", d, err)
		}
		if f.Precision == "best" {
			fb := &fallback{ev: ev, cpuPlan: res.Plan, exact: engine.Place(res.Graph, types), bound: f.bound, log: log}
			if b, acc, err = fb.run(p, acc, stats); err != nil {
				return err
			}
			rep.Fallbacks = fb.fallbacks
			if p, err = plan.Decode(b); err != nil {
				return err
			}
			rep.Mode, rep.Contract = p.Header.GPU.Mode, p.Header.GPU.Contract
		}
		rep.Accuracy = acc
		logAccuracy(log, acc)
	}
	rep.Layers = reportLayers(p)
	res.Plan, res.Digest = b, plan.Digest(b)
	res.Report.PlanSHA256, res.Report.PlanPrecision, res.Report.GPU = res.Digest, string(p.Precision()), rep
	logPlacement(log, p.Header.GPU, arch)
	printFast(w, d, p, rep)
	return nil
}

// int8Layers are the layers of res asking for int8 (best: every layer
// with weights, int8 being its first choice).
func (f *FastBuild) int8Layers(res *compile.Result) []string {
	var out []string
	for _, n := range res.Graph.Nodes {
		if p := f.requested(n.Name); p == plan.Int8 || (f.Precision == "best" && !hasOverride(f, n.Name)) {
			out = append(out, n.Name)
		}
	}
	return out
}

func hasOverride(f *FastBuild, name string) bool { _, ok := f.Layers[name]; return ok }

// bestStart is best's first placement, as per-layer precisions: int8
// where a fast int8 kernel takes the layer (with its scale), else fp16
// (fo.Precision), the --layer-precision overrides kept.
func bestStart(res *compile.Result, fo fastOptions, user map[string]plan.Precision) map[string]plan.Precision {
	layers := map[string]plan.Precision{}
	if fo.Scales != nil {
		p8, _ := placeFast(res.Graph, res.Graph.Types, fastOptions{Precision: plan.Int8, Scales: fo.Scales})
		for _, p := range p8 {
			if p.Fast() {
				layers[p.Layer] = plan.Int8
			}
		}
	}
	for k, v := range user {
		layers[k] = v
	}
	return layers
}

// evidenceMissing says why the fast plan's accuracy cannot be measured
// here, or "".
func evidenceMissing(env engine.Env, arch string, f *FastBuild) string {
	switch {
	case env.Device.Name == "":
		return fmt.Sprintf("no GPU here (built with --arch %s): the fast plan's accuracy against the exact plan is measured on a GPU of its architecture; rebuild on one to record it", arch)
	case env.Device.Arch() != arch:
		return fmt.Sprintf("the GPU here (%s) is %s, the plan is for %s: its fast kernels cannot run here", env.Device.Name, env.Device.Arch(), arch)
	case f.Quant.EvalData == nil && f.Quant.Calib == nil:
		return "no --eval-data or --calib: no inputs to run the fast and the exact plan on"
	}
	return ""
}

// reportLayers is every layer's row in the report: its placement with its
// precision spelled out (a fast kernel's, else what the layer's kind
// computes in).
func reportLayers(p *plan.Plan) []buildlog.GPULayer {
	var out []buildlog.GPULayer
	for i, pl := range p.Header.GPU.Layers {
		prec := pl.Precision
		if !pl.Fast() {
			l := p.Header.Graph.Layers[i]
			prec = plan.LayerPrecision(l.Domain, l.Kind)
		}
		out = append(out, buildlog.GPULayer{Layer: pl.Layer, Backend: pl.Backend, Kernel: pl.Kernel, Precision: string(prec), Reason: pl.Reason})
	}
	return out
}

// logPlacement writes every layer's placement and the kernels to the log.
func logPlacement(log *buildlog.Log, sec *plan.GPU, arch string) {
	for _, l := range sec.Layers {
		f := map[string]any{"layer": l.Layer, "backend": l.Backend}
		if l.Kernel != "" {
			f["kernel"] = l.Kernel
		}
		if l.Precision != "" {
			f["precision"] = l.Precision
		}
		if l.Reason != "" {
			f["reason"] = l.Reason
		}
		log.Info("gpu-placement", "layer", f)
	}
	k := map[string]any{"arch": arch, "mode": sec.Mode, "gpu": sec.Build.GPU, "driver": sec.Build.Driver, "cuda": sec.Build.CUDA,
		"nvrtc": sec.Build.NVRTC, "ptx_sha256": sec.Kernels.PTXSHA256, "cubin_sha256": sec.Kernels.CubinSHA256, "image_bytes": sec.Kernels.ImageBytes}
	if sec.Contract != "" {
		k["contract"] = sec.Contract
	}
	log.Info("gpu-placement", "kernels", k)
}

// fastCounts says how many layers run fast kernels, by precision: ", fast:
// fp16 40, int8 8", or "" for none.
func fastCounts(g *plan.GPU) string {
	by := map[plan.Precision]int{}
	for _, l := range g.Layers {
		if l.Fast() {
			by[l.Precision]++
		}
	}
	var parts []string
	for _, pr := range fastPrecisions {
		if by[pr] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", pr, by[pr]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ", fast: " + strings.Join(parts, ", ")
}

// printFast says what a fast build made.
func printFast(w io.Writer, d exec.Device, p *plan.Plan, rep *buildlog.GPUReport) {
	g := p.Header.GPU
	gpuName := g.Build.GPU
	if gpuName == "" {
		gpuName = "no GPU here"
	}
	fmt.Fprintf(w, "gpu     %s %s %s (%s, NVRTC %s): %d of %d layers on the GPU%s; label %s\n", d, g.Arch, g.Mode, gpuName, g.Build.NVRTC, g.GPULayers(), len(g.Layers), fastCounts(g), p.Precision())
	if len(rep.Notes) > 0 {
		fmt.Fprintf(w, "exact   %d layers asked for fast stay exact (the report's gpu.notes say why)\n", len(rep.Notes))
	}
	for _, fb := range rep.Fallbacks {
		fmt.Fprintf(w, "fallback %s: %s\n", fb.Layer, fb.Reason)
	}
	if a := rep.Accuracy; a != nil {
		fmt.Fprintf(w, "accuracy fast vs exact on %s (%d samples, %s):\n", a.Data, a.Samples, a.Device)
		for _, o := range a.Outputs {
			fmt.Fprintf(w, "  %s: max abs %.3g, mean abs %.3g, max rel %.3g, mean rel %.3g, KL %.3g, top-1 agreement %.2f%%\n",
				o.Name, o.AbsMax, o.AbsMean, o.RelMax, o.RelMean, o.KL, 100*o.Top1)
		}
	} else {
		fmt.Fprintf(w, "accuracy NOT MEASURED: %s\n", rep.AccuracyMissing)
	}
	if g.Contract != "" {
		fmt.Fprintf(w, "contract %s\n", g.Contract)
	}
}
