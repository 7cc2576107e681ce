package ml

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// linear is a parsed LinearClassifier or LinearRegressor for inputs of
// nfeat features: targets rows of coefficients, one intercept each.
type linear struct {
	coef, icpt    []float32
	targets, feat int
	labels        labels
	tr            transform
}

// parseLinear reads the attributes of a LinearClassifier or
// LinearRegressor whose input has nfeat features (-1: not known yet, then
// the number of targets comes from the intercepts, or the targets
// attribute of a regressor).
func parseLinear(n *ir.Node, nfeat int) (linear, error) {
	p := linear{coef: n.Floats("coefficients", nil), icpt: n.Floats("intercepts", nil), feat: nfeat}
	var err error
	if p.tr, err = parseTransform(n); err != nil {
		return linear{}, err
	}
	if len(p.coef) == 0 {
		return linear{}, errorf(n, "coefficients are missing")
	}
	if len(p.coef) > maxAttr {
		return linear{}, errorf(n, "%d coefficients is too many", len(p.coef))
	}
	regressor := n.OpType == "LinearRegressor"
	if regressor {
		t := n.Int("targets", 1)
		if t < 1 || t > maxAttr {
			return linear{}, errorf(n, "targets is %d (must be at least 1)", t)
		}
		p.targets = int(t)
	} else {
		if p.labels, err = parseLabels(n, "classlabels_ints", "classlabels_strings"); err != nil {
			return linear{}, err
		}
	}
	switch {
	case nfeat > 0:
		if len(p.coef)%nfeat != 0 {
			return linear{}, errorf(n, "%d coefficients do not make rows of %d features", len(p.coef), nfeat)
		}
		if t := len(p.coef) / nfeat; regressor && t != p.targets {
			return linear{}, errorf(n, "%d coefficients for %d features make %d targets, attribute targets is %d", len(p.coef), nfeat, t, p.targets)
		} else {
			p.targets = t
		}
	case nfeat == 0:
		return linear{}, errorf(n, "input X has no features")
	case !regressor && len(p.icpt) > 0:
		p.targets = len(p.icpt)
	case !regressor:
		p.targets = -1 // not known before the feature count is
	}
	if len(p.icpt) > 0 && p.targets > 0 && len(p.icpt) != p.targets {
		return linear{}, errorf(n, "%d intercepts for %d targets", len(p.icpt), p.targets)
	}
	if !regressor && p.targets > 1 && p.labels.len() > 0 && p.labels.len() != p.targets {
		return linear{}, errorf(n, "%d class labels for %d coefficient rows", p.labels.len(), p.targets)
	}
	return p, nil
}

// scoreCols is the number of score columns: a single coefficient row with
// two class labels gives two (the binary case: scores -m and m, as ONNX's
// reference and ONNX Runtime do), otherwise one per coefficient row.
func (p *linear) scoreCols() int {
	if p.targets == 1 && p.labels.len() == 2 {
		return 2
	}
	return p.targets
}

// margins writes row r's margins: intercept, then one FMA per feature in
// ascending order.
func (p *linear) margins(x []float32, out []float32) {
	for t := range p.targets {
		var acc float32
		if len(p.icpt) > 0 {
			acc = p.icpt[t]
		}
		w := p.coef[t*p.feat : (t+1)*p.feat]
		for j, v := range x {
			acc = vmath.FMA32(v, w[j], acc)
		}
		out[t] = acc
	}
}

func runLinearClassifier(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, rows, cols, err := floatRows(n, kernel.Input(in, 0))
	if err != nil {
		return nil, err
	}
	p, err := parseLinear(n, cols)
	if err != nil {
		return nil, err
	}
	out := []*tensor.Tensor{tensor.New(p.labels.dtype(), rows), tensor.New(tensor.Float32, rows, p.scoreCols())}
	p.classify(x, rows, newLabelOut(out[0]), out[1].Data.([]float32))
	return out, nil
}

// intoLinear is LinearClassifier's and LinearRegressor's Into: the same
// computation into the executor's outputs (int64 labels: string outputs
// never reach an arena).
func intoLinear(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	x, rows, cols, err := floatRows(n, kernel.Input(in, 0))
	if err != nil {
		return err
	}
	p, err := parseLinear(n, cols)
	if err != nil {
		return err
	}
	if n.OpType == "LinearRegressor" {
		y, ok := out[0].Data.([]float32)
		if !ok || len(y) != rows*p.targets {
			return errorf(n, "output is %v, want float32[%d %d]", out[0], rows, p.targets)
		}
		p.regress(x, rows, y)
		return nil
	}
	scores, ok := out[1].Data.([]float32)
	if !ok || len(scores) != rows*p.scoreCols() || out[0].Len() != rows || out[0].DType != p.labels.dtype() {
		return errorf(n, "outputs are %v and %v, want %v[%d] and float32[%d %d]", out[0], out[1], p.labels.dtype(), rows, rows, p.scoreCols())
	}
	p.classify(x, rows, newLabelOut(out[0]), scores)
	return nil
}

// classify computes the labels and scores of rows rows.
func (p *linear) classify(x []float32, rows int, lab labelOut, scores []float32) {
	e := p.scoreCols()
	for r := range rows {
		row := scores[r*e : (r+1)*e]
		p.margins(x[r*p.feat:(r+1)*p.feat], row[:p.targets])
		switch {
		case e == 2 && p.targets == 1:
			m := row[0]
			row[0], row[1] = p.tr.pair(m, false)
			lab.setBinary(r, p.labels, m > 0)
			continue
		case p.targets == 1:
			lab.setBinary(r, p.labels, row[0] > 0)
			// ONNX Runtime transforms a lone score only by PROBIT.
			if p.tr == probit {
				p.tr.apply(row)
			}
			continue
		case p.labels.len() == 0:
			lab.ints[r] = int64(argmax(row))
		default:
			lab.setClass(r, p.labels, argmax(row))
		}
		p.tr.apply(row)
	}
}

// inferLinear gives a LinearClassifier's label and scores types or a
// LinearRegressor's targets.
func inferLinear(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	nf, err := inputFeatures(n, in)
	if err != nil {
		return nil, err
	}
	p, err := parseLinear(n, nf)
	if err != nil {
		return nil, err
	}
	b, _ := batchDim(in[0].Type)
	if n.OpType == "LinearRegressor" {
		return []ir.Type{rowsType(tensor.Float32, b, ir.Fixed(p.targets))}, nil
	}
	e := ir.Unknown
	if p.targets > 0 {
		e = ir.Fixed(p.scoreCols())
	}
	return []ir.Type{rowsType(p.labels.dtype(), b), rowsType(tensor.Float32, b, e)}, nil
}

func runLinearRegressor(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, rows, cols, err := floatRows(n, kernel.Input(in, 0))
	if err != nil {
		return nil, err
	}
	p, err := parseLinear(n, cols)
	if err != nil {
		return nil, err
	}
	y := tensor.New(tensor.Float32, rows, p.targets)
	p.regress(x, rows, y.Data.([]float32))
	return []*tensor.Tensor{y}, nil
}

func (p *linear) regress(x []float32, rows int, out []float32) {
	for r := range rows {
		row := out[r*p.targets : (r+1)*p.targets]
		p.margins(x[r*p.feat:(r+1)*p.feat], row)
		p.tr.apply(row)
	}
}

// LinearContributions returns the exact per-feature contributions to each target's
// margin (before the post transform) of a LinearClassifier/LinearRegressor node for row x:
// out[t*(nfeat+1)+j] = coef[t][j]*x[j], out[t*(nfeat+1)+nfeat] = intercept[t]; sums to the margin.
//
// The products are exact (a float32 product fits a float64), so the sum
// over j in ascending order, plus the intercept, is the margin up to
// float64 rounding; the kernel's float32 margin (one FMA chain) is within
// float32 rounding of it. A binary classifier (one coefficient row, two
// labels) has one target: the margin m of the second class (its scores are
// -m and m). out must hold targets·(nfeat+1) values.
func LinearContributions(n *ir.Node, x []float32, out []float64) error {
	if n.OpType != "LinearClassifier" && n.OpType != "LinearRegressor" {
		return errorf(n, "LinearContributions needs a LinearClassifier or LinearRegressor node")
	}
	if len(x) == 0 {
		return errorf(n, "LinearContributions: empty row")
	}
	p, err := parseLinear(n, len(x))
	if err != nil {
		return err
	}
	w := len(x) + 1
	if len(out) != p.targets*w {
		return errorf(n, "LinearContributions: out holds %d values, %d targets of %d features need %d", len(out), p.targets, len(x), p.targets*w)
	}
	for t := range p.targets {
		for j, v := range x {
			out[t*w+j] = float64(p.coef[t*len(x)+j]) * float64(v)
		}
		out[t*w+len(x)] = 0
		if len(p.icpt) > 0 {
			out[t*w+len(x)] = float64(p.icpt[t])
		}
	}
	return nil
}
