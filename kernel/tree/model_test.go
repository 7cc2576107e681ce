package tree_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../../shared/models"

func loadModel(tb testing.TB, name string) (*exec.Executor, map[string]*tensor.Tensor, []*tensor.Tensor) {
	tb.Helper()
	m, err := onnx.DecodeFile(filepath.Join(models, name, "model.onnx"))
	if err != nil {
		tb.Skipf("model %s: %v", name, err)
	}
	ex, err := exec.New(m.Graph, builtin.Registry())
	if err != nil {
		tb.Fatal(err)
	}
	feeds := map[string]*tensor.Tensor{}
	for i, v := range m.Graph.Inputs {
		in, _, err := onnx.DecodeTensorFile(filepath.Join(models, name, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			tb.Fatal(err)
		}
		feeds[v.Name] = in
	}
	var want []*tensor.Tensor
	for i := range m.Graph.Outputs {
		o, _, err := onnx.DecodeTensorFile(filepath.Join(models, name, "test_data_set_0", fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			tb.Fatal(err)
		}
		want = append(want, o)
	}
	return ex, feeds, want
}

// TestSharedModels runs credit_xgb and digits_rf against their training
// library's predictions: labels exact, probabilities rtol 1e-5, atol 1e-6.
func TestSharedModels(t *testing.T) {
	for _, name := range []string{"credit_xgb", "digits_rf"} {
		t.Run(name, func(t *testing.T) {
			ex, feeds, want := loadModel(t, name)
			got, err := ex.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			lab := got["label"].Data.([]int64)
			wl := want[0].Data.([]int64)
			for i := range wl {
				if lab[i] != wl[i] {
					t.Errorf("row %d: label %d, want %d", i, lab[i], wl[i])
				}
			}
			p := got["probabilities"].Data.([]float32)
			wp := want[1].Data.([]float32)
			worst := 0.0
			for i := range wp {
				d := math.Abs(float64(p[i]) - float64(wp[i]))
				worst = max(worst, d)
				if d > 1e-6+1e-5*math.Abs(float64(wp[i])) {
					t.Errorf("probabilities[%d] = %v, want %v", i, p[i], wp[i])
				}
			}
			t.Logf("%d rows, max abs diff %.3g", len(wl), worst)
		})
	}
}
