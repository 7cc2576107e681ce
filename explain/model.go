package explain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// MaxRunBatch bounds the rows of one KernelSHAP model run.
const MaxRunBatch = 4096

// A Model is what serving and replay know of a plan when they make its
// explainer and name its decisions. Both go through ForModel and Labels,
// so that a replay recomputes the reasons exactly as they were served.
type Model struct {
	Graph *ir.Graph
	// Meta is the source model's metadata_props (feature names, labels).
	Meta map[string]string
	// Data is the bundle's explain.json; nil when it has none.
	Data *Data
	// Output is the output KernelSHAP explains: the label output when
	// there is one, else the first output.
	Output string
	// MaxBatch bounds a model run's rows (0: MaxRunBatch).
	MaxBatch int
	// Run runs the plan on named inputs.
	Run func(context.Context, map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
}

// ForModel returns the explainer of m: feature names from the bundle's
// data, else the model's metadata; the bundle's background; KernelSHAP
// runs through m.Run when the model has one matrix input [N, F]. It
// returns nil and no error for a model explain cannot explain.
func ForModel(m Model) (*Explainer, error) {
	o := Options{Features: FeaturesFromMeta(m.Meta)}
	if d := m.Data; d != nil && len(d.Features) > 0 {
		o.Features, o.Background = d.Features, d.Background
	}
	if g := m.Graph; len(g.Inputs) == 1 && len(g.Outputs) > 0 && m.Run != nil {
		o.Output = m.Output
		if o.Output == "" {
			o.Output = g.Outputs[0].Name
		}
		if in := g.Inputs[0].Type; in.RankKnown && len(in.Shape) == 2 && in.Shape[1].Known() {
			batch := MaxRunBatch
			if m.MaxBatch > 0 {
				batch = min(batch, m.MaxBatch)
			}
			o.Run = RunNamed(m.Run, g.Inputs[0].Name, o.Output, int(in.Shape[1].Value), batch)
		}
	}
	xp, err := New(m.Graph, o)
	if errors.Is(err, ErrUnsupported) {
		return nil, nil
	}
	return xp, err
}

// Labels returns the class labels that name a plan's decisions and the
// output they name: those given (a serve or replay flag), else the
// bundle's data, else the model's "vouch.labels" metadata; nil when there
// are none. The output, when not given, is the first output whose last
// dimension has one entry a label (else the first output). It is an error
// when that output is not one of the graph's or its last dimension is
// known and is not the number of labels.
func Labels(g *ir.Graph, meta map[string]string, d *Data, given []string, givenOutput string) ([]string, string, error) {
	labels, output := given, givenOutput
	if len(labels) == 0 && d != nil && len(d.Labels) > 0 {
		labels = d.Labels
		if output == "" {
			output = d.LabelOutput
		}
	}
	if len(labels) == 0 {
		if l := meta["vouch.labels"]; l != "" {
			labels = strings.Split(l, ",")
		}
	}
	if len(labels) == 0 || len(g.Outputs) == 0 {
		return nil, "", nil
	}
	last := func(v *ir.Value) (int64, bool) {
		if t := v.Type; t.RankKnown && len(t.Shape) > 0 && t.Shape[len(t.Shape)-1].Known() {
			return t.Shape[len(t.Shape)-1].Value, true
		}
		return 0, false
	}
	if output == "" {
		output = g.Outputs[0].Name
		for _, v := range g.Outputs {
			if n, ok := last(v); ok && n == int64(len(labels)) && len(v.Type.Shape) >= 2 {
				output = v.Name
				break
			}
		}
	}
	for _, v := range g.Outputs {
		if v.Name != output {
			continue
		}
		if n, ok := last(v); ok && n != int64(len(labels)) {
			return nil, "", fmt.Errorf("explain: %d labels for output %q whose last dimension is %d", len(labels), output, n)
		}
		return labels, output, nil
	}
	return nil, "", fmt.Errorf("explain: label output %q is not an output of the plan", output)
}

// MaxBatch returns the most rows one run of p takes: 0 when its inputs and
// outputs do not all share a symbolic batch dimension (it runs as shaped),
// else the first profile's bound on that dimension (math.MaxInt32 when
// none bounds it). The server advertises it; replay's explainer batches by
// it, as the server's did.
func MaxBatch(p *plan.Plan) int {
	param := ""
	for _, vs := range [][]*ir.Value{p.Graph.Inputs, p.Graph.Outputs} {
		for _, v := range vs {
			if !v.Type.RankKnown || len(v.Type.Shape) == 0 || v.Type.Shape[0].Param == "" ||
				(param != "" && v.Type.Shape[0].Param != param) {
				return 0
			}
			param = v.Type.Shape[0].Param
		}
	}
	if len(p.Graph.Inputs) == 0 {
		return 0
	}
	n := math.MaxInt32
	for _, pr := range p.Header.Profiles {
		for _, r := range pr.Inputs {
			if len(r.Max) > 0 && r.Max[0] < n {
				n = r.Max[0]
			}
		}
		break
	}
	return n
}
