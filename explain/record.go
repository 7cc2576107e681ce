package explain

import (
	"context"
	"fmt"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/tensor"
)

// Outcome is a batch's decisions and, when the model is explained, their
// reasons: what a response and an audit record carry.
type Outcome struct {
	Rows        int
	Decisions   []audit.Decision // every row; nil when there are neither labels nor reasons
	Explanation *audit.Explanation
}

// Decide computes the outcome of a batch: every row's decision from the
// label output (Decide, when labels are declared) and, with an explainer,
// the attributions of the explained input, each row's top reasons and the
// digest of every row's contribution vector. Serving and replay both call
// it, so a replay recomputes what was recorded with the same code.
func (e *Explainer) Decide(ctx context.Context, inputs, outputs map[string]*tensor.Tensor, labelOutput string, labels []string) (*Outcome, error) {
	var ds []audit.Decision
	if labelOutput != "" {
		ds = Decide(outputs[labelOutput], labels)
	}
	o := &Outcome{Rows: len(ds), Decisions: ds}
	if e == nil {
		return o, nil
	}
	in := inputs[e.input]
	if in == nil || in.DType != tensor.Float32 || len(in.Shape) != 2 || in.Shape[1] != e.nfeat {
		return nil, fmt.Errorf("explain: input %q is not float32 [N, %d]", e.input, e.nfeat)
	}
	x := in.Data.([]float32)
	rows := in.Shape[0]
	if ds != nil && len(ds) != rows {
		return nil, fmt.Errorf("explain: %d decisions for %d rows", len(ds), rows)
	}
	res, err := e.Explain(ctx, x, rows)
	if err != nil {
		return nil, err
	}
	if ds == nil {
		ds = make([]audit.Decision, rows)
	}
	for i := range ds {
		ds[i].Target = res.Targets[i]
		ds[i].Reasons = e.Reasons(res, x, i)
	}
	o.Rows, o.Decisions = rows, ds
	if o.Explanation, err = e.Summary(res); err != nil {
		return nil, err
	}
	return o, nil
}

// Record sets rec's schema version 2 members from o: rows, the decisions
// of the first audit.MaxDecisions rows (the rest only in decisions_digest
// and the explanation's digest), and output_label and confidence as row
// 0's.
func (o *Outcome) Record(rec *audit.Record) {
	rec.Rows = o.Rows
	rec.Explanation = o.Explanation
	if len(o.Decisions) == 0 {
		return
	}
	rec.DecisionsDigest = audit.DecisionsDigest(o.Decisions)
	rec.Decisions = o.Decisions[:min(len(o.Decisions), audit.MaxDecisions)]
	if d := o.Decisions[0]; d.Label != "" {
		rec.OutputLabel, rec.Confidence = d.Label, d.Confidence
	}
}
