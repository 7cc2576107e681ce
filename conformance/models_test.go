package conformance

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

var modelsDir = flag.String("models", "../../shared/models", "the shared model fixtures (real PyTorch exports with reference outputs)")

// Model tolerances (issue: engine core, item 8).
const modelRTol, modelATol = 1e-4, 1e-5

// TestSharedModels runs each shared model on its reference input and
// matches the PyTorch reference output.
func TestSharedModels(t *testing.T) {
	if _, err := os.Stat(*modelsDir); err != nil {
		t.Fatalf("shared models not found at %s (run from a checkout with ../shared beside it, or set -models): %v", *modelsDir, err)
	}
	reg := builtin.Registry()
	for _, name := range SharedModels {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(*modelsDir, name)
			m, err := onnx.DecodeFile(filepath.Join(dir, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			ex, err := exec.New(m.Graph, reg)
			if err != nil {
				t.Fatal(err)
			}
			feeds := map[string]*tensor.Tensor{}
			for i, v := range m.Graph.Inputs {
				in, _, err := onnx.DecodeTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
				if err != nil {
					t.Fatal(err)
				}
				feeds[v.Name] = in
			}
			got, err := ex.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range m.Graph.Outputs {
				want, _, err := onnx.DecodeTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("output_%d.pb", i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := Compare(got[o.Name], want, modelRTol, modelATol); err != nil {
					t.Errorf("output %q: %v", o.Name, err)
				}
			}
		})
	}
}
