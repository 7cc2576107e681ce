package gputest

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/quant"
)

// fastOptions are the FastOptions of a model's fast plan in precision
// pr. For int8 the activation scales are compile's own calibration: an
// int8 CPU build of the same model (minmax, on 8 seeded random rows of
// the suite's inputs) writes its calibration cache, keyed by the values
// its int8 layers read, which are the values the fast plan's layers read.
func fastOptions(path string, src []byte, name string, g *ir.Graph, pr plan.Precision) (engine.FastOptions, error) {
	o := engine.FastOptions{Precision: pr}
	if pr != plan.Int8 {
		return o, nil
	}
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		return o, err
	}
	opts := compile.DefaultOptions()
	opts.Precision = "int8"
	opts.Quant.Calibrator = quant.MinMax
	for seed := range uint64(8) { // rows of batch 1: models of a fixed batch take them too
		in, err := bench.Inputs(g, bench.Shape{Batch: 1}, 17+seed)
		if err != nil || len(in) != 1 {
			return o, fmt.Errorf("%s int8: no single calibration input (%d inputs): %v", name, len(in), err)
		}
		for _, t := range in {
			opts.Quant.Calib = append(opts.Quant.Calib, t)
		}
	}
	res, err := compile.Build(m, src, name, "fast-int8-calibration", opts, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		return o, fmt.Errorf("%s int8 calibration: %w", name, err)
	}
	if res.CalibrationCache == nil {
		return o, fmt.Errorf("%s int8 calibration: the int8 build wrote no calibration cache", name)
	}
	c, err := quant.ParseCache(bytes.NewReader(res.CalibrationCache))
	if err != nil {
		return o, err
	}
	o.Scales = c.Scales
	return o, nil
}
