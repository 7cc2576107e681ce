package compile_test

import (
	"testing"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// runPlanOn is runPlan with the executor's kernels run as cpu says
// (instruction-set level, threads): the same bits at every setting.
func runPlanOn(t testing.TB, b []byte, feeds map[string]*tensor.Tensor, cpu exec.CPU) map[string]*tensor.Tensor {
	t.Helper()
	p, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SelectProfile(feeds); err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(p.Graph, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.SetCPU(cpu); err != nil {
		t.Fatal(err)
	}
	out, err := ex.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
