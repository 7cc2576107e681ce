// Package compile turns a verified ir.Graph into an engine plan: it runs a
// fixed pipeline of named passes (each logging every change it makes to the
// build log), infers every shape, records per-layer decisions and encodes
// the result with package plan.
//
// Options lists every setting that can change a plan's output. It is
// serialized into the plan header and the build log, so a plan says exactly
// how it was made, and rebuilding with the same model and Options gives a
// byte-identical plan.
package compile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tune"
)

// Options are the build settings that can change a plan.
type Options struct {
	// Profiles are optimization profiles; empty means the documented
	// defaults (DefaultProfile).
	Profiles []plan.Profile `json:"profiles,omitempty"`
	// Precision is the default layer precision: fp32, fp16 (weights stored
	// as float16), int8 (post-training quantization) or best (int8 with
	// fp32 fallbacks to meet Quant.MaxAccuracyDrop); see precision.go.
	Precision string `json:"precision"`
	// Quant holds the per-layer overrides, calibration and evaluation.
	Quant QuantOptions `json:"quant,omitzero"`
	// Tactics is the tactic policy. "heuristic" (the default) takes each
	// kernel's preferred candidate by its rule (the candidates come ordered
	// by a rule over the layer's shapes and attributes), so a build is a
	// pure function of (model, options, vouch version, target features)
	// and rebuilding gives a byte-identical plan on any host. "timed"
	// times every candidate at the first profile's opt shapes and keeps
	// the fastest: timings vary from run to run on a loaded machine, so a
	// timed plan is reproducible only from the same timing cache (which a
	// bundle carries).
	Tactics string `json:"tactics"`
	// TuneReps is the number of timed runs per candidate (the fastest is kept).
	TuneReps int `json:"tune_reps"`
	// TuneThreads is the number of worker threads candidates are timed
	// with (0: the process default, GOMAXPROCS). Plans run with any thread
	// count give the same bits; this only decides which tactic is fastest
	// for the deployment's thread count.
	TuneThreads int `json:"tune_threads,omitempty"`
	// TimingCache supplies and collects timings (not part of the options'
	// JSON: the build log records its digest). Nil means an empty cache.
	TimingCache *tune.Cache `json:"-"`
	// Progress, when set, is called as layers are tuned.
	Progress func(done, total int) `json:"-"`
	// TargetFeatures are the CPU features of the machines the plan is
	// for: the plan's required features are those its layers' kernels use
	// among them. Empty means this machine's.
	TargetFeatures []string `json:"target_features"`
	// MaxBytes is the plan's memory budget: the arena and every value at
	// the profiles' max shapes must fit it, or the build fails (0:
	// exec.DefaultMaxBytes, the runtime's default budget per run).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// DisabledPasses names passes to skip (for debugging a build).
	DisabledPasses []string `json:"disabled_passes,omitempty"`
}

// The tactic policies (Options.Tactics).
const (
	TacticsHeuristic = "heuristic"
	TacticsTimed     = "timed"
)

// The defaults of the settings whose zero value also means the default
// (see DefaultOptions).
const (
	DefaultCalibrator      = quant.Percentile
	DefaultPercentile      = 99.99
	DefaultMaxAccuracyDrop = 0.5 // percentage points
)

// DefaultOptions returns the defaults, the one place they are written
// (`vouch build`'s flags take theirs from here): fp32, heuristic tactics
// (5 timed runs per candidate when timing is asked for), the percentile
// calibrator at 99.99, and at most 0.5 percentage points of accuracy lost
// under precision best. Build serialises options in their canonical form,
// where a setting equal to its default is left out, so a plan built with
// DefaultOptions has the digest of one built with the zero-valued
// settings.
func DefaultOptions() Options {
	drop := float64(DefaultMaxAccuracyDrop)
	return Options{Precision: "fp32", Tactics: TacticsHeuristic, TuneReps: 5, TargetFeatures: []string{},
		Quant: QuantOptions{Calibrator: DefaultCalibrator, Percentile: DefaultPercentile, MaxAccuracyDrop: &drop}}
}

// canonical returns o in the form Build serialises: see DefaultOptions.
func (o Options) canonical() Options {
	o.Quant = o.Quant.canonical(o.Precision)
	return o
}

func (o Options) valid() error {
	switch o.Precision {
	case "fp32", "fp16", "int8", "best":
	default:
		return fmt.Errorf("compile: precision %q is not supported (fp32, fp16, int8, best)", o.Precision)
	}
	if err := o.Quant.valid(o.Precision); err != nil {
		return err
	}
	switch o.Tactics {
	case TacticsHeuristic, TacticsTimed:
	default:
		return fmt.Errorf("compile: tactic policy %q is not supported (timed, heuristic)", o.Tactics)
	}
	if o.TuneThreads < 0 || o.TuneThreads > 1024 {
		return fmt.Errorf("compile: tune_threads %d out of range 0..1024", o.TuneThreads)
	}
	if o.MaxBytes < 0 {
		return fmt.Errorf("compile: max_bytes %d is negative", o.MaxBytes)
	}
	if o.TuneReps < 0 || o.TuneReps > 1000 {
		return fmt.Errorf("compile: tune_reps %d out of range 0..1000", o.TuneReps)
	}
	return checkDisabled(pipeline(), o.DisabledPasses)
}

// ParseProfile parses one --profile value: a comma-free list of
// NAME:MIN,OPT,MAX entries separated by ';', each shape written as
// dimensions joined by 'x' (e.g. "input_ids:1x16,8x128,32x512").
func ParseProfile(s string) (plan.Profile, error) {
	p := plan.Profile{Inputs: map[string]plan.ShapeRange{}}
	for _, part := range strings.Split(s, ";") {
		name, spec, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || name == "" {
			return p, fmt.Errorf("compile: profile %q: want NAME:MIN,OPT,MAX (shapes like 1x16)", part)
		}
		shapes := strings.Split(spec, ",")
		if len(shapes) != 3 {
			return p, fmt.Errorf("compile: profile for %q: want three shapes MIN,OPT,MAX, got %d", name, len(shapes))
		}
		var r [3][]int
		for i, sh := range shapes {
			for _, d := range strings.Split(sh, "x") {
				v, err := strconv.Atoi(d)
				if err != nil || v < 0 {
					return p, fmt.Errorf("compile: profile for %q: bad dimension %q in %q", name, d, sh)
				}
				r[i] = append(r[i], v)
			}
		}
		if len(r[0]) != len(r[1]) || len(r[1]) != len(r[2]) {
			return p, fmt.Errorf("compile: profile for %q: MIN, OPT and MAX must have the same rank", name)
		}
		for i := range r[0] {
			if r[0][i] > r[1][i] || r[1][i] > r[2][i] {
				return p, fmt.Errorf("compile: profile for %q: dimension %d: need MIN <= OPT <= MAX, got %d, %d, %d", name, i, r[0][i], r[1][i], r[2][i])
			}
		}
		if _, dup := p.Inputs[name]; dup {
			return p, fmt.Errorf("compile: profile names input %q twice", name)
		}
		p.Inputs[name] = plan.ShapeRange{Min: r[0], Opt: r[1], Max: r[2]}
	}
	return p, nil
}
