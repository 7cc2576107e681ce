// Package replay re-runs recorded inferences and proves, or disproves, that
// the signed plan they name gives the output that was served.
//
// Replay takes a trace id and:
//
//  1. fetches the audit record with its inclusion proof and checks the proof
//     against a checkpoint signed by a trusted log key;
//  2. gets the input — the encrypted capture, or a file the caller gives —
//     and requires its canonical digest (audit.InputDigest) to equal the
//     record's input digest;
//  3. loads the exact bundle the record names, by digest, from the registry,
//     verifying its signature and digests, and checks that its plan has the
//     record's plan digest;
//  4. runs the plan and compares: an equal output digest is VERIFIED (the
//     served output, bit for bit); anything else is MISMATCH, with the
//     differing outputs named.
//
// Against runs the same recorded inputs through a second plan (a rebuilt or
// quantized engine) and reports Polygraphy-style error statistics per
// output. A trace served by a fast-mode GPU plan (issue 19) replays bit
// for bit only on a GPU of the plan's architecture; Against compares it
// with the exact plan of the same model on any CPU, within a tolerance. Reports are JSON (signable as a DSSE envelope), self-contained
// HTML, and a terminal summary.
package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/cuda/emu"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Verdicts.
const (
	Verified = "VERIFIED"
	Mismatch = "MISMATCH"
)

// Errors that name why a replay could not be carried out.
var (
	ErrRecord      = errors.New("replay: record")
	ErrInputDigest = errors.New("replay: input digest mismatch")
	ErrPlan        = errors.New("replay: plan")
	ErrNoInput     = errors.New("replay: no input")
)

// Records finds a record and its inclusion proof by trace id. *audit.Log
// implements it; so does an HTTP client of the server's audit API.
type Records interface {
	Show(ctx context.Context, trace string) (*audit.Inclusion, error)
}

// Inputs returns the inputs whose canonical digest is the given one.
// capture.Store implements it.
type Inputs interface {
	Get(inputDigest string) (map[string]*tensor.Tensor, error)
}

// Plans returns the plan a record names, verified.
type Plans interface {
	Plan(ctx context.Context, rec *audit.Record) (*Engine, error)
}

// Engine is a loaded plan and where it came from.
type Engine struct {
	Plan         *plan.Plan
	PlanDigest   string // "sha256:…"
	BundleDigest string // "sha256:…" when it came from a bundle
	Provenance   *bundle.Provenance
	Source       string // for people: a path or a registry reference
	// Explain is the bundle's explanation data (feature names,
	// background, labels); nil when it has none.
	Explain *explain.Data
}

// Options configure a replay.
type Options struct {
	Records Records
	// LogKeys are the trusted verifier keys of the audit log.
	LogKeys []string
	Plans   Plans
	// Inputs is where captured inputs are read; Input, when set, is used
	// instead (a file the caller holds).
	Inputs Inputs
	Input  map[string]*tensor.Tensor
	// Output is the served output, when the caller holds it (the
	// response): Against compares a fast-mode trace's served output with
	// the exact plan, after checking its digest is the record's.
	Output map[string]*tensor.Tensor
	// Device re-runs the plan there: "" or "cpu" (any plan, a GPU plan's
	// CPU kernels included), or "cuda:N" (a GPU plan; exec.NewPlanEngine).
	Device string
	// CPU is how the CPU kernels run: the instruction set (portable Go
	// twins, AVX2, AVX-512) and threads. Every choice gives the same bits
	// (the determinism contract); the report names the one that ran.
	CPU exec.CPU
	// Labels and LabelOutput name the classes when the server was given
	// them (serve --labels) rather than taking them from the bundle.
	Labels      []string
	LabelOutput string
	// Now stamps the report (time.Now when nil).
	Now func() time.Time
}

// Replay re-runs the recorded inference trace and compares.
func Replay(ctx context.Context, trace string, o Options) (*Report, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	inc, err := o.Records.Show(ctx, trace)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrRecord, trace, err)
	}
	rec, cp, err := inc.Verify(o.LogKeys...)
	if err != nil {
		return nil, fmt.Errorf("%w %s: inclusion proof: %w", ErrRecord, trace, err)
	}
	if rec.Status != "" && rec.Status != audit.StatusOK {
		if strings.HasPrefix(rec.Error, "interrupted:") {
			// The in-flight journal's record of a request whose serving
			// process died before it answered (issue 20 A3).
			return nil, fmt.Errorf("%w %s: the request was accepted but never answered (%s); it was recorded at the server's next start, and there is no output to replay", ErrRecord, trace, rec.Error)
		}
		return nil, fmt.Errorf("%w %s: the request failed (%d %s); there is no output to replay", ErrRecord, trace, rec.Code, rec.Error)
	}
	r := &Report{
		Schema:     ReportSchema,
		TraceID:    trace,
		ReplayedAt: now().UTC(),
		Record:     rec,
		RecordJSON: string(inc.Record),
		LogIndex:   inc.Index,
		LeafHash:   inc.LeafHash,
		Checkpoint: cp,
		LogKeys:    o.LogKeys,
		Proof:      inc.Proof,
	}
	inputs, source, err := resolveInputs(rec, o)
	if err != nil {
		return nil, err
	}
	r.InputSource = source
	eng, err := o.Plans.Plan(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("%w for %s: %w", ErrPlan, trace, err)
	}
	if eng.PlanDigest != rec.PlanDigest {
		return nil, fmt.Errorf("%w: %s has digest %s, the record names %s", ErrPlan, eng.Source, eng.PlanDigest, rec.PlanDigest)
	}
	if rec.BundleDigest != "" && eng.BundleDigest != "" && eng.BundleDigest != rec.BundleDigest {
		return nil, fmt.Errorf("%w: bundle %s has digest %s, the record names %s", ErrPlan, eng.Source, eng.BundleDigest, rec.BundleDigest)
	}
	eo := o.exec()
	if arch := eng.Plan.Pinned(); arch != "" && !o.onGPU() {
		// On a CPU a fast plan replays through the emulation of its
		// GPU's tensor cores when its architecture has a fitted model.
		if _, err := emu.Rewrite(eng.Plan); err != nil {
			return nil, &PinnedError{Trace: trace, Arch: arch, Why: err.Error()}
		}
		eo.Device = exec.DeviceEmu
	}
	r.Engine = engineInfo(eng)
	outs, ranOn, err := runOn(eng.Plan, inputs, eo)
	r.Engine.RanOn = ranOn
	if err != nil {
		return nil, fmt.Errorf("replay: running %s: %w", eng.Source, err)
	}
	digest, per, err := audit.InputDigest(outs)
	if err != nil {
		return nil, err
	}
	r.OutputDigest = digest
	r.Verdict = Verified
	if digest != rec.OutputDigest {
		r.Verdict = Mismatch
	}
	recorded := map[string]string{}
	for _, td := range rec.Outputs {
		recorded[td.Name] = td.Digest
	}
	for _, td := range per {
		r.Outputs = append(r.Outputs, OutputCheck{Name: td.Name, DType: td.DType, Shape: td.Shape,
			Recorded: recorded[td.Name], Replayed: td.Digest, Equal: recorded[td.Name] == td.Digest})
	}
	// The decisions and their reasons, recomputed by the code that served
	// them and compared bit for bit.
	if r.Decisions, err = checkDecisions(ctx, eng, rec, inputs, outs, o); err != nil {
		return nil, err
	}
	if r.Decisions != nil && !r.Decisions.Equal {
		r.Verdict = Mismatch
	}
	return r, nil
}

func engineInfo(e *Engine) EngineInfo {
	info := EngineInfo{Source: e.Source, PlanDigest: e.PlanDigest, BundleDigest: e.BundleDigest}
	if p := e.Provenance; p != nil {
		info.Model = p.Model.Name + "@" + p.Model.Version
		info.SourceDigest = p.Source.Digest
		info.Builder = p.BuilderID
		info.BuiltOn = p.Environment.OS + "/" + p.Environment.Arch + " " + p.Environment.CPUModel
		info.BuiltAt = p.FinishedOn
		info.SignedBy = p.SignedBy
	}
	return info
}

// resolveInputs returns the inputs to replay, checked against the record's
// input digest, and where they came from.
func resolveInputs(rec *audit.Record, o Options) (map[string]*tensor.Tensor, string, error) {
	var inputs map[string]*tensor.Tensor
	source := "given by the caller"
	switch {
	case o.Input != nil:
		inputs = o.Input
	case o.Inputs != nil:
		var err error
		if inputs, err = o.Inputs.Get(rec.InputDigest); err != nil {
			return nil, "", fmt.Errorf("%w for %s: the captured input %s: %w (give it with --input)", ErrNoInput, rec.TraceID, rec.InputDigest, err)
		}
		source = "captured (encrypted) at serving time"
	default:
		return nil, "", fmt.Errorf("%w for %s: inputs were not captured; give them with --input", ErrNoInput, rec.TraceID)
	}
	got, _, err := audit.InputDigest(inputs)
	if err != nil {
		return nil, "", err
	}
	if got != rec.InputDigest {
		return nil, "", fmt.Errorf("%w: the input given has canonical digest %s, the record's input digest is %s (is it the request's input, with the same names, dtypes and shapes?)", ErrInputDigest, got, rec.InputDigest)
	}
	return inputs, source, nil
}

func run(p *plan.Plan, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	outs, _, err := runOn(p, inputs, exec.Options{})
	return outs, err
}

// exec is the engine options of o's runs.
func (o Options) exec() exec.Options { return exec.Options{Device: o.Device, CPU: o.CPU} }

// runOn runs p with the engine options eo and says what it ran on: the
// device and, on the CPU, the instruction set its kernels used.
func runOn(p *plan.Plan, inputs map[string]*tensor.Tensor, eo exec.Options) (map[string]*tensor.Tensor, string, error) {
	if _, err := p.SelectProfile(inputs); err != nil {
		return nil, "", err
	}
	// The serving engine itself, so that a replayed output is computed by
	// the code that served it.
	eng, err := exec.NewPlanEngine(p, builtin.Registry(), eo)
	if err != nil {
		return nil, "", err
	}
	defer eng.Close()
	outs, err := eng.Run(context.Background(), inputs)
	ctx := &kernel.Ctx{ISA: eo.CPU.ISA}
	return outs, fmt.Sprintf("%s (CPU kernels at instruction set %s)", eng.DeviceName(), ctx.Level()), err
}

// Against runs the recorded inputs of trace through the record's own plan
// and through other, and compares the two per output with the statistics
// of Compare. It needs the inputs (captured or given). When the record's
// plan is a fast-mode plan, other must be the exact plan of the same
// model: it runs on the CPU and is compared with the served output
// (o.Output, or the fast plan recomputed on o's GPU), and the comparison's
// verdict says whether they agree within crit (fast.go).
func Against(ctx context.Context, trace string, other *Engine, crit Criteria, o Options) (*Comparison, error) {
	inc, err := o.Records.Show(ctx, trace)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrRecord, trace, err)
	}
	rec, _, err := inc.Verify(o.LogKeys...)
	if err != nil {
		return nil, fmt.Errorf("%w %s: inclusion proof: %w", ErrRecord, trace, err)
	}
	inputs, _, err := resolveInputs(rec, o)
	if err != nil {
		return nil, err
	}
	base, err := o.Plans.Plan(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("%w for %s: %w", ErrPlan, trace, err)
	}
	if base.PlanDigest != "" && base.PlanDigest != rec.PlanDigest {
		return nil, fmt.Errorf("%w: %s has digest %s, the record names %s", ErrPlan, base.Source, base.PlanDigest, rec.PlanDigest)
	}
	if base.Plan.Pinned() != "" {
		return againstExact(ctx, rec, inputs, base, other, crit, o)
	}
	ref, _, err := runOn(base.Plan, inputs, o.exec())
	if err != nil {
		return nil, err
	}
	got, _, err := runOn(other.Plan, inputs, o.exec())
	if err != nil {
		return nil, fmt.Errorf("replay: running %s: %w", other.Source, err)
	}
	c := &Comparison{TraceID: trace}
	if err := c.compare(ref, got, crit, other.Source); err != nil {
		return nil, err
	}
	return c, nil
}

// compare fills c with the statistics of every output of got against ref
// (in name order); what names got in an error.
func (c *Comparison) compare(ref, got map[string]*tensor.Tensor, crit Criteria, what string) error {
	names := make([]string, 0, len(ref))
	for n := range ref {
		names = append(names, n)
	}
	sort.Strings(names)
	c.Pass = true
	for _, n := range names {
		g, ok := got[n]
		if !ok {
			return fmt.Errorf("replay: %s has no output %q", what, n)
		}
		s, err := Compare(n, ref[n], g, crit)
		if err != nil {
			return err
		}
		c.Outputs = append(c.Outputs, s)
		c.Pass = c.Pass && s.Pass
	}
	return nil
}
