package gputest

import (
	"context"
	"fmt"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// planCPU checks a GPU plan's outputs at one batch, from the serving
// engine on the device (got), against the same plan run by the CPU engine
// on the same inputs: exact mode's contract, bit for bit, at the batch
// sizes the plan is timed at (not only at the shared models' batch of 1).
func (s *suite) planCPU(path string, p *plan.Plan, batch int, in, got map[string]*tensor.Tensor) error {
	cpu, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{})
	if err != nil {
		return fmt.Errorf("gputest: %s on the CPU: %w", path, err)
	}
	defer cpu.Close()
	want, err := cpu.Run(context.Background(), in)
	if err != nil {
		return fmt.Errorf("gputest: %s batch %d on the CPU: %w", path, batch, err)
	}
	for name, w := range want {
		wf, ok := w.Data.([]float32)
		g := got[name]
		if !ok || g == nil {
			return fmt.Errorf("gputest: %s batch %d: output %s missing or not float32", path, batch, name)
		}
		s.record(fmt.Sprintf("plan %s batch %d: output %s on the GPU == the CPU engine", path, batch, name), g.Data.([]float32), wf, true)
	}
	return nil
}
