package replay

import (
	"context"
	"fmt"
	"math"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// DecisionCheck is the re-derivation of a record's decisions and reasons
// from the replayed output: every row's decision (its digest), the
// explanation's digest over every row's full contribution vector, and the
// decisions the record lists, reason by reason, bit for bit.
type DecisionCheck struct {
	Rows int `json:"rows"`
	// LabelsFrom says where the class labels came from ("bundle",
	// "given", "model metadata"); empty when there are none.
	LabelsFrom string `json:"labels_from,omitempty"`

	RecordedDecisions string `json:"recorded_decisions_digest,omitempty"`
	ReplayedDecisions string `json:"replayed_decisions_digest,omitempty"`

	Method              string `json:"method,omitempty"`
	Estimate            bool   `json:"estimate,omitempty"`
	RecordedExplanation string `json:"recorded_explanation_digest,omitempty"`
	ReplayedExplanation string `json:"replayed_explanation_digest,omitempty"`

	// Listed is the number of decisions the record lists, each compared
	// (label, confidence, target, every reason's feature, value and
	// contribution).
	Listed int `json:"listed"`
	// Equal is true when everything above is the same.
	Equal bool `json:"equal"`
	// Differences name what is not (at most maxDifferences).
	Differences []string `json:"differences,omitempty"`
	// Unchecked names what could not be re-derived, and why.
	Unchecked string `json:"unchecked,omitempty"`

	// Replayed holds the replayed decisions the record lists (for the
	// reports' "principal reasons" section).
	Replayed []audit.Decision `json:"-"`
}

const maxDifferences = 20

// checkDecisions re-derives rec's decisions and reasons with the engine's
// explainer, made exactly as the server made it (explain.ForModel and
// explain.Labels over the signed bundle's explain data), and compares
// them with the record. It returns nil for a record that has none
// (schema version 1, or a model served without labels or reasons).
func checkDecisions(ctx context.Context, eng *Engine, rec *audit.Record, inputs, outs map[string]*tensor.Tensor, o Options) (*DecisionCheck, error) {
	if rec.DecisionsDigest == "" && rec.Explanation == nil && len(rec.Decisions) == 0 {
		return nil, nil
	}
	p := eng.Plan
	meta := p.Header.Source.Meta
	labels, labelOutput, err := explain.Labels(p.Graph, meta, eng.Explain, o.Labels, o.LabelOutput)
	if err != nil {
		return nil, fmt.Errorf("replay: labels: %w", err)
	}
	c := &DecisionCheck{RecordedDecisions: rec.DecisionsDigest}
	switch {
	case len(labels) == 0:
	case len(o.Labels) > 0:
		c.LabelsFrom = "given"
	case eng.Explain != nil && len(eng.Explain.Labels) > 0:
		c.LabelsFrom = "bundle"
	default:
		c.LabelsFrom = "model metadata"
	}
	output := labelOutput
	if output == "" && len(p.Graph.Outputs) > 0 {
		output = p.Graph.Outputs[0].Name
	}
	// One engine for every model run of the explainer (KernelSHAP makes
	// many), as the server's explainer runs on its plan's engine.
	var run *exec.Engine
	defer func() {
		if run != nil {
			run.Close()
		}
	}()
	xp, err := explain.ForModel(explain.Model{Graph: p.Graph, Meta: meta, Data: eng.Explain, Output: output,
		MaxBatch: explain.MaxBatch(p), Run: func(ctx context.Context, in map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
			if run == nil {
				var err error
				if run, err = exec.NewPlanEngine(p, builtin.Registry(), o.exec()); err != nil {
					return nil, err
				}
			}
			return run.Run(ctx, in)
		}})
	if err != nil {
		return nil, fmt.Errorf("replay: explainer: %w", err)
	}
	if rec.Explanation != nil && xp == nil {
		c.Differences = append(c.Differences, "the record has reasons ("+rec.Explanation.Method+"); this engine explains nothing")
		return c, nil
	}
	out, err := xp.Decide(ctx, inputs, outs, labelOutput, labels)
	if err != nil {
		return nil, fmt.Errorf("replay: recomputing the decisions: %w", err)
	}
	var replayed audit.Record
	out.Record(&replayed)
	c.Rows = out.Rows
	c.ReplayedDecisions = replayed.DecisionsDigest
	if x := out.Explanation; x != nil {
		c.Method, c.Estimate, c.ReplayedExplanation = x.Method, x.Estimate, x.Digest
	}
	if rec.Explanation != nil {
		c.RecordedExplanation = rec.Explanation.Digest
	}
	c.Replayed = replayed.Decisions
	c.Listed = len(rec.Decisions)
	c.compare(rec, &replayed, labels == nil)
	c.Equal = len(c.Differences) == 0
	return c, nil
}

func (c *DecisionCheck) differ(format string, args ...any) {
	if len(c.Differences) < maxDifferences {
		c.Differences = append(c.Differences, fmt.Sprintf(format, args...))
	}
}

func (c *DecisionCheck) compare(rec, re *audit.Record, noLabels bool) {
	if rec.Rows != re.Rows && rec.Rows != 0 {
		c.differ("rows: recorded %d, replayed %d", rec.Rows, re.Rows)
	}
	labelled := rec.OutputLabel != "" || (len(rec.Decisions) > 0 && rec.Decisions[0].Label != "")
	if noLabels && labelled {
		// Served with labels this replay was not given: the reasons can
		// still be compared, the labels cannot.
		c.Unchecked = "the labels (the server was given them; pass the same with --labels)"
	} else if rec.DecisionsDigest != re.DecisionsDigest {
		c.differ("decisions digest: recorded %s, replayed %s", orNone(rec.DecisionsDigest), orNone(re.DecisionsDigest))
	}
	switch x, y := rec.Explanation, re.Explanation; {
	case x == nil && y != nil:
		c.differ("the record has no reasons; the replay computed them (%s)", y.Method)
	case x != nil && y == nil:
		c.differ("the record has reasons (%s); the replay computed none", x.Method)
	case x != nil && *x != *y:
		if x.Digest != y.Digest {
			c.differ("contributions digest: recorded %s, replayed %s", x.Digest, y.Digest)
		}
		if x.Method != y.Method || x.Estimate != y.Estimate || x.Covers != y.Covers || x.Background != y.Background || x.Score != y.Score || x.Features != y.Features {
			c.differ("explanation: recorded %+v, replayed %+v", *x, *y)
		}
	}
	if len(rec.Decisions) != len(re.Decisions) {
		c.differ("the record lists %d decisions, the replay %d", len(rec.Decisions), len(re.Decisions))
	}
	for i := range min(len(rec.Decisions), len(re.Decisions)) {
		a, b := rec.Decisions[i], re.Decisions[i]
		if !(noLabels && labelled) {
			if a.Label != b.Label {
				c.differ("row %d: label recorded %q, replayed %q", i, a.Label, b.Label)
			}
			if !sameConfidence(a.Confidence, b.Confidence) {
				c.differ("row %d: confidence recorded %s, replayed %s", i, confString(a.Confidence), confString(b.Confidence))
			}
		}
		if a.Target != b.Target {
			c.differ("row %d: explained class recorded %d, replayed %d", i, a.Target, b.Target)
		}
		if len(a.Reasons) != len(b.Reasons) {
			c.differ("row %d: %d reasons recorded, %d replayed", i, len(a.Reasons), len(b.Reasons))
		}
		for k := range min(len(a.Reasons), len(b.Reasons)) {
			x, y := a.Reasons[k], b.Reasons[k]
			if x.Feature != y.Feature || !sameValue(x.Value, y.Value) || !sameBits(x.Contribution, y.Contribution) {
				c.differ("row %d reason %d: recorded %s = %v contributing %v, replayed %s = %v contributing %v",
					i, k+1, x.Feature, x.Value, x.Contribution, y.Feature, y.Value, y.Contribution)
			}
		}
	}
}

// sameBits compares two numbers bit for bit; every NaN is one missing
// value (the record writes none).
func sameBits(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

// sameValue compares a reason's feature values: the record writes none
// for a value that is not finite.
func sameValue(a, b float64) bool {
	fa, fb := !math.IsNaN(a) && !math.IsInf(a, 0), !math.IsNaN(b) && !math.IsInf(b, 0)
	if !fa || !fb {
		return !fa && !fb
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

func sameConfidence(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameBits(*a, *b)
}

func confString(p *float64) string {
	if p == nil {
		return "none"
	}
	return full(*p)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
