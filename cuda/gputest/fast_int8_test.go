package gputest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
)

// The int8 CPU build's calibration names the values the fast plan's
// layers read: with its scales every convolution of resnet18 (the stem,
// each body convolution of its chain) and its classifier get INT8
// kernels, no layer a "no int8 scale" note.
func TestFastOptionsInt8Scales(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two builds of resnet18")
	}
	path := filepath.Join("../../../shared/models", "resnet18", "model.onnx")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("shared model: %v", err)
	}
	m, err := onnx.Decode(src, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	res, err := compile.Build(m, src, "resnet18", "test", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	fo, err := fastOptions(path, src, "resnet18", res.Graph, plan.Int8)
	if err != nil {
		t.Fatal(err)
	}
	if len(fo.Scales) == 0 {
		t.Fatal("no scales")
	}
	got, notes := engine.PlaceFast(res.Graph, res.Graph.Types, fo)
	for _, n := range notes {
		t.Errorf("note %s", n)
	}
	nfast := 0
	for _, l := range got {
		if strings.HasPrefix(l.Kernel, "fast.int8.") {
			nfast++
			if strings.Contains(l.Kernel, "exact") {
				t.Errorf("%s: %s", l.Layer, l.Kernel)
			}
		}
	}
	if nfast != 3 {
		t.Errorf("%d int8 layers, want 3 (stem, chain, classifier): %v", nfast, got)
	}
	if o, err := fastOptions(path, src, "resnet18", res.Graph, plan.FP16); err != nil || o.Scales != nil {
		t.Errorf("fp16 options %+v %v", o, err)
	}
}
