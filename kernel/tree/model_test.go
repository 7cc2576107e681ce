package tree_test

import (
	"bytes"
	"fmt"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/tree"
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

// TestCreditSHAPBackground measures how close TreeSHAP with covers from
// background data (the 256 test rows: the ONNX file has no covers) comes
// to XGBoost's exact contributions, which use training-set hessian
// covers. It asserts local accuracy; the distance is reported, not
// asserted: the two use different covers, so they are different (both
// exact) explanations.
func TestCreditSHAPBackground(t *testing.T) {
	m, err := onnx.DecodeFile(filepath.Join(models, "credit_xgb", "model.onnx"))
	if err != nil {
		t.Skipf("credit_xgb: %v", err)
	}
	e, err := tree.FromNode(m.Graph.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	xt, _, err := onnx.DecodeTensorFile(filepath.Join(models, "credit_xgb", "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := onnx.DecodeTensorFile(filepath.Join(models, "credit_xgb", "data", "shap_contribs.pb"))
	if err != nil {
		t.Fatal(err)
	}
	x := xt.Data.([]float32)
	rows, nf := xt.Shape[0], xt.Shape[1]
	if err := e.CoversFromData(x, rows); err != nil {
		t.Fatal(err)
	}
	want := ref.Data.([]float32)
	got := make([]float64, nf+1)
	worst, top1, top3 := 0.0, 0, 0
	for r := 0; r < rows; r++ {
		row := x[r*nf : (r+1)*nf]
		if err := e.SHAP(row, nf, got); err != nil {
			t.Fatal(err)
		}
		var mg [1]float64
		e.Margin(row, mg[:])
		sum, wsum := 0.0, 0.0
		for j := 0; j <= nf; j++ {
			sum += got[j]
			wsum += float64(want[r*(nf+1)+j])
			worst = max(worst, math.Abs(got[j]-float64(want[r*(nf+1)+j])))
		}
		if math.Abs(sum-mg[0]) > 1e-5 || math.Abs(wsum-mg[0]) > 1e-4 {
			t.Fatalf("row %d: contributions sum to %v (XGBoost's to %v), margin %v", r, sum, wsum, mg[0])
		}
		a, b := topK(got[:nf], 3), topK32(want[r*(nf+1):r*(nf+1)+nf], 3)
		if a[0] == b[0] {
			top1++
		}
		if sameSet(a, b) {
			top3++
		}
	}
	t.Logf("credit_xgb, background covers from the %d test rows: max abs diff from XGBoost %.3g; top reason agrees on %d/%d rows, top-3 set on %d/%d",
		rows, worst, top1, rows, top3, rows)
}

func topK(v []float64, k int) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return math.Abs(v[idx[a]]) > math.Abs(v[idx[b]]) })
	return idx[:k]
}

func topK32(v []float32, k int) []int {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return topK(f, k)
}

func sameSet(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// TestSharedModelsThreads: the shared models' outputs at 256 rows (enough
// for the pool to split them) are the same bits at 1, 2 and 4 workers and
// on both tactics.
func TestSharedModelsThreads(t *testing.T) {
	for _, name := range []string{"credit_xgb", "digits_rf"} {
		m, err := onnx.DecodeFile(filepath.Join(models, name, "model.onnx"))
		if err != nil {
			t.Skipf("%s: %v", name, err)
		}
		n := m.Graph.Nodes[0]
		e, err := tree.Prepared(n)
		if err != nil {
			t.Fatal(err)
		}
		nf := e.NumFeatures()
		x := make([]float32, 256*nf)
		for i := range x {
			x[i] = float32((i*7919)%1000)/100 - 3
			if i%37 == 0 {
				x[i] = float32(math.NaN())
			}
		}
		in := []*tensor.Tensor{tensor.From(x, 256, nf)}
		var ref [][]byte
		for _, tac := range []string{tree.TacticWalk, tree.TacticCompiled} {
			n.Attrs[kernel.TacticAttr] = &ir.Attr{Kind: ir.AttrString, S: tac}
			for _, w := range []int{1, 2, 4} {
				p := parallel.New(w)
				out, err := tree.Ops()[n.OpType].Run(&kernel.Ctx{Pool: p}, n, in)
				p.Close()
				if err != nil {
					t.Fatal(err)
				}
				got := [][]byte{tensor.RawBytes(out[0]), tensor.RawBytes(out[1])}
				if ref == nil {
					ref = got
				} else if !bytes.Equal(got[0], ref[0]) || !bytes.Equal(got[1], ref[1]) {
					t.Fatalf("%s: tactic %s at %d workers differs", name, tac, w)
				}
			}
		}
		delete(n.Attrs, kernel.TacticAttr)
	}
}
