package replay

import (
	"context"
	"fmt"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// Fast-mode traces (issue 19). A fast plan's bits are pinned to the plan
// and its GPU architecture: Replay proves such a trace bit for bit on a
// GPU of that architecture or on the emulation of its tensor cores (device
// "emu", cuda/emu), which a replay on the CPU takes by itself when the
// architecture has a fitted model; without one it refuses (PinnedError).
// On any
// machine, Against with the exact plan of the same model compares the
// served output with the exact plan's output, computed on the CPU, and
// says whether it is within the tolerance: never that the bits are equal.

// Verdicts of a fast-mode comparison with the exact plan.
const (
	WithinTolerance    = "VERIFIED-within-tolerance"
	NotWithinTolerance = "NOT-within-tolerance"
)

// PinnedError is Replay's refusal of a fast-mode trace on a machine that
// cannot reproduce its bits. It wraps plan.ErrPinned.
type PinnedError struct {
	Trace, Arch string
	// Why the emulation cannot run the plan ("" when not tried).
	Why string
}

func (e *PinnedError) Error() string {
	why := ""
	if e.Why != "" {
		why = " (" + e.Why + ")"
	}
	return fmt.Sprintf("replay %s: this trace was served by a fast-mode plan whose bits are pinned to %s GPUs, and this CPU cannot emulate them%s; replay it on one (--device cuda:N), or compare it with the exact plan: vouch replay --against EXACT.vouch %s", e.Trace, e.Arch, why, e.Trace)
}

func (e *PinnedError) Unwrap() error { return plan.ErrPinned }

// onGPU reports whether o runs plans on a device that gives a fast plan's
// bits: a GPU, or the emulation of one (exec's "emu").
func (o Options) onGPU() bool {
	d, err := exec.ParseDevice(o.Device)
	return err == nil && d.Kind != exec.DeviceCPU
}

// againstExact compares a fast-mode trace (served by base) with exact, the
// exact plan of the same model run on the CPU. The served output is
// o.Output, whose digest must be the record's, or, on a GPU, the fast
// plan's output recomputed there, whose digest must be the record's too.
func againstExact(ctx context.Context, rec *audit.Record, inputs map[string]*tensor.Tensor, base, exact *Engine, crit Criteria, o Options) (*Comparison, error) {
	if exact.Plan.Pinned() != "" {
		return nil, fmt.Errorf("replay: %s is a fast-mode plan too: compare a fast-mode trace with the exact plan of its model (built without --precision)", exact.Source)
	}
	if a, b := base.Plan.Header.Source.SHA256, exact.Plan.Header.Source.SHA256; a != b {
		return nil, fmt.Errorf("replay: %s was built from another model (source sha256 %s) than the trace's plan (%s): compare with the exact plan of the same model", exact.Source, b, a)
	}
	served, source := o.Output, "the served output, given by the caller (its digest is the record's)"
	switch {
	case served != nil:
	case o.onGPU():
		var err error
		if served, _, err = runOn(base.Plan, inputs, o.exec()); err != nil {
			return nil, fmt.Errorf("replay: running the fast plan %s: %w", base.Source, err)
		}
		source = "the fast plan's output recomputed on " + o.Device + " (its digest is the record's)"
	default:
		return nil, fmt.Errorf("replay %s: the record holds the served output's digest, not its values, and the fast plan's bits are pinned to %s GPUs: give the served outputs with --output NAME=FILE (their digest is checked against the record's), or run on a %s GPU (--device cuda:N) to recompute them", rec.TraceID, base.Plan.Pinned(), base.Plan.Pinned())
	}
	d, _, err := audit.InputDigest(served)
	if err != nil {
		return nil, err
	}
	if d != rec.OutputDigest {
		return nil, fmt.Errorf("replay %s: the served output has digest %s, the record's output digest is %s (%s)", rec.TraceID, d, rec.OutputDigest, source)
	}
	ref, ranOn, err := runOn(exact.Plan, inputs, exec.Options{CPU: o.CPU})
	if err != nil {
		return nil, fmt.Errorf("replay: running the exact plan %s: %w", exact.Source, err)
	}
	c := &Comparison{TraceID: rec.TraceID, Served: source, Reference: exact.Source + " on " + ranOn,
		Pinned: base.Plan.Pinned(), Precision: string(base.Plan.Precision())}
	if err := c.compare(ref, served, crit, "the served output of "+rec.TraceID); err != nil {
		return nil, err
	}
	c.Verdict = NotWithinTolerance
	if c.Pass {
		c.Verdict = WithinTolerance
	}
	return c, nil
}
