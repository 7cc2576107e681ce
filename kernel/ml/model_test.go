package ml_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/ml"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

const models = "../../../shared/models"

// registry holds this package's operators alone: the ml models need no
// others, and the tests then do not depend on the other families.
func registry() *kernel.Registry {
	r := kernel.NewRegistry("")
	r.Add(ml.Domain, ml.Ops())
	return r
}

func loadModel(tb testing.TB, name string) (*exec.Executor, *ir.Model, map[string]*tensor.Tensor) {
	tb.Helper()
	dir := filepath.Join(models, name)
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("VOUCH_CI") == "1" {
			tb.Fatalf("shared model %s missing: %v", name, err)
		}
		tb.Skipf("shared model %s missing: %v", name, err)
	}
	m, err := onnx.DecodeFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		tb.Fatal(err)
	}
	ex, err := exec.New(m.Graph, registry())
	if err != nil {
		tb.Fatal(err)
	}
	feeds := map[string]*tensor.Tensor{}
	for i, v := range m.Graph.Inputs {
		in, _, err := onnx.DecodeTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			tb.Fatal(err)
		}
		feeds[v.Name] = in
	}
	return ex, m, feeds
}

// TestCancerLogreg runs the shared Scaler + LinearClassifier model on its
// 569 reference rows: probabilities within rtol 1e-5 / atol 1e-6 of
// scikit-learn's predict_proba, labels exact.
func TestCancerLogreg(t *testing.T) {
	ex, m, feeds := loadModel(t, "cancer_logreg")
	got, err := ex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(models, "cancer_logreg", "test_data_set_0")
	for i, o := range m.Graph.Outputs {
		want, _, err := onnx.DecodeTensorFile(filepath.Join(dir, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		g := got[o.Name]
		if g == nil || g.DType != want.DType || fmt.Sprint(g.Shape) != fmt.Sprint(want.Shape) {
			t.Fatalf("output %s: got %v, want %v", o.Name, g, want)
		}
		switch w := want.Data.(type) {
		case []int64:
			for j, v := range g.Data.([]int64) {
				if v != w[j] {
					t.Errorf("label %d: got %d, want %d", j, v, w[j])
				}
			}
		case []float32:
			worst := 0.0
			for j, v := range g.Data.([]float32) {
				d := math.Abs(float64(v) - float64(w[j]))
				worst = max(worst, d)
				if d > 1e-6+1e-5*math.Abs(float64(w[j])) {
					t.Errorf("probability %d: got %g, want %g", j, v, w[j])
				}
			}
			t.Logf("%s: largest difference %.3g", o.Name, worst)
		}
	}
}

// TestCancerLogregBuiltAndBatch: built into a plan (compile, encode,
// decode) the model gives the direct run's bits, and every row alone gives
// the bits it has in the 569-row batch.
func TestCancerLogregBuiltAndBatch(t *testing.T) {
	ex, m, feeds := loadModel(t, "cancer_logreg")
	direct, err := ex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(models, "cancer_logreg", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := compile.Build(m, src, "cancer_logreg", "test", compile.DefaultOptions(), builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	pex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	planned, err := pex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range direct {
		if !bytes.Equal(tensor.RawBytes(v), tensor.RawBytes(planned[k])) {
			t.Errorf("output %s: the plan's bits differ from the direct run's", k)
		}
	}
	x := feeds["X"]
	rows, cols := x.Shape[0], x.Shape[1]
	// Bound to the batch's shape, every layer runs allocation-free, with
	// the bits of the allocating run.
	b, err := pex.Bind([][]int{x.Shape})
	if err != nil {
		t.Fatal(err)
	}
	if a := b.Allocating(); len(a) != 0 {
		t.Errorf("allocating layers: %v", a)
	}
	bout, err := b.Execute([]*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range p.Graph.Outputs {
		if !bytes.Equal(tensor.RawBytes(bout[i]), tensor.RawBytes(planned[o.Name])) {
			t.Errorf("output %s: the bound run's bits differ", o.Name)
		}
	}
	for r := 0; r < rows; r += 7 {
		one := tensor.From(append([]float32{}, x.Data.([]float32)[r*cols:(r+1)*cols]...), 1, cols)
		got, err := pex.Run(map[string]*tensor.Tensor{"X": one})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range got {
			b, all := tensor.RawBytes(v), tensor.RawBytes(planned[k])
			if !bytes.Equal(b, all[r*len(b):(r+1)*len(b)]) {
				t.Fatalf("row %d output %s: alone %v, in the batch differs", r, k, v.Data)
			}
		}
	}
}
