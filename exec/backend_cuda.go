package exec

import (
	"context"
	"fmt"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/engine"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// openCUDA loads p's GPU section on CUDA device d (the driver found where
// cuda.Find looks). Without a driver the error wraps cuda.ErrNoDriver and
// ErrDevice.
func openCUDA(p *plan.Plan, d Device, ex *Executor) (Program, error) {
	drv, err := cuda.Open("")
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrDevice, d, err)
	}
	prog, err := engine.Open(drv, d.Ordinal, p, ex.cpuLayer)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrDevice, d, err)
	}
	return prog, nil
}

// cpuLayer runs one top-level layer of a GPU plan that the plan keeps on
// the CPU, with the executor's kernels and kernel context (subgraph
// runner, worker pool) under its limits, as a CPU run of the plan would.
func (e *Executor) cpuLayer(ctx context.Context, n *ir.Node, in []*tensor.Tensor, outer map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	r := newRun(e.limits)
	r.ctx = ctx
	if outer == nil {
		outer = map[string]*tensor.Tensor{}
	}
	return e.runNode(n, in, outer, r, false)
}
