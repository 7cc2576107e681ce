package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

// buildExplainData returns the bundle's explain.json: the feature names
// (--features, else the model's metadata_props) and the background rows
// (--background); nil when there are neither.
func buildExplainData(o BuildOptions, planBytes []byte) ([]byte, error) {
	p, err := plan.Decode(planBytes)
	if err != nil {
		return nil, err
	}
	if o.Features == "" && o.Background == "" && o.Labels == "" && explain.FeaturesFromMeta(p.Header.Source.Meta) == nil {
		return nil, nil
	}
	if o.LabelOutput != "" && o.Labels == "" {
		return nil, fmt.Errorf("%w: --label-output needs --labels", ErrUsage)
	}
	g := p.Graph
	var labels []string
	if o.Labels != "" {
		b, err := os.ReadFile(o.Labels)
		if err != nil {
			return nil, err
		}
		if labels, err = explain.ParseLabels(b); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Labels, err)
		}
		// The same rule the server and replay apply: a label count that
		// does not fit the output is refused now, not at serving.
		if _, _, err := explain.Labels(g, p.Header.Source.Meta, nil, labels, o.LabelOutput); err != nil {
			return nil, fmt.Errorf("%w: --labels: %w", ErrUsage, err)
		}
		if o.Features == "" && o.Background == "" && explain.FeaturesFromMeta(p.Header.Source.Meta) == nil {
			return (&explain.Data{Labels: labels, LabelOutput: o.LabelOutput}).Encode()
		}
	}
	if len(g.Inputs) != 1 || !g.Inputs[0].Type.RankKnown || len(g.Inputs[0].Type.Shape) != 2 || !g.Inputs[0].Type.Shape[1].Known() {
		return nil, fmt.Errorf("%w: --features/--background: the model's input is not one matrix [N, F]", ErrUsage)
	}
	nfeat := int(g.Inputs[0].Type.Shape[1].Value)
	d := &explain.Data{Features: explain.FeaturesFromMeta(p.Header.Source.Meta), Labels: labels, LabelOutput: o.LabelOutput}
	if o.Features != "" {
		b, err := os.ReadFile(o.Features)
		if err != nil {
			return nil, err
		}
		if d.Features, err = explain.ParseFeatures(b); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Features, err)
		}
	}
	if d.Features == nil {
		for j := range nfeat {
			d.Features = append(d.Features, fmt.Sprintf("f%d", j))
		}
	}
	if len(d.Features) != nfeat {
		return nil, fmt.Errorf("%w: %d feature names for the %d features of input %q", ErrUsage, len(d.Features), nfeat, g.Inputs[0].Name)
	}
	if o.Background != "" {
		t, err := quant.LoadTensor(o.Background)
		if err != nil {
			return nil, err
		}
		if t.DType != tensor.Float32 || len(t.Shape) != 2 || t.Shape[1] != nfeat {
			return nil, fmt.Errorf("%w: --background %s is %v %v, want float32 [rows, %d]", ErrUsage, o.Background, t.DType, t.Shape, nfeat)
		}
		x := t.Data.([]float32)
		if t.Shape[0] > explain.MaxBackground {
			x = x[:explain.MaxBackground*nfeat] // the first rows: a bundle stays small
		}
		d.Background = x
	}
	// A tree or linear model's explainer must accept what the bundle will
	// carry (any other model is explained by KernelSHAP once served).
	if _, err := explain.New(g, explain.Options{Features: d.Features, Background: d.Background}); err != nil && !errors.Is(err, explain.ErrUnsupported) {
		return nil, err
	}
	return d.Encode()
}
