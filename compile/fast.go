package compile

import (
	"fmt"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
)

// Int8Inputs are the GPU fast mode's calibration (issue 19): a GPU int8
// kernel quantizes its layer's data input per tensor with a scale that
// comes from the precision pass's own calibration, so that a fast int8
// plan and a CPU int8 plan of the same data share their scales and their
// calibration cache file.
type Int8Inputs struct {
	// Scales maps each calibrated tensor (a layer's data input) to its
	// scale.
	Scales map[string]float32
	// Cache is the calibration cache file (quant.Cache's format) holding
	// them, written beside the plan as an int8 CPU build's is.
	Cache []byte
	// Report is what the calibration did: the calibrator, the samples and
	// each tensor's range, for the build report.
	Report *buildlog.PrecisionReport
}

// precInt8 is the int8 precision's name in the options and the report.
const precInt8 = "int8"

// CalibrateInputs calibrates the data inputs of the named layers of g, the
// graph of a Result: each scale from o.Quant.Cache where it holds the
// tensor, else calibrated on o.Quant.Calib with o.Quant's calibrator
// (minmax, entropy or percentile), every range logged under pass
// "precision" as the precision pass logs it. Only layers with constant
// float32 weights (Conv, Gemm, MatMul, fused or not) have an int8 input;
// the others are left out, and so is a layer int8 cannot take (the
// reason is in the returned map).
func CalibrateInputs(g *ir.Graph, layers []string, o Options, reg *kernel.Registry, log *buildlog.Log) (*Int8Inputs, map[string]string, error) {
	if err := o.Quant.valid(precInt8); err != nil {
		return nil, nil, err
	}
	st := &state{g: g, reg: reg, log: log, opts: o, pass: "precision"}
	byName := map[string]*weighted{}
	for _, l := range weightedLayers(g) {
		byName[l.n.Name] = l
	}
	var ws []*weighted
	want := map[string]string{}
	skipped := map[string]string{}
	for _, name := range layers {
		l := byName[name]
		switch {
		case l == nil:
			skipped[name] = "no constant float32 weights: no int8 input to calibrate"
		case l.reason != "":
			skipped[name] = l.reason
		default:
			ws = append(ws, l)
			want[name] = precInt8
		}
	}
	res := &precisionResult{report: &buildlog.PrecisionReport{Precision: precInt8}}
	st.prec = res
	scales, err := calibrate(st, g, ws, want, res)
	if err != nil {
		return nil, nil, fmt.Errorf("compile: calibrating the int8 layers' inputs: %w", err)
	}
	return &Int8Inputs{Scales: scales, Cache: st.calibrationCache(), Report: res.report}, skipped, nil
}
