package compile_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// TestInt8WeightBits7: --int8-weight-bits 7 gives int8 layers whose
// weights lie in [-63, 63] and carry w_bits 7, records the width in the
// plan's options and the build report (with its accuracy figures), and
// the plan decodes; a width other than 7 or 8 is refused.
func TestInt8WeightBits7(t *testing.T) {
	r := rand.New(rand.NewPCG(70, 7))
	o := compile.DefaultOptions()
	o.Tactics = "heuristic"
	o.Precision = "int8"
	o.Quant.WeightBits = 7
	for i := 0; i < 4; i++ {
		o.Quant.Calib = append(o.Quant.Calib, normalBatch(r, 1))
	}
	o.Quant.EvalData = []*tensor.Tensor{normalBatch(r, 1), normalBatch(r, 1)}
	res, err := compile.Build(chainModel(false), []byte("chain"), "chain", "test", o, builtin.Registry(), buildlog.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if pr := res.Report.Precision; pr == nil || pr.WeightBits != 7 || pr.Accuracy == nil {
		t.Fatalf("report: %+v, want weight_bits 7 and accuracy figures", pr)
	}
	var opts map[string]any
	if err := json.Unmarshal(p.Header.Options, &opts); err != nil || !strings.Contains(string(p.Header.Options), `"weight_bits":7`) {
		t.Fatalf("plan options %s (%v): want weight_bits 7", p.Header.Options, err)
	}
	n7 := 0
	for _, n := range p.Graph.Nodes {
		if n.Domain != fused.Domain || n.OpType != fused.OpQ8 {
			continue
		}
		if n.Int(q8.AttrWeightBits, 8) != 7 {
			t.Fatalf("%s: w_bits %d, want 7", n.Name, n.Int(q8.AttrWeightBits, 8))
		}
		for _, v := range p.Graph.Initializers[n.Inputs[1]].Data.([]int8) {
			if v < -q8.WeightBits7Max || v > q8.WeightBits7Max {
				t.Fatalf("%s: weight %d outside 7 bits", n.Name, v)
			}
		}
		n7++
	}
	if n7 == 0 {
		t.Fatal("no int8 layer")
	}
	o.Quant.WeightBits = 5
	if _, err := compile.Build(chainModel(false), []byte("chain"), "chain", "test", o, builtin.Registry(), buildlog.New(nil)); err == nil || !strings.Contains(err.Error(), "weight bits 5") {
		t.Fatalf("weight bits 5: %v, want an error", err)
	}
}
