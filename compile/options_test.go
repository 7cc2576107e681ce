package compile_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/quant"
)

// boundOf returns the accuracy bound the precision pass used under best.
func boundOf(t *testing.T, log *buildlog.Log) float64 {
	t.Helper()
	for _, r := range log.Records {
		if r.Pass == "precision" && (r.Event == "within-bound" || r.Event == "bound-unmet") {
			return r.Fields["bound_pp"].(float64)
		}
	}
	t.Fatal("no within-bound or bound-unmet record in the build log")
	return 0
}

// An explicit --max-accuracy-drop 0 means no drop (it became 0.5 when 0
// stood for the default), and is kept in the plan's options; the default
// is left out of them, so DefaultOptions gives the plan of the zero value.
func TestMaxAccuracyDropZero(t *testing.T) {
	doctored := func(o compile.Options) compile.Options {
		o.Quant.Calib = nil
		o.Quant.Cache = &quant.Cache{Calibrator: "doctored", Scales: map[string]float32{"image": 0.001, "/Relu_output_0": 0.001, "/Flatten_output_0": 0.001}}
		return o
	}
	o := doctored(reducedOptions(t, "digits_cnn", "best"))
	_, log := build(t, "digits_cnn", o)
	if b := boundOf(t, log); b != compile.DefaultMaxAccuracyDrop {
		t.Errorf("default bound %v, want %v", b, compile.DefaultMaxAccuracyDrop)
	}
	zero := 0.0
	o = doctored(reducedOptions(t, "digits_cnn", "best"))
	o.Quant.MaxAccuracyDrop = &zero
	res, log := build(t, "digits_cnn", o)
	if b := boundOf(t, log); b != 0 {
		t.Errorf("explicit 0: bound %v, want 0", b)
	}
	if !bytes.Contains(res.Options, []byte(`"max_accuracy_drop":0`)) {
		t.Errorf("explicit 0 is not in the plan's options: %s", res.Options)
	}
	if acc := res.Report.Precision.Accuracy; acc != nil && acc.Drop > 0 && log.Count("precision", "bound-unmet") == 0 {
		t.Errorf("bound 0 left a drop of %v pp without saying so", acc.Drop)
	}

	// The defaults spelled out and left zero give one plan.
	def, _ := build(t, "breast_cancer_mlp", compile.DefaultOptions())
	var bare compile.Options
	bare.Precision, bare.Tactics, bare.TuneReps, bare.TargetFeatures = "fp32", compile.TacticsHeuristic, 5, []string{}
	zeroed, _ := build(t, "breast_cancer_mlp", bare)
	if !bytes.Equal(def.Plan, zeroed.Plan) {
		t.Errorf("DefaultOptions and zero-valued settings give different plans:\n%s\n%s", def.Options, zeroed.Options)
	}
	var opts map[string]any
	if err := json.Unmarshal(def.Options, &opts); err != nil {
		t.Fatal(err)
	}
	if _, ok := opts["quant"]; ok {
		t.Errorf("default quantization settings are serialised: %s", def.Options)
	}
}

// A required pass cannot be disabled, and an unknown name is an error.
func TestDisablePass(t *testing.T) {
	for _, c := range []struct{ pass, want string }{
		{"name-nodes", `pass "name-nodes" is required`},
		{"fuse-everything", `no pass "fuse-everything" to disable`},
	} {
		o := compile.DefaultOptions()
		o.DisabledPasses = []string{c.pass}
		path := filepath.Join(models, "breast_cancer_mlp", "model.onnx")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := onnx.Decode(src, filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		_, err = compile.Build(m, src, "breast_cancer_mlp", "test", o, builtin.Registry(), buildlog.New(nil))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("disabling %s: %v, want %q", c.pass, err, c.want)
		}
	}
	o := compile.DefaultOptions()
	o.DisabledPasses = []string{"fuse-activation"}
	if _, log := build(t, "breast_cancer_mlp", o); log.Count("fuse-activation", "skipped") != 1 {
		t.Error("an optional pass disabled was not skipped")
	}
}
