package compile_test

import (
	"bytes"
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

func loadData(t testing.TB, name, file string) *tensor.Tensor {
	t.Helper()
	x, err := quant.LoadTensor(filepath.Join(models, name, "data", file))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func reducedOptions(t testing.TB, name, precision string) compile.Options {
	o := compile.DefaultOptions()
	o.Tactics = "heuristic"
	o.Precision = precision
	o.Quant.Calib = []*tensor.Tensor{loadData(t, name, "calib_x.pb")}
	o.Quant.EvalData = []*tensor.Tensor{loadData(t, name, "test_x.pb")}
	o.Quant.EvalLabels = loadData(t, name, "test_y.pb")
	return o
}

// TestReducedPrecisionInvariance: int8 and fp16 plans give the same bits
// at GOMAXPROCS 1, 2 and 8, through the portable twins as through the
// vector kernels, and for a row alone as inside a batch of 8 (rows taken
// from the real test data).
func TestReducedPrecisionInvariance(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn"} {
		for _, prec := range []string{"int8", "fp16"} {
			res, _ := build(t, name, reducedOptions(t, name, prec))
			inName, outName := res.Graph.Inputs[0].Name, res.Graph.Outputs[0].Name
			x := loadData(t, name, "test_x.pb")
			rowLen := x.Len() / x.Shape[0]
			batch := append([]float32{}, x.Data.([]float32)[:8*rowLen]...)
			bt := tensor.From(batch, append([]int{8}, x.Shape[1:]...)...)
			var first *tensor.Tensor
			prev := runtime.GOMAXPROCS(0)
			for _, procs := range []int{1, 2, 8} {
				for _, isa := range kernel.ISAs() {
					runtime.GOMAXPROCS(procs)
					out := runPlanOn(t, res.Plan, map[string]*tensor.Tensor{inName: bt}, exec.CPU{ISA: isa, Threads: procs})
					if first == nil {
						first = out[outName]
					} else if !sameBits(out[outName], first) {
						t.Errorf("%s %s: output differs at GOMAXPROCS=%d %v", name, prec, procs, isa)
					}
				}
			}
			runtime.GOMAXPROCS(prev)
			full := first.Data.([]float32)
			per := len(full) / 8
			for i := 0; i < 8; i++ {
				one := tensor.From(append([]float32{}, batch[i*rowLen:(i+1)*rowLen]...), append([]int{1}, x.Shape[1:]...)...)
				_, out := runPlan(t, res.Plan, map[string]*tensor.Tensor{inName: one})
				got := out[outName].Data.([]float32)
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(full[i*per+j]) {
						t.Fatalf("%s %s: row %d alone differs from the batch of 8", name, prec, i)
					}
				}
			}
		}
	}
}

// TestInt8AccuracyAndCache: int8 stays within 0.5 pp of fp32 on the
// shared test data; the calibration cache, fed back without calibration
// data, rebuilds a byte-identical plan.
func TestInt8AccuracyAndCache(t *testing.T) {
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn"} {
		res, _ := build(t, name, reducedOptions(t, name, "int8"))
		acc := res.Report.Precision.Accuracy
		if acc == nil || acc.Drop > 0.5 {
			t.Fatalf("%s: int8 accuracy %+v, want a drop within 0.5 pp", name, acc)
		}
		t.Logf("%s: fp32 %.2f%% int8 %.2f%% agreement %.2f%%", name, acc.FP32, acc.Reduced, acc.Agreement)
		if len(res.CalibrationCache) == 0 {
			t.Fatalf("%s: no calibration cache", name)
		}
		c, err := quant.ParseCache(bytes.NewReader(res.CalibrationCache))
		if err != nil {
			t.Fatal(err)
		}
		o := reducedOptions(t, name, "int8")
		o.Quant.Calib = nil
		o.Quant.Cache = c
		again, _ := build(t, name, o)
		if !bytes.Equal(again.Plan, res.Plan) {
			t.Errorf("%s: plan from the calibration cache differs from the calibrated plan", name)
		}
	}
}

// TestBestFallsBack: with scales that clip badly (a doctored calibration
// cache), best returns layers to fp32, most sensitive first, until the
// accuracy drop is within bound, and logs why.
func TestBestFallsBack(t *testing.T) {
	o := reducedOptions(t, "digits_cnn", "best")
	o.Quant.Calib = nil
	o.Quant.Cache = &quant.Cache{Calibrator: "doctored", Scales: map[string]float32{"image": 0.001, "/Relu_output_0": 0.001, "/Flatten_output_0": 0.001}}
	res, log := build(t, "digits_cnn", o)
	if acc := res.Report.Precision.Accuracy; acc == nil || acc.Drop > 0.5 {
		t.Errorf("best left an accuracy drop of %+v", acc)
	}
	if log.Count("precision", "fallback") == 0 || len(res.Report.Precision.Fallbacks) == 0 {
		t.Fatalf("no fallback logged; report %+v", res.Report.Precision)
	}
	for _, f := range res.Report.Precision.Fallbacks {
		t.Logf("fallback %s: %s", f.Layer, f.Reason)
	}
}

func TestLayerPrecisionOverride(t *testing.T) {
	o := reducedOptions(t, "digits_cnn", "int8")
	o.Quant.LayerPrecision = map[string]string{"/fc/Gemm": "fp32"}
	res, _ := build(t, "digits_cnn", o)
	for _, l := range res.Report.Layers {
		want := "int8"
		if l.Name == "/fc/Gemm" || (l.Kind != "vouch.Q8" && l.Kind != "Q8") {
			want = "fp32"
		}
		if l.Precision != want {
			t.Errorf("layer %s (%s): precision %s, want %s", l.Name, l.Kind, l.Precision, want)
		}
	}
}
