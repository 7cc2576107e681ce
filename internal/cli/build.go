package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tune"
)

// BuildOptions are the settings of `vouch build`.
type BuildOptions struct {
	Model    string
	Out      string
	LogFile  string
	Report   string
	Verbose  bool
	Profiles []string
	Compile  compile.Options

	TimingCache    string // timing cache file
	Calib          string // calibration data file or directory
	CalibCache     string // calibration cache file (read if present, always written by int8 builds)
	EvalData       string // evaluation inputs
	EvalLabels     string // evaluation labels
	Bundle         string // write a bundle here
	Key            string // sign the bundle with this private key
	ModelName      string
	ModelVersion   string
	SourceRevision string
	Features       string // feature names, one a line (kept in the bundle for explanations)
	Background     string // background rows for explanations (.pb/.npy), kept in the bundle
	Labels         string // class labels, one a line (kept in the bundle: they name each decision)
	LabelOutput    string // the output the labels name (default: the first with one class a label)

	// GPU: --device cuda builds a GPU plan (device.go), with fast kernels
	// when --precision asks for them (build_fast.go).
	GPU GPUBuild

	maxKL, maxRelError float64 // --max-kl, --max-rel-error (FastBuild)
}

func runBuild(ctx context.Context, m *Main, args []string) error {
	o := BuildOptions{Compile: compile.DefaultOptions()}
	fs := m.newFlagSet("build", "build MODEL.onnx -o NAME.plan [--profile ...] [--log FILE] [--bundle FILE.vouch --key KEY] [-v]", `
Compiles an ONNX model ahead of time into a frozen engine plan: constant and
shape folding, Identity/Dropout and dead-node elimination, BatchNormalization
folding, Conv/Gemm/MatMul + bias/residual + activation fusion, shape
inference, tactic choice and an arena memory plan. Every decision is written
to the build log (JSON lines, --log; default NAME.plan.log.jsonl) and
summarized in the build report (NAME.plan.report.json).

Building the same model with the same options gives a byte-identical plan:
the default tactic policy (heuristic) chooses each kernel by rule, so the
plan is a pure function of the model, the options, the vouch version and
the target's CPU features. --tactics timed times the candidates instead;
its plans are reproducible from the same timing cache (--timing-cache),
which a bundle of a timed build carries.

Profiles fix the range of each dynamic input dimension, like TensorRT's:
  --profile 'input_ids:1x16,8x128,32x512'   (MIN,OPT,MAX shapes; ';' separates inputs)
Without --profile a leading dynamic dimension spans 1..512 and any other
1..512; the build log says what was chosen.`)
	fs.StringVar(&o.Out, "o", "", "the plan file to write (default: MODEL name with .plan)")
	fs.StringVar(&o.LogFile, "log", "", "the build log file (default: PLAN.log.jsonl)")
	fs.BoolVar(&o.Verbose, "v", false, "also print the build log to stderr")
	var profiles multiFlag
	fs.Var(&profiles, "profile", "an optimization profile NAME:MIN,OPT,MAX[;NAME:...]; repeat for more profiles")
	fs.StringVar(&o.Compile.Tactics, "tactics", o.Compile.Tactics, "tactic policy: heuristic (by rule, no timing: reproducible) or timed (time every candidate, keep the fastest; reproducible only from the same --timing-cache)")
	fs.IntVar(&o.Compile.TuneReps, "tune-reps", o.Compile.TuneReps, "timed runs per tactic candidate (the fastest is kept)")
	fs.IntVar(&o.Compile.TuneThreads, "tune-threads", 0, "worker threads to time tactics with (0: GOMAXPROCS); choose the deployment's")
	fs.StringVar(&o.TimingCache, "timing-cache", "", "read timings from FILE if it exists and write them back: rebuilding with the same cache gives a byte-identical plan")
	fs.StringVar(&o.Compile.Precision, "precision", o.Compile.Precision, "layer precision: fp32, fp16 (weights stored as float16), int8 (post-training quantization, needs --calib or --calib-cache) or best (int8, falling back to fp32 until within --max-accuracy-drop); with --device cuda: fp16, bf16, int8 or best select the GPU's fast tensor-core kernels (docs/gpu-fast.md), the CPU layers stay fp32")
	fs.Float64Var(&o.maxKL, "max-kl", DefaultMaxKL, "--device cuda --precision best: the largest mean KL divergence of the outputs against the exact plan")
	fs.Float64Var(&o.maxRelError, "max-rel-error", DefaultMaxRelError, "--device cuda --precision best, for outputs of one value a row: the largest mean relative error against the exact plan")
	var layerPrec multiFlag
	fs.Var(&layerPrec, "layer-precision", "NAME=fp32|fp16|int8 (with --device cuda also bf16): override one layer's precision (repeatable)")
	fs.StringVar(&o.Calib, "calib", "", "int8 calibration data: a .pb/.npy batch file or a directory of them")
	fs.StringVar(&o.CalibCache, "calib-cache", "", "calibration cache: read scales from FILE if it exists (skipping calibration for the tensors it holds); int8 builds write it (default PLAN.calib.txt)")
	fs.StringVar(&o.Compile.Quant.Calibrator, "calibrator", o.Compile.Quant.Calibrator, "activation calibrator: minmax, entropy (TensorRT style) or percentile")
	fs.IntVar(&o.Compile.Quant.WeightBits, "int8-weight-bits", 8, "int8 weight width: 8, or 7 (|w| <= 63, ONNX Runtime's reduce_range: u8 x s7 tiles on AVX2 CPUs without VNNI)")
	fs.Float64Var(&o.Compile.Quant.Percentile, "percentile", o.Compile.Quant.Percentile, "percentile for --calibrator percentile")
	fs.StringVar(&o.EvalData, "eval-data", "", "evaluation inputs (.pb/.npy file or directory): the report compares fp32 and reduced-precision accuracy")
	fs.StringVar(&o.EvalLabels, "eval-labels", "", "evaluation labels (.pb/.npy, integer class per sample)")
	fs.Float64Var(o.Compile.Quant.MaxAccuracyDrop, "max-accuracy-drop", *o.Compile.Quant.MaxAccuracyDrop, "precision best: the largest accuracy drop (percentage points) allowed (0: none)")
	fs.StringVar(&o.Bundle, "bundle", "", "also write a bundle (plan, build log, report, metadata, provenance) to FILE.vouch")
	fs.StringVar(&o.Key, "key", "", "sign the bundle with this private key (from vouch keygen)")
	fs.StringVar(&o.ModelName, "name", "", "model name recorded in the bundle (default: from the file name)")
	fs.StringVar(&o.ModelVersion, "model-version", "1.0.0", "model version recorded in the bundle (immutable in the registry)")
	fs.StringVar(&o.Features, "features", "", "feature names of the model's input, one a line: kept in the bundle, they name the reasons of each decision")
	fs.StringVar(&o.Labels, "labels", "", "class labels of the model's output, one a line in output order: kept in the bundle, they name every decision (served and replayed)")
	fs.StringVar(&o.LabelOutput, "label-output", "", "the output --labels name (default: the first whose last dimension has one class a label)")
	fs.StringVar(&o.Background, "background", "", "background rows (.pb/.npy float matrix, at most 1024 rows) kept in the bundle: tree covers and the KernelSHAP baseline of the explanations")
	fs.StringVar(&o.SourceRevision, "source-revision", "", "VCS revision of the model's source repository, recorded in the provenance")
	fs.Int64Var(&o.Compile.MaxBytes, "max-bytes", 0, "the plan's memory budget in bytes: the arena and every value at the profile's max shapes must fit (0: the runtime's default, 4 GiB)")
	o.GPU.flags(fs)
	var disable multiFlag
	fs.Var(&disable, "disable-pass", "skip a pass by name (repeatable): "+strings.Join(compile.PassNames(), ", "))
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one MODEL argument", ErrUsage)
	}
	o.Model, o.Profiles, o.Compile.DisabledPasses = pos[0], profiles, disable
	if err := o.splitPrecision(layerPrec); err != nil {
		return err
	}
	if o.Out == "" {
		o.Out = strings.TrimSuffix(filepath.Base(o.Model), filepath.Ext(o.Model)) + ".plan"
	}
	if o.LogFile == "" {
		o.LogFile = o.Out + ".log.jsonl"
	}
	o.Report = o.Out + ".report.json"
	for _, p := range o.Profiles {
		prof, err := compile.ParseProfile(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		o.Compile.Profiles = append(o.Compile.Profiles, prof)
	}
	return m.build(o)
}

func (m *Main) build(o BuildOptions) error {
	src, err := os.ReadFile(o.Model)
	if err != nil {
		return err
	}
	model, err := onnx.Decode(src, filepath.Dir(o.Model))
	if err != nil {
		return fmt.Errorf("%s: %w", o.Model, err)
	}
	var logBuf bytes.Buffer
	log := buildlog.New(&logBuf)
	if o.Verbose {
		log.W = teeWriter{&logBuf, m.Stderr}
	}
	name := o.ModelName
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(o.Model), filepath.Ext(o.Model))
		if filepath.Base(o.Model) == "model.onnx" {
			name = filepath.Base(filepath.Dir(o.Model))
		}
	}
	var key *bundle.PrivateKey
	if o.Key != "" {
		if o.Bundle == "" {
			return fmt.Errorf("%w: --key signs a bundle: give --bundle FILE too", ErrUsage)
		}
		if key, err = bundle.ReadPrivateKey(o.Key); err != nil {
			return err
		}
	}
	var cacheBytes []byte
	if o.Compile.Tactics == compile.TacticsTimed {
		// A timed plan is reproducible only from its timings: keep them,
		// for the bundle, even when no --timing-cache file was named.
		o.Compile.TimingCache = tune.NewCache()
	}
	if o.TimingCache != "" {
		o.Compile.TimingCache = tune.NewCache()
		if b, err := os.ReadFile(o.TimingCache); err == nil {
			if o.Compile.TimingCache, err = tune.ReadCache(bytes.NewReader(b)); err != nil {
				return fmt.Errorf("%s: %w", o.TimingCache, err)
			}
			log.Info("tactics", "timing-cache", map[string]any{"file": o.TimingCache, "sha256": plan.Digest(b), "timings": o.Compile.TimingCache.Len()})
		} else if !os.IsNotExist(err) {
			return err
		}
	}
	if err := loadQuantData(&o, log); err != nil {
		return err
	}
	if f := o.GPU.Fast; f != nil {
		// The data goes to the fast build; the CPU layers are the exact
		// plan's, built without it.
		f.Quant, o.Compile.Quant = o.Compile.Quant, compile.DefaultOptions().Quant
	}
	var bar *progressbar.ProgressBar
	o.Compile.Progress = func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(m.Stderr), progressbar.OptionSetDescription("tuning tactics"),
				progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetVisibility(isTerminal(m.Stderr)))
		}
		bar.Set(done)
	}
	start := time.Now()
	res, err := compile.Build(model, src, name, "vouch "+Version, o.Compile, builtin.Registry(), log)
	if err != nil {
		// Keep the log of a failed build: it shows how far it got.
		_ = writeFileAtomic(o.LogFile, logBuf.Bytes(), 0o644)
		return err
	}
	if bar != nil {
		bar.Finish()
	}
	if err := gpuBuild(o.GPU, res, log, m.Stdout); err != nil {
		return err
	}
	if o.Compile.TimingCache != nil {
		var buf bytes.Buffer
		if err := o.Compile.TimingCache.Encode(&buf); err != nil {
			return err
		}
		cacheBytes = buf.Bytes()
	}
	if o.TimingCache != "" {
		if err := writeFileAtomic(o.TimingCache, cacheBytes, 0o644); err != nil {
			return err
		}
	}
	var calibBytes []byte
	if res.CalibrationCache != nil {
		if o.CalibCache == "" {
			o.CalibCache = o.Out + ".calib.txt"
		}
		calibBytes = res.CalibrationCache
		if err := writeFileAtomic(o.CalibCache, calibBytes, 0o644); err != nil {
			return err
		}
		if res.Report.Precision != nil {
			res.Report.Precision.CalibrationCache = plan.Digest(calibBytes)
		}
		defer fmt.Fprintf(m.Stdout, "calib   %s\n", o.CalibCache)
	}
	rep, err := json.MarshalIndent(res.Report, "", "  ")
	if err != nil {
		return err
	}
	for path, b := range map[string][]byte{o.Out: res.Plan, o.LogFile: logBuf.Bytes(), o.Report: append(rep, '\n')} {
		if err := writeFileAtomic(path, b, 0o644); err != nil {
			return err
		}
	}
	if o.Bundle != "" {
		explainBytes, err := buildExplainData(o, res.Plan)
		if err != nil {
			return err
		}
		b, err := bundle.New(bundle.Metadata{
			Model:       bundle.Model{Name: name, Version: o.ModelVersion},
			Source:      bundle.Artifact{Name: filepath.Base(o.Model), Digest: "sha256:" + res.Report.SourceSHA256, Revision: o.SourceRevision},
			Plan:        bundle.PlanInfo{FormatVersion: strconv.Itoa(planFormat(res.Plan)), RequiredCPUFeatures: res.RequiredFeatures},
			Options:     res.Options,
			Environment: bundle.HostEnvironment(Version),
			StartedOn:   start.UTC(),
			FinishedOn:  time.Now().UTC(),
		}, bundle.Contents{Plan: res.Plan, BuildLog: logBuf.Bytes(), Report: append(rep, '\n'), TimingCache: cacheBytes, CalibrationCache: calibBytes, Explain: explainBytes})
		if err != nil {
			return err
		}
		if key != nil {
			if err := bundle.Sign(b, key); err != nil {
				return err
			}
		}
		if err := b.WriteFile(o.Bundle); err != nil {
			return err
		}
		signed := "unsigned: sign it with vouch sign"
		if key != nil {
			signed = "signed by " + key.ID()
		}
		defer fmt.Fprintf(m.Stdout, "bundle  %s (%s)\n", o.Bundle, signed)
	}
	printSummary(m, res.Report, time.Since(start))
	fmt.Fprintf(m.Stdout, "plan    %s (sha256 %s, %d bytes)\nlog     %s\nreport  %s\n", o.Out, res.Digest[:16], len(res.Plan), o.LogFile, o.Report)
	return nil
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.b.Write(p)
	return t.a.Write(p)
}

func printSummary(m *Main, r buildlog.Report, took time.Duration) {
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s\n", r.Model)
	fmt.Fprintf(tw, "nodes in → layers out\t%d → %d\n", r.NodesIn, r.LayersOut)
	kinds := make([]string, 0, len(r.Fusions))
	for k := range r.Fusions {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(tw, "fusions %s\t%d\n", k, r.Fusions[k])
	}
	fmt.Fprintf(tw, "constants folded\t%d\n", r.FoldedConsts)
	tactics := map[string]int{}
	for _, l := range r.Layers {
		tactics[l.Tactic]++
	}
	tnames := make([]string, 0, len(tactics))
	for t := range tactics {
		tnames = append(tnames, t)
	}
	sort.Strings(tnames)
	for _, t := range tnames {
		fmt.Fprintf(tw, "tactic %s\t%d layers\n", t, tactics[t])
	}
	fmt.Fprintf(tw, "precision (of the layers)\t%s\n", r.PlanPrecision)
	fmt.Fprintf(tw, "peak arena\t%s\n", humanBytes(r.PeakArenaBytes))
	if c := r.Concats; c != nil {
		fmt.Fprintf(tw, "concats (max shapes)\t%d in place, %d partly, %d copied\n", c.InPlace, c.Partial, c.Copied)
	}
	fmt.Fprintf(tw, "FLOPs (opt profile)\t%.3g\n", float64(r.TotalFLOPs))
	fmt.Fprintf(tw, "build time\t%v\n", took.Round(time.Millisecond))
	tw.Flush()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// isPlan reports whether a file starts with the plan version line.
func isPlan(b []byte) bool { return bytes.HasPrefix(b, []byte("VOUCHPLAN ")) }

// isTerminal reports whether w is a terminal (progress bars only go there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
