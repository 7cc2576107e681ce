package server

import (
	"context"
	"math"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/tensor"
)

// An Explained runner gives the reasons behind its decisions. The server
// records every row's decision of every request (audit schema version 2)
// and, for a runner that has an explainer, the reasons too — whether or
// not the request asks for them in the response.
type Explained interface {
	Explainer() *explain.Explainer
}

// Explainer returns the plan's explainer, nil when its model has neither a
// structure that explain knows (tree ensemble, linear model) nor a
// background set for KernelSHAP.
func (r *PlanRunner) Explainer() *explain.Explainer { return r.xp }

// setExplainer prepares the explainer from the bundle's data (feature
// names, background), the model's metadata_props and the plan; replay
// makes its explainer through the same explain.ForModel.
func (r *PlanRunner) setExplainer(d *explain.Data) error {
	output := r.info.LabelOutput
	if output == "" && len(r.info.Outputs) > 0 {
		output = r.info.Outputs[0].Name
	}
	xp, err := explain.ForModel(explain.Model{Graph: r.plan.Graph, Meta: r.plan.Header.Source.Meta, Data: d,
		Output: output, MaxBatch: r.info.MaxBatch, Run: r.Run})
	r.xp = xp
	return err
}

// decide computes every row's decision (and, for an explained runner, the
// reasons) of a served request and puts them into its record and outcome.
func decide(ctx context.Context, r Runner, inputs map[string]*tensor.Tensor, rec *audit.Record, out *outcome) error {
	info := r.Info()
	var xp *explain.Explainer
	if x, ok := r.(Explained); ok {
		xp = x.Explainer()
	}
	o, err := xp.Decide(ctx, inputs, out.outs, info.LabelOutput, info.Labels)
	if err != nil {
		return err
	}
	o.Record(rec)
	out.decided = o
	if len(o.Decisions) > 0 && o.Decisions[0].Label != "" {
		out.label, out.confidence = o.Decisions[0].Label, o.Decisions[0].Confidence
	}
	return nil
}

// decisionParams adds to a response's parameters every row's decision
// ("decisions": [{"label","confidence"}…], when labels are declared) and,
// when the request asked ("parameters": {"explain": true}), the reasons:
// "explanation": {"method","estimate","covers","digest","rows":[{"target",
// "reasons":[{"feature","value","contribution","direction"}…]}…]}.
func decisionParams(params map[string]any, out *outcome) {
	o := out.decided
	if o == nil || len(o.Decisions) == 0 {
		return
	}
	if o.Decisions[0].Label != "" {
		ds := make([]map[string]any, len(o.Decisions))
		for i, d := range o.Decisions {
			ds[i] = map[string]any{"label": d.Label}
			if d.Confidence != nil {
				ds[i]["confidence"] = *d.Confidence
			}
		}
		params["decisions"] = ds
	}
	if !out.req.Explain || o.Explanation == nil {
		return
	}
	x := o.Explanation
	rows := make([]map[string]any, len(o.Decisions))
	for i, d := range o.Decisions {
		rs := make([]map[string]any, len(d.Reasons))
		for k, re := range d.Reasons {
			rs[k] = map[string]any{"feature": re.Feature, "contribution": re.Contribution, "direction": re.Direction()}
			if !math.IsNaN(re.Value) && !math.IsInf(re.Value, 0) {
				rs[k]["value"] = re.Value
			}
		}
		rows[i] = map[string]any{"target": d.Target, "reasons": rs}
	}
	params["explanation"] = map[string]any{"method": x.Method, "estimate": x.Estimate, "covers": x.Covers,
		"score": x.Score, "digest": x.Digest, "rows": rows}
}
