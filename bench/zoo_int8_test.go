package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/vouchml/vouch/tensor"
)

// TestZooInt8: the int8 run builds a named model at fp32 and int8, times
// both and reports its int8 layers and agreement; without names it keeps
// only the CNNs (none here).
func TestZooInt8(t *testing.T) {
	dir := t.TempDir()
	writeZooModel(t, dir, "mlp", "Relu", 64, 32, func([]float32) {})
	var out bytes.Buffer
	c := ZooInt8Command{Dir: dir, Only: []string{"mlp"}, Runs: 3, Calib: 4, Eval: 4, JSON: true, Stdout: &out}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows     []ZooInt8Row `json:"rows"`
		Geomean  float64      `json:"geomean_speedup"`
		Compared int          `json:"compared"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Compared != 1 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	r := rep.Rows[0]
	if r.Status != ZooOK || !r.AVX2Bits || r.Int8 != 1 || r.Weighted != 1 || r.FP32 <= 0 || r.Q8 <= 0 || r.ReportSamples != 4 || r.MaxAbs == 0 ||
		r.Chains != "0/1 as u8; 1 graph output" ||
		math.Abs(rep.Geomean-r.Speedup) > 1e-9 {
		t.Fatalf("row %+v, geomean %v", r, rep.Geomean)
	}
	out.Reset()
	c.Only, c.JSON = nil, false
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte("0 models, 0 timed")) {
		t.Fatalf("the MLP is not a CNN, yet:\n%s", out.String())
	}
}

// TestCompareOutputs: the argmax agreement runs over axis 1 (classes, or
// a segmentation map's channels per pixel).
func TestCompareOutputs(t *testing.T) {
	// [1, 3 classes, 2 pixels]: pixel 0's argmax 2 in both, pixel 1's 0 vs 1.
	a := tensor.From([]float32{0, 5, 1, 0, 2, 1}, 1, 3, 2)
	b := tensor.From([]float32{0, 1, 1, 6, 2.5, 1}, 1, 3, 2)
	agree, maxErr, maxAbs := compareOutputs(a, b)
	if agree != 50 || maxErr != 6 || maxAbs != 5 {
		t.Fatalf("agreement %v, max err %v, max abs %v", agree, maxErr, maxAbs)
	}
}
