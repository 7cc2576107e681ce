package compile_test

import (
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// TestInt8PlanAllocs: a bound int8 (and fp16) plan executes without
// allocating once warm, like an fp32 plan (exec's TestExecuteAllocs).
func TestInt8PlanAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	for _, name := range []string{"breast_cancer_mlp", "digits_cnn"} {
		for _, prec := range []string{"int8", "fp16"} {
			res, _ := build(t, name, reducedOptions(t, name, prec))
			p, err := plan.Decode(res.Plan)
			if err != nil {
				t.Fatal(err)
			}
			x := loadData(t, name, "test_x.pb")
			rowLen := x.Len() / x.Shape[0]
			in := []*tensor.Tensor{tensor.From(append([]float32{}, x.Data.([]float32)[:4*rowLen]...), append([]int{4}, x.Shape[1:]...)...)}
			ex, err := exec.New(p.Graph, builtin.Registry())
			if err != nil {
				t.Fatal(err)
			}
			b, err := ex.Bind([][]int{in[0].Shape})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if _, err := b.Execute(in); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := b.Execute(in); err != nil {
					t.Fatal(err)
				}
			})
			var missing []string
			for _, n := range b.Allocating() {
				missing = append(missing, n.Name+" ("+n.OpType+")")
			}
			if allocs != 0 || len(missing) > 0 {
				t.Errorf("%s %s: %.0f allocations per Execute; layers without Into: %v", name, prec, allocs, missing)
			}
		}
	}
}
