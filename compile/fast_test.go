package compile_test

import (
	"bytes"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

// TestCalibrateInputs: the GPU fast mode's int8 scales are the precision
// pass's: calibrating the weighted layers' inputs of an fp32 build gives
// the scales an int8 CPU build of the same data writes in its cache, with
// each calibrator; a layer without weights is left out with a reason, and
// a cache that holds the tensors is used without data.
func TestCalibrateInputs(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn"} {
		for _, cal := range []string{quant.MinMax, quant.Entropy, quant.Percentile} {
			o := reducedOptions(t, name, "int8")
			o.Quant.Calibrator = cal
			q8, _ := build(t, name, o)
			want, err := quant.ParseCache(bytes.NewReader(q8.CalibrationCache))
			if err != nil {
				t.Fatal(err)
			}
			fp := compile.DefaultOptions()
			fp.Tactics = "heuristic"
			res, _ := build(t, name, fp)
			var layers []string
			for _, n := range res.Graph.Nodes {
				layers = append(layers, n.Name)
			}
			in, skipped, err := compile.CalibrateInputs(res.Graph, layers, compile.Options{Quant: compile.QuantOptions{Calibrator: cal, Calib: o.Quant.Calib}}, builtin.Registry(), buildlog.New(nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(in.Scales) == 0 || len(in.Scales) != len(want.Scales) {
				t.Fatalf("%s %s: %d scales, the int8 build has %d", name, cal, len(in.Scales), len(want.Scales))
			}
			for tn, s := range want.Scales {
				if in.Scales[tn] != s {
					t.Errorf("%s %s: tensor %s scale %g, the int8 build's %g", name, cal, tn, in.Scales[tn], s)
				}
			}
			if len(skipped)+len(in.Scales) > len(layers) || in.Report.Calibrator != cal || len(in.Report.Tensors) != len(in.Scales) {
				t.Errorf("%s %s: skipped %v, report %+v", name, cal, skipped, in.Report)
			}
			// The cache it writes feeds the next build without data.
			c, err := quant.ParseCache(bytes.NewReader(in.Cache))
			if err != nil {
				t.Fatal(err)
			}
			again, _, err := compile.CalibrateInputs(res.Graph, layers, compile.Options{Quant: compile.QuantOptions{Cache: c}}, builtin.Registry(), buildlog.New(nil))
			if err != nil || len(again.Scales) != len(in.Scales) {
				t.Fatalf("%s %s: from the cache: %v", name, cal, err)
			}
			for tn, s := range in.Scales {
				if again.Scales[tn] != s {
					t.Errorf("%s %s: tensor %s from the cache %g, calibrated %g", name, cal, tn, again.Scales[tn], s)
				}
			}
		}
	}
	fp := compile.DefaultOptions()
	res, _ := build(t, "breast_cancer_mlp", fp)
	if _, _, err := compile.CalibrateInputs(res.Graph, []string{res.Graph.Nodes[0].Name}, compile.Options{Quant: compile.QuantOptions{Calib: []*tensor.Tensor{}}}, builtin.Registry(), buildlog.New(nil)); err == nil {
		t.Error("int8 scales without calibration data or cache")
	}
}
