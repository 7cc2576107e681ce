package gputest

import (
	"context"
	"fmt"
	"time"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// emulated checks that the CPU emulation of the plan's tensor cores
// (exec's device "emu", cuda/emu) gives the GPU's fast outputs gpu for
// the inputs in, bit for bit: the claim that lets a fast-mode decision
// replay on a machine without a GPU. A plan the emulation cannot run is
// reported, not failed (a fast kernel it has no arithmetic for).
func (s *fastSuite) emulated(ctx context.Context, label string, p *plan.Plan, in, gpu map[string]*tensor.Tensor) {
	e, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{Device: exec.DeviceEmu})
	if err != nil {
		fmt.Fprintf(s.w, "emulation %s: not run: %v\n", label, err)
		return
	}
	defer e.Close()
	t0 := time.Now()
	out, err := e.Run(ctx, in)
	if err != nil {
		s.fail("emulation %s: %v", label, err)
		return
	}
	fmt.Fprintf(s.w, "emulation %s: %.2f s on %s\n", label, time.Since(t0).Seconds(), e.DeviceName())
	for k, t := range gpu {
		if g, ok := t.Data.([]float32); ok {
			s.same(fmt.Sprintf("emulation %s: output %s, the CPU emulation == the GPU", label, k), out[k].Data.([]float32), g)
		}
	}
}
