package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestZooScaling: the scaling run profiles a model at 1 and 2 threads,
// sums its layers and reports the layers slower on 2 threads by the
// margins; a missing model is a row with its reason, not a failure.
func TestZooScaling(t *testing.T) {
	dir := t.TempDir()
	writeZooModel(t, dir, "mlp", "Relu", 64, 32, func([]float32) {})
	var out bytes.Buffer
	// Margins no layer can pass: no layer is listed.
	c := ZooScalingCommand{Dir: dir, Only: []string{"mlp", "absent"}, Rounds: 2, Runs: 3, SlowFrac: 1e9, JSON: true, Stdout: &out}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []ScalingRow `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	r := rep.Rows[0]
	if r.Model != "mlp" || r.Reason != "" || r.Layers < 1 || r.T1 <= 0 || r.T2 <= 0 || r.Speedup <= 0 || len(r.Slower) != 0 {
		t.Fatalf("row %+v", r)
	}
	if rep.Rows[1].Reason == "" {
		t.Fatalf("a missing model has no reason: %+v", rep.Rows[1])
	}
	// Margins every timed layer passes when its 2-thread time is longer:
	// each listed layer is slower by the definition.
	out.Reset()
	c = ZooScalingCommand{Dir: dir, Only: []string{"mlp"}, Rounds: 1, Runs: 3, SlowFrac: 1e-9, SlowMin: time.Nanosecond, Stdout: &out}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1 models profiled: geomean speed-up") || !strings.Contains(out.String(), "layers slower on 2") {
		t.Fatalf("table:\n%s", out.String())
	}
}
