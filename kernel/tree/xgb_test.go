package tree

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vouchml/vouch/onnx"
)

// readTable reads a whitespace-separated table of numbers ("nan" allowed).
func readTable(t *testing.T, path string) [][]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var row []float64
		for _, f := range strings.Fields(line) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows
}

// TestSHAPMatchesXGBoost: with XGBoost's own covers (SetCovers), TreeSHAP
// on the ONNX form of an XGBoost model reproduces XGBoost's pred_contribs
// (scripts/make-xgb-fixture.py) within 1e-5, NaN rows included.
func TestSHAPMatchesXGBoost(t *testing.T) {
	m, err := onnx.DecodeFile("testdata/xgb_small.onnx")
	if err != nil {
		t.Fatal(err)
	}
	e, err := FromNode(m.Graph.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SHAP(make([]float32, 6), 6, make([]float64, 7)); err != ErrNoCovers {
		t.Fatalf("SHAP without covers: %v, want ErrNoCovers (the hitrates are all 1)", err)
	}
	var covers []float64
	for _, r := range readTable(t, "testdata/xgb_covers.txt") {
		covers = append(covers, r[0])
	}
	if err := e.SetCovers(covers); err != nil {
		t.Fatal(err)
	}
	xs := readTable(t, "testdata/xgb_x.txt")
	want := readTable(t, "testdata/xgb_contribs.txt")
	margins := readTable(t, "testdata/xgb_margin.txt")
	nf := e.NumFeatures()
	worst := 0.0
	for r, row := range xs {
		x := make([]float32, len(row))
		for i, v := range row {
			x[i] = float32(v)
		}
		got := make([]float64, nf+1)
		if err := e.SHAP(x, nf, got); err != nil {
			t.Fatal(err)
		}
		var mg [1]float64
		e.Margin(x, mg[:])
		if d := math.Abs(mg[0] - margins[r][0]); d > 1e-5 {
			t.Errorf("row %d: margin %v, XGBoost %v", r, mg[0], margins[r][0])
		}
		for j := range got {
			d := math.Abs(got[j] - want[r][j])
			worst = max(worst, d)
			if d > 1e-5 {
				t.Errorf("row %d feature %d: %v, XGBoost %v", r, j, got[j], want[r][j])
			}
		}
	}
	t.Logf("%d rows: max abs difference from XGBoost %.3g", len(xs), worst)
}
